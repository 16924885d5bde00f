package laplace

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// TestGrid: the grid step is the library's: every sample is a multiple of
// it and, at eps0 = 1, some sample is an odd multiple (so the step is not
// smaller than what the library uses), and Grid follows its formula.
func TestGrid(t *testing.T) {
	for eps0, want := range map[float64]float64{1: 0x1p-40, 0.5: 0x1p-39, 2: 0x1p-41, 3: 0x1p-41, 0.3: 0x1p-38} {
		if g := Grid(eps0); g != want {
			t.Errorf("Grid(%g) = %g, want %g", eps0, g, want)
		}
	}
	r, err := New(Options{Lo: 0, Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, eps0 := range []float64{0.3, 1, 3} {
		// 64 samples: if the step were the grid's, each is an odd
		// multiple with chance about 1/2, so all 64 even has chance
		// 2^-64 (8 samples failed 1 run in 256 per eps0).
		in := make([]float64, 64)
		for i := range in {
			in[i] = float64(i%10) / 10
		}
		reps, err := r.Randomize(context.Background(), eps0, sdk.Inputs{Reals: in})
		if err != nil {
			t.Fatal(err)
		}
		odd := false
		for _, rep := range reps {
			k, err := Decode(rep, eps0)
			if err != nil {
				t.Fatalf("eps0 %g: %v", eps0, err)
			}
			odd = odd || k%2 != 0
		}
		if !odd {
			t.Errorf("eps0 %g: %d samples all even multiples of the step %g: the library's step is coarser", eps0, len(reps), Grid(eps0))
		}
	}
}

// TestDeclarationMasses checks the declared bins against a second
// derivation, the continuous Laplace law the geometric approximates:
// sum_{k=a..b} t·u^k is (e^(-lam·a) - e^(-lam(b+1)))/2 up to a relative
// O(lam) (about 1e-12), and the ends' ratios are those of the runs'
// first and last outputs.
func TestDeclarationMasses(t *testing.T) {
	const eps0 = 1.5
	d := Declaration(eps0, 4)
	if err := accountant.Validate(d); err != nil {
		t.Fatal(err)
	}
	b := newBinning(eps0, 4)
	lam, m := b.lam, float64(b.m)
	cont := func(a, z float64) float64 { return (math.Exp(-lam*a) - math.Exp(-lam*(z+1))) / 2 }
	pair := d.Pairs[0].Bins
	if len(pair) != 2*4+2 {
		t.Fatalf("%d bins, want 10", len(pair))
	}
	for i, run := range b.runs() {
		a, z := float64(run[0]), float64(run[1])
		bin := pair[i+1]
		wantP := cont(a, z)
		wantQ := cont(m-z, m-a)
		if math.Abs(bin.P/wantP-1) > 1e-9 || math.Abs(bin.Q/wantQ-1) > 1e-9 {
			t.Errorf("bin %d [%g, %g]: p %g q %g, continuous law %g %g", i+1, a, z, bin.P, bin.Q, wantP, wantQ)
		}
		if wantR := math.Min(wantP, wantQ); math.Abs(bin.R/wantR-1) > 1e-9 {
			t.Errorf("bin %d: r %g, want %g", i+1, bin.R, wantR)
		}
	}
	var p, q float64
	for _, bin := range pair {
		p += bin.P
		q += bin.Q
	}
	if math.Abs(p-1) > 1e-13 || math.Abs(q-1) > 1e-13 {
		t.Errorf("masses sum to %v and %v", p, q)
	}
	if e := pair[0].Lo[0]; math.Abs(math.Log(e)-eps0) > 1e-9 || math.Log(e) > eps0 {
		t.Errorf("tail ratio e^%v, want just below e^eps0", math.Log(e))
	}
}

// TestSamplerMatchesDeclaration draws from the library at the pair's two
// inputs and tests the bins' frequencies against the declared masses P and
// Q (Pearson's chi-square; bins below 5 expected draws merged; a false
// failure has probability 1e-6 per input). 25,000 draws per input; the
// 100,000 of TestSamplerMatchesDeclarationDeep (make audit) take 25 s of
// CPU under make test's -race.
func TestSamplerMatchesDeclaration(t *testing.T) {
	samplerMatchesDeclaration(t, 25_000)
}

// samplerMatchesDeclaration runs TestSamplerMatchesDeclaration with draws
// reports per input.
func samplerMatchesDeclaration(t *testing.T, draws int) {
	const eps0 = 1.0
	r, err := New(Options{Lo: -5, Hi: 5})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Declare(context.Background(), eps0)
	if err != nil {
		t.Fatal(err)
	}
	bins := d.Pairs[0].Bins
	for side, x := range d.Pairs[0].Inputs {
		in := make([]float64, draws)
		for i := range in {
			in[i] = x
		}
		reps, err := r.Randomize(context.Background(), eps0, sdk.Inputs{Reals: in})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := r.Outputs(context.Background(), eps0, reps)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]float64, len(bins))
		for _, o := range outs {
			counts[o]++
		}
		var stat, expSum, obsSum float64
		cells := 0
		for i, b := range bins {
			e := b.P
			if side == 1 {
				e = b.Q
			}
			expSum += e * float64(draws)
			obsSum += counts[i]
			if expSum >= 5 || i == len(bins)-1 {
				stat += (obsSum - expSum) * (obsSum - expSum) / expSum
				cells++
				expSum, obsSum = 0, 0
			}
		}
		crit := distuv.ChiSquared{K: float64(cells - 1)}.Quantile(1 - 1e-6)
		if stat > crit {
			t.Errorf("input %g: chi-square %.1f over %d cells, critical %.1f", x, stat, cells, crit)
		}
	}
}

// TestMalformedReports: wrong lengths, non-finite values, values off the
// grid and beyond MaxSteps are malformed, never fatal.
func TestMalformedReports(t *testing.T) {
	r, err := New(Options{Lo: 0, Hi: 10})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(y float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(y)) }
	g := Grid(1)
	good := enc(37 * g)
	bad := [][]byte{nil, {}, good[:7], append(append([]byte(nil), good...), 0), enc(math.NaN()), enc(math.Inf(1)), enc(g / 2), enc(0.1 + g/4), enc(math.Ldexp(3, 60))}
	stat, err := r.Accumulate(context.Background(), 1, append(bad, good))
	if err != nil {
		t.Fatal(err)
	}
	if stat.N != 1 || stat.Malformed != int64(len(bad)) {
		t.Fatalf("N %d malformed %d, want 1 and %d", stat.N, stat.Malformed, len(bad))
	}
	for _, b := range bad {
		if _, err := Decode(b, 1); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("Decode(%x) = %v, want ErrBadReport", b, err)
		}
	}
	// Negative indices sum exactly across the split counters.
	stat, err = r.Accumulate(context.Background(), 1, [][]byte{enc(-3 * g), enc(-(1 << 40) * g), enc(5 * g)})
	if err != nil {
		t.Fatal(err)
	}
	if k := stat.Counts[0]<<32 + stat.Counts[1]; k != 2-(1<<40) {
		t.Fatalf("sum of indices %d, want %d", k, 2-(1<<40))
	}
}
