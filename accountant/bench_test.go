package accountant

import (
	"fmt"
	"math"
	"runtime"
	"testing"
)

var sinkF float64

// BenchmarkDelta measures one certified delta evaluation for k-RR, k = 100,
// eps0 = 4, at the eps where delta is about 1e-6.
func BenchmarkDelta(b *testing.B) {
	m := KRR(100)
	for _, n := range []int{10_000, 1_000_000, 100_000_000} {
		r, err := Epsilon(m, 4, n, 1e-6)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("n=%.0e", float64(n)), func(b *testing.B) {
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				d, err := Delta(m, 4, n, r.Upper)
				if err != nil {
					b.Fatal(err)
				}
				sinkF = d.Upper
			}
		})
	}
}

// BenchmarkEpsilon measures eps(delta) (upper and lower bound) for k-RR,
// k = 100, eps0 = 4, delta = 1e-6, and reports the Go heap in use after the
// run (peak working memory is dominated by the FFT buffers, which are freed).
func BenchmarkEpsilon(b *testing.B) {
	m := KRR(100)
	for _, n := range []int{10_000, 1_000_000, 100_000_000, 1_000_000_000} {
		b.Run(fmt.Sprintf("n=%.0e", float64(n)), func(b *testing.B) {
			var peak uint64
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				r, err := Epsilon(m, 4, n, 1e-6)
				if err != nil {
					b.Fatal(err)
				}
				sinkF = r.Upper
				peak = max(peak, sysBytes())
			}
			b.ReportMetric(float64(peak)/(1<<20), "sys-MB")
		})
	}
}

// BenchmarkCalibrate measures the calibration of eps0 for k-RR, k = 100, to
// (eps, delta) = (1, 1e-6).
func BenchmarkCalibrate(b *testing.B) {
	m := KRR(100)
	for _, n := range []int{10_000, 1_000_000, 100_000_000} {
		b.Run(fmt.Sprintf("n=%.0e", float64(n)), func(b *testing.B) {
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				c, err := Calibrate(m, Target{Eps: 1, Delta: 1e-6, N: n})
				if err != nil {
					b.Fatal(err)
				}
				sinkF = c.Eps0
			}
		})
	}
}

// BenchmarkCurve measures a 20-point curve of eps (upper and lower) against
// n from 1e3 to 1e8, log-spaced, for k-RR, k = 100, eps0 = 4, delta = 1e-6,
// computed point after point (the CLI runs points concurrently).
func BenchmarkCurve(b *testing.B) {
	m := KRR(100)
	for b.Loop() {
		ForgetMemo() // time the computation, not the memo
		for i := range 20 {
			n := int(math.Round(math.Pow(10, 3+5*float64(i)/19)))
			r, err := Epsilon(m, 4, n, 1e-6)
			if err != nil {
				b.Fatal(err)
			}
			sinkF = r.Upper
		}
	}
}

// BenchmarkEpsilonRounds measures eps over T = 365 rounds of k-RR, k = 100,
// eps0 = 4, delta = 1e-6 (a fresh Composition each time, so nothing is
// memoised across iterations), and reports the peak memory the runtime got
// from the OS, the gap between the upper bound and the lower-bound
// datasets, and whether the upper bound is certified within
// HorizonTolerance of the composed exact pairs.
func BenchmarkEpsilonRounds(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000, 100_000_000, 1_000_000_000} {
		b.Run(fmt.Sprintf("n=%.0e", float64(n)), func(b *testing.B) {
			var peak uint64
			var r EpsilonResult
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				var err error
				r, err = ComposeEpsilon([]Part{{Mech: KRR(100), Eps0: 4, N: n, Rounds: 365}}, 1e-6)
				if err != nil {
					b.Fatal(err)
				}
				sinkF = r.Upper
				peak = max(peak, sysBytes())
			}
			b.ReportMetric(float64(peak)/(1<<20), "sys-MB")
			b.ReportMetric(r.Upper, "eps-upper")
			b.ReportMetric(100*(r.Upper/r.Lower-1), "gap-%")
			tight := 0.0
			if r.Tight {
				tight = 1
			}
			b.ReportMetric(tight, "tight")
		})
	}
}

// BenchmarkCalibrateRounds measures horizon calibration of k-RR, k = 20,
// at n = 1e4 to (1, 1e-6) over T = 365 periods (the Utility example of the
// closing note), and reports the eps0 it finds.
func BenchmarkCalibrateRounds(b *testing.B) {
	var c CalibrationResult
	for b.Loop() {
		ForgetMemo() // time the computation, not the memo
		var err error
		c, err = Calibrate(KRR(20), Target{Eps: 1, Delta: 1e-6, N: 10_000, Rounds: 365})
		if err != nil {
			b.Fatal(err)
		}
		sinkF = c.Eps0
	}
	b.ReportMetric(c.Eps0, "eps0")
}

// BenchmarkAllocatePlanRounds measures the separate-travel allocation of a
// three-metric plan (k-RR over 20 and 12 categories and a generic
// randomizer) at n_min = 1e4 over T = 365 periods.
func BenchmarkAllocatePlanRounds(b *testing.B) {
	spec := PlanSpec{Eps: 1, Delta: 1e-6, NMin: 10_000, Rounds: 365, Metrics: []PlanMetric{
		{Name: "screen", Mech: KRR(20)}, {Name: "feature", Mech: KRR(12)}, {Name: "any", Mech: Generic()},
	}}
	for b.Loop() {
		ForgetMemo() // time the computation, not the memo
		r, err := AllocatePlan(spec)
		if err != nil {
			b.Fatal(err)
		}
		sinkF = r.Eps
	}
}

