package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// BenchmarkAccountCommands runs the account commands of issue 28's
// targets in process, as `blanket account ...` runs them (bounds and
// baselines side by side, plugins' declarations included), from a cold
// memo each time: what a user waits for, less the process's start.
func BenchmarkAccountCommands(b *testing.B) {
	for _, c := range []string{
		"eps --mech hadamard:k=256 --eps0 0.5 --n 1e8 --delta 1e-6",
		"eps --mech generic --eps0 0.5 --n 1e8 --delta 1e-6",
		"eps --mech krr:k=2 --eps0 0.5 --n 1e8 --delta 1e-6",
		"eps --mech laplace --eps0 1 --n 1e6 --delta 1e-6",
		"eps --mech laplace --eps0 2 --n 1e6 --rounds 365 --delta 1e-6",
		"eps --mech krr:k=2 --eps0 0.5 --n 1e6 --rounds 365 --delta 1e-6",
		"eps --mech krr:k=10 --eps0 1 --n 1e6 --rounds 365 --delta 1e-6",
		"delta --mech krr:k=10 --eps0 1 --n 1e6 --rounds 365 --eps 1",
		"calibrate --mech krr:k=100 --eps 1 --delta 1e-6 --n 1e7",
		"calibrate --mech hadamard:k=64 --eps 2 --n 1e7 --delta 1e-8",
		"calibrate --mech laplace --eps 2 --n 1e7 --delta 1e-8",
		"calibrate --mech krr:k=100 --eps 4 --n 1e7 --delta 1e-10",
		"delta --mech hadamard:k=64 --eps0 20 --n 1e7 --eps 2",
		// Large eps0 at small n: lower-bound sets with rare, far-out
		// atoms (dominated.go, compound.go) and a set whose lattice
		// widened at every refinement (epsUpper's stop).
		"eps --mech hadamard:k=64 --eps0 20 --n 1e6 --delta 1e-8",
		"eps --mech hadamard:k=64 --eps0 20 --n 1e5 --delta 1e-8",
		"eps --mech laplace --eps0 16 --n 1e3 --delta 1e-8",
		// A lower search whose lattice's lower end is 0 at small eps
		// (scanLower) and far atoms (tiltedWeight); an upper search
		// steered by the compound path.
		"eps --mech laplace --eps0 20 --n 1e5 --delta 1e-8",
		"eps --mech krr:k=1000 --eps0 20 --n 1e8 --delta 1e-8",
		// A horizon calibration whose clone_composed baseline took most
		// of the time (the sparse path's pair walks, before its relative
		// cut), and one whose time is the lattice's profile points.
		"calibrate --mech krr:k=10 --eps 1 --delta 1e-6 --n 1e6 --rounds 30",
		"calibrate --mech krr:k=100 --eps 1 --delta 1e-6 --n 1e6 --rounds 30",
		// Horizon calibrations at rounds 365: one whose time was mostly
		// the matrix decomposition at every budget probed (its keys and
		// its repeats: atomkey.go, decompose_memo.go), and one whose
		// time is lattices of near point-mass laws that keep every
		// coefficient (Laplace at eps0 near 10 and n = 1e6).
		"calibrate --mech hadamard:k=64 --eps 1 --delta 1e-6 --n 1e6 --rounds 365",
		"calibrate --mech laplace --eps 1 --delta 1e-6 --n 1e6 --rounds 365",
		// One whose first probe, far above its answer, was nearly all of
		// its time (horizon_fails.go), and one whose kov15 baseline's
		// calibrations at eps/365 were (the sparse path's counts).
		"calibrate --mech krr:k=10 --eps 0.5 --delta 1e-9 --n 1e6 --rounds 365",
		"calibrate --mech krr:k=2 --eps 0.5 --delta 1e-6 --n 1e6 --rounds 365",
	} {
		args := append([]string{"account"}, strings.Fields(c)...)
		b.Run(strings.ReplaceAll(c, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				accountant.ForgetMemo()
				if code := run(context.Background(), args, io.Discard, io.Discard, defaultEnv()); code != 0 {
					b.Fatalf("exit %d", code)
				}
			}
		})
	}
}
