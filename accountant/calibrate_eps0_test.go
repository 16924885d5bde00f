package accountant

import (
	"math"
	"testing"
)

// TestCalibrateEps0SameBits: calibrateEps0 (stepDown by the upper bound
// alone) returns Calibrate's eps0 bit for bit, each computed on an empty
// memo, and epsilonBounds without the lower sets has epsilonOf's Upper
// and Amplified with Lower 0 and Tight false.
func TestCalibrateEps0SameBits(t *testing.T) {
	same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	mechs := []Mechanism{KRR(2), KRR(10), Generic()}
	targets := []Target{
		{Eps: 0.05, Delta: 1e-9, N: 100_000},
		{Eps: 0.5, Delta: 1e-6, N: 10_000},
		{Eps: 2, Delta: 1e-8, N: 100_000},
		{Eps: 0.5, Delta: 1e-6, N: 10_000, Floor: 200},
	}
	for _, m := range mechs {
		for _, tg := range targets {
			if _, ok := m.(GenericMech); ok && tg.Floor > 0 {
				continue // the clone has no sampled blanket to floor
			}
			ForgetMemo()
			got, err := calibrateEps0(m, tg)
			if err != nil {
				t.Fatalf("%s %+v: %v", m, tg, err)
			}
			ForgetMemo()
			want, err := Calibrate(m, tg)
			if err != nil {
				t.Fatalf("%s %+v: Calibrate: %v", m, tg, err)
			}
			if !same(got, want.Eps0) {
				t.Errorf("%s %+v: calibrateEps0 %v, Calibrate %v", m, tg, got, want.Eps0)
			}
			d, err := m.Decompose(want.Eps0)
			if err != nil {
				t.Fatal(err)
			}
			full, up := epsilonOf(d, tg.N, tg.Delta), epsilonBounds(d, tg.N, tg.Delta, false)
			if !same(up.Upper, full.Upper) || up.Amplified != full.Amplified || up.LocalEps != full.LocalEps || up.Lower != 0 || up.Tight {
				t.Errorf("%s %+v: upper only %+v, epsilonOf %+v", m, tg, up, full)
			}
			if len(d.Lower) > 0 && full.Lower <= 0 {
				t.Errorf("%s %+v: epsilonOf has no lower bound (%+v): the comparison shows nothing", m, tg, full)
			}
		}
	}
}