// sysBytes returns the bytes of memory obtained from the OS so far (the
// high-water mark the benchmarks report as sys-MB).
func sysBytes() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Sys
}

// BenchmarkFloorEpsilon measures eps at delta = 1e-6 of k-RR, k = 20,
// eps0 = 4, with a shuffler floor (floor.go): the draws alone (one engine
// search), and 10,000 honest reports with the draws (the strata).
func BenchmarkFloorEpsilon(b *testing.B) {
	m := KRR(20)
	for _, c := range []struct{ honest, floor int }{{1, 10_000}, {10_000, 10_000}, {1_000_000, 10_000}} {
		b.Run(fmt.Sprintf("honest=%.0e/floor=%.0e", float64(c.honest), float64(c.floor)), func(b *testing.B) {
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				r, err := FloorEpsilon(m, 4, c.honest, c.floor, 1e-6)
				if err != nil {
					b.Fatal(err)
				}
				sinkF = r.Upper
			}
		})
	}
}

// BenchmarkFloorEpsilonRounds measures eps at delta = 1e-6 over 30 rounds
// with the floor: the draws alone (exact), and with 10,000 honest reports
// (coupled).
func BenchmarkFloorEpsilonRounds(b *testing.B) {
	for _, honest := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("honest=%.0e", float64(honest)), func(b *testing.B) {
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				c, err := NewComposition(Part{Mech: KRR(20), Eps0: 4, N: honest, Floor: 10_000, Rounds: 30})
				if err != nil {
					b.Fatal(err)
				}
				r, err := c.Epsilon(1e-6)
				if err != nil {
					b.Fatal(err)
				}
				sinkF = r.Upper
			}
		})
	}
}

// BenchmarkAccountTargets measures what the account commands of issue 28's
// targets compute, bounds and baselines, from a cold memo: eps over 365
// rounds of k-RR (k = 10 at eps0 = 1, k = 100 at eps0 = 4) at n = 1e6,
// one report of k-RR, k = 20, eps0 = 4 and k = 2, eps0 = 0.5 (a two-point
// lower-bound set, twopoint.go) at n = 1e8, and the calibration of
// k-RR, k = 100, to (1, 1e-6) at n = 1e6 and 1e7 (the CLI runs the bounds
// and the baselines side by side; here they run one after the other).
func BenchmarkAccountTargets(b *testing.B) {
	rounds := func(k int, eps0 float64) func() error {
		return func() error {
			c, err := NewComposition(Part{Mech: KRR(k), Eps0: eps0, N: 1_000_000, Rounds: 365})
			if err != nil {
				return err
			}
			if _, err := c.Epsilon(1e-6); err != nil {
				return err
			}
			_, err = c.EpsilonBaselines(1e-6)
			return err
		}
	}
	calibrate := func(n int) func() error {
		return func() error {
			t := Target{Eps: 1, Delta: 1e-6, N: n}
			if _, err := Calibrate(KRR(100), t); err != nil {
				return err
			}
			_, err := CalibrateBaselines(KRR(100), t)
			return err
		}
	}
	cases := []struct {
		name string
		run  func() error
	}{
		{"rounds365/krr10-eps0=1", rounds(10, 1)},
		{"rounds365/krr100-eps0=4", rounds(100, 4)},
		{"eps/krr20-eps0=4-n=1e8", func() error {
			if _, err := Epsilon(KRR(20), 4, 100_000_000, 1e-6); err != nil {
				return err
			}
			_, err := EpsilonBaselines(KRR(20), 4, 100_000_000, 1e-6)
			return err
		}},
		{"eps/krr2-eps0=0.5-n=1e8", func() error {
			if _, err := Epsilon(KRR(2), 0.5, 100_000_000, 1e-6); err != nil {
				return err
			}
			_, err := EpsilonBaselines(KRR(2), 0.5, 100_000_000, 1e-6)
			return err
		}},
		{"calibrate/krr100-n=1e6", calibrate(1_000_000)},
		{"calibrate/krr100-n=1e7", calibrate(10_000_000)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ForgetMemo() // time the computation, not the memo
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWindowSkip evaluates the pair sets of windowSkipSets at eps0 14
// and 20 (nearly point-mass laws, whose first windows fail their tail
// test) with and without passing over such windows (latticeEvalSkip).
func BenchmarkWindowSkip(b *testing.B) {
	sets, _, budgets := windowSkipSets(b, []float64{14, 20})
	for _, skip := range []bool{true, false} {
		b.Run(fmt.Sprintf("skip=%v", skip), func(b *testing.B) {
			for b.Loop() {
				for i, s := range sets {
					for _, n := range []int{1000, 30000} {
						for _, f := range []float64{0.05, 0.2, 0.4, 0.6} {
							p := prepare(s, f*budgets[i])
							if p.maxZ > 0 {
								latticeEvalSkip(p, n, 0.5, true, skip)
							}
						}
					}
				}
			}
		})
	}
}

// BenchmarkSparseCut evaluates the generic clone's upper set at eps0 6.15
// and n = 1e6 (the clone_composed baseline of a 30-round calibration at
// eps 1, delta 1e-6) at eps 0 to 6, the profile points a PLD asks for,
// with and without the relative cut (sparse_cut.go).
func BenchmarkSparseCut(b *testing.B) {
	d, err := Generic().Decompose(6.15)
	if err != nil {
		b.Fatal(err)
	}
	for _, cut := range []bool{true, false} {
		b.Run(fmt.Sprintf("cut=%v", cut), func(b *testing.B) {
			for b.Loop() {
				for e := 0.0; e <= 6; e += 0.25 {
					if _, ok, _ := sparseExactCut(prepare(d.Upper[0], e), 1e6, cut); !ok {
						b.Fatal("the sparse path declined")
					}
				}
			}
		})
	}
}
