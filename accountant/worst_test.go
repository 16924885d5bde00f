package accountant

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// worstCases are pairs of mechanisms one of which runs: two k-RR of
// different sizes and budgets, a parallel composition at the plan's
// weights against the same metrics at a skewed mix (the collector's use,
// collector/horizon.go), and a generic eps0-LDP randomizer against
// randomized response at the same eps0.
func worstCases() []struct {
	name string
	a, b Mechanism
	n    int
} {
	parts := []Mechanism{KRRMech{K: 3, Eps0: 1}, KRRMech{K: 10, Eps0: 1.5}}
	return []struct {
		name string
		a, b Mechanism
		n    int
	}{
		{"krr sizes", KRRMech{K: 4, Eps0: 2}, KRRMech{K: 20, Eps0: 1}, 2000},
		{"parallel mix", ParallelMech{Weights: []float64{0.5, 0.5}, Parts: parts}, ParallelMech{Weights: []float64{0.1, 0.9}, Parts: parts}, 5000},
		{"generic vs rr", GenericMech{Eps0: 1}, KRRMech{K: 2, Eps0: 1}, 1000},
	}
}

// sameSetsTol: WorstOf(a, a) evaluates a's own candidate sets, merged
// once more (AtomSet.Merge re-sums equal-ratio atoms), which can move an
// atom by a rounding error and the root by as little.
const sameSetsTol = 1e-9

// fixed returns the budget m fixes (every mechanism of worstCases fixes
// its own, and ignores the one it is given).
func fixed(m Mechanism) float64 {
	e, _ := m.FixedEps0()
	return e
}

// TestWorstOfOneRoundIsTheMax: for one report, WorstOf(a, b) at n and delta
// gives the larger of a's and b's eps at the same n and delta. Both sides
// take the largest root over the same candidate sets; only the interval
// the root finder starts from differs (WorstOf's cap is the larger local
// eps), and every root is certified within Tolerance of its exact value,
// so the two agree within Tolerance (relative). WorstOf of one mechanism
// twice is that mechanism (the same sets, the same cap) within sameSetsTol.
func TestWorstOfOneRoundIsTheMax(t *testing.T) {
	const delta = 1e-6
	for _, c := range worstCases() {
		t.Run(c.name, func(t *testing.T) {
			ra, err := Epsilon(c.a, fixed(c.a), c.n, delta)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := Epsilon(c.b, fixed(c.b), c.n, delta)
			if err != nil {
				t.Fatal(err)
			}
			rw, err := Epsilon(WorstOf(c.a, c.b), fixed(c.a), c.n, delta)
			if err != nil {
				t.Fatal(err)
			}
			want := math.Max(ra.Upper, rb.Upper)
			if math.Abs(rw.Upper-want) > Tolerance*want {
				t.Errorf("WorstOf eps %.6g, max of %.6g and %.6g = %.6g (tolerance %g)", rw.Upper, ra.Upper, rb.Upper, want, Tolerance)
			}
			if rw.Lower != 0 {
				t.Errorf("WorstOf claims a lower bound %g", rw.Lower)
			}
			if want := math.Max(ra.LocalEps, rb.LocalEps); rw.LocalEps != want {
				t.Errorf("WorstOf local eps %g, want %g", rw.LocalEps, want)
			}
			ra2, err := Epsilon(WorstOf(c.a, c.a), fixed(c.a), c.n, delta)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(ra2.Upper-ra.Upper) > sameSetsTol*ra.Upper {
				t.Errorf("WorstOf(a, a) eps %.9g, a alone %.9g", ra2.Upper, ra.Upper)
			}
		})
	}
}

// checkWorstComposed runs TestWorstOfComposedDominates' checks over the
// worstCases that keep selects, composed over each of rounds.
func checkWorstComposed(t *testing.T, rounds []int, keep func(string) bool) {
	const delta = 1e-6
	for _, c := range worstCases() {
		if !keep(c.name) {
			continue
		}
		for _, T := range rounds {
			up := func(parts ...Part) EpsilonResult {
				t.Helper()
				r, err := ComposeEpsilon(parts, delta)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			w := up(Part{Mech: WorstOf(c.a, c.b), N: c.n, Rounds: T})
			for _, other := range []struct {
				name  string
				parts []Part
			}{
				{"a alone", []Part{{Mech: c.a, N: c.n, Rounds: T}}},
				{"b alone", []Part{{Mech: c.b, N: c.n, Rounds: T}}},
				{"half each", []Part{{Mech: c.a, N: c.n, Rounds: T / 2}, {Mech: c.b, N: c.n, Rounds: T / 2}}},
			} {
				o := up(other.parts...)
				if w.Upper < o.Upper/(1+HorizonTolerance) {
					t.Errorf("%s, T = %d: WorstOf composed %.6g, below %s %.6g", c.name, T, w.Upper, other.name, o.Upper)
				}
			}
			// And not above T times the worst single round at delta/T
			// (basic composition, also a proof).
			one, err := Epsilon(WorstOf(c.a, c.b), fixed(c.a), c.n, delta/float64(T))
			if err != nil {
				t.Fatal(err)
			}
			if w.Upper > float64(T)*one.Upper*(1+Tolerance) {
				t.Errorf("%s, T = %d: WorstOf composed %.6g, above basic composition %.6g", c.name, T, w.Upper, float64(T)*one.Upper)
			}
		}
	}
}

// TestWorstOfDecompose: the decomposition is the union of the parts' upper
// sets (duplicates merged), with no lower sets, and the argument errors.
func TestWorstOfDecompose(t *testing.T) {
	a, b := KRRMech{K: 4, Eps0: 2}, KRRMech{K: 20, Eps0: 1}
	da, _ := a.Decompose(0)
	db, _ := b.Decompose(0)
	d, err := WorstOf(a, b, a).Decompose(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Upper) != len(da.Upper)+len(db.Upper) || len(d.UpperSame) != len(da.UpperSame)+len(db.UpperSame) {
		t.Errorf("%d upper and %d same sets, want %d and %d", len(d.Upper), len(d.UpperSame), len(da.Upper)+len(db.Upper), len(da.UpperSame)+len(db.UpperSame))
	}
	if d.Lower != nil || d.LowerSame != nil || d.KRR != 0 || d.LocalEps != 2 {
		t.Errorf("lower %v, same %v, KRR %d, local eps %g: want none, none, 0, 2", d.Lower, d.LowerSame, d.KRR, d.LocalEps)
	}
	if e, ok := WorstOf(a, b).FixedEps0(); !ok || e != 2 {
		t.Errorf("FixedEps0 = %g, %v; want 2, true", e, ok)
	}
	if _, ok := WorstOf(a, KRR(3)).FixedEps0(); ok {
		t.Error("FixedEps0 fixed with a part that is not")
	}
	for _, m := range []WorstOfMech{{}, WorstOf(a, nil)} {
		if _, err := m.Decompose(1); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%v: error %v, want ErrInvalidArgument", m.Parts, err)
		}
	}
	if _, err := WorstOf(a, LongitudinalMech{Tree: 8, Eps0: 1}).Decompose(1); !errors.Is(err, ErrLongitudinal) {
		t.Errorf("a tree protocol part: error %v, want ErrLongitudinal", err)
	}
}

// TestParallelFloorDominatesMixes: ParallelFloor(f) bounds the parallel
// composition at every weights w >= f, for one report (eps at delta at
// least each one's, within Tolerance: each is certified within it of its
// exact value) and composed over rounds (within HorizonTolerance, as in
// TestWorstOfComposedDominates); a floor summing to 1 is the parallel
// composition at it (the same candidate sets); and a lower floor gives up
// more blanket, so it gives a larger eps. The blanket is the floor's, not
// the victim's weights: with rho = 0.15 the bound is above the parallel
// composition at each vertex f + rho 1_i (whose blanket is larger) by
// more than both certifications' Tolerance (measured: 11%).
func TestParallelFloorDominatesMixes(t *testing.T) {
	const delta, n = 1e-6, 2000
	parts := []Mechanism{KRRMech{K: 3, Eps0: 1}, KRRMech{K: 10, Eps0: 1.5}}
	eps := func(m Mechanism, rounds int) float64 {
		t.Helper()
		r, err := ComposeEpsilon([]Part{{Mech: m, N: n, Rounds: rounds}}, delta)
		if err != nil {
			t.Fatal(err)
		}
		return r.Upper
	}
	floor := []float64{0.4, 0.45}
	mixes := [][]float64{{0.4, 0.6}, {0.55, 0.45}, {0.5, 0.5}, {0.45, 0.55}}
	bound := eps(ParallelFloor(floor, parts...), 1)
	var worst []Mechanism
	for _, w := range mixes {
		m := ParallelMech{Weights: w, Parts: parts}
		worst = append(worst, m)
		if e := eps(m, 1); bound < e/(1+Tolerance) {
			t.Errorf("floor %v: eps %.6g, below %.6g at weights %v", floor, bound, e, w)
		}
	}
	for _, v := range [][]float64{{0.55, 0.45}, {0.4, 0.6}} {
		if e := eps(ParallelMech{Weights: v, Parts: parts}, 1); !(bound > e*(1+2*Tolerance)) {
			t.Errorf("floor %v: eps %.6g, not above %.6g at the vertex %v: the blanket is not the floor's", floor, bound, e, v)
		}
	}
	const T = 4
	if b, w := eps(ParallelFloor(floor, parts...), T), eps(WorstOf(worst...), T); b < w/(1+HorizonTolerance) {
		t.Errorf("floor %v over %d rounds: eps %.6g, below %.6g for the worst of the mixes", floor, T, b, w)
	}
	exact := []float64{0.3, 0.7}
	if a, b := eps(ParallelFloor(exact, parts...), 1), eps(ParallelMech{Weights: exact, Parts: parts}, 1); math.Abs(a-b) > Tolerance*b {
		t.Errorf("floor %v summing to 1: eps %.6g, the parallel composition %.6g", exact, a, b)
	}
	if lower := eps(ParallelFloor([]float64{0.2, 0.45}, parts...), 1); !(lower > bound) {
		t.Errorf("floor (0.2, 0.45): eps %.6g, not above %.6g at floor %v", lower, bound, floor)
	}
}

// TestParallelFloorArguments: the floor is checked (each weight in (0,1],
// their sum at most 1, one per part), and its decomposition has no lower
// sets.
func TestParallelFloorArguments(t *testing.T) {
	parts := []Mechanism{KRRMech{K: 3, Eps0: 1}, KRRMech{K: 10, Eps0: 1.5}}
	for _, f := range [][]float64{{0, 0.5}, {0.6, 0.5}, {0.5}, {math.NaN(), 0.5}, {-0.1, 0.5}} {
		if _, err := ParallelFloor(f, parts...).Decompose(1); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("floor %v: error %v, want ErrInvalidArgument", f, err)
		}
	}
	d, err := ParallelFloor([]float64{0.3, 0.3}, parts...).Decompose(1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Lower != nil || d.KRR != 0 || d.LocalEps != 1.5 || len(d.Upper) == 0 {
		t.Errorf("lower %v, KRR %d, local eps %g, %d upper sets", d.Lower, d.KRR, d.LocalEps, len(d.Upper))
	}
	if e, ok := ParallelFloor([]float64{0.3, 0.3}, parts...).FixedEps0(); !ok || e != 1.5 {
		t.Errorf("FixedEps0 = %g, %v; want 1.5, true", e, ok)
	}
}

// One report shuffled among 2000 by 4-ary or 20-ary randomized response,
// not known which: WorstOf bounds it by the weaker of the two.
func ExampleWorstOf() {
	a, b := KRRMech{K: 4, Eps0: 2}, KRRMech{K: 20, Eps0: 1}
	for _, m := range []Mechanism{a, b, WorstOf(a, b)} {
		r, err := Epsilon(m, 2, 2000, 1e-6)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: eps = %.3f\n", m, r.Upper)
	}
	// Output:
	// krr:k=4:eps0=2: eps = 0.242
	// krr:k=20:eps0=1: eps = 0.040
	// worst(krr:k=4:eps0=2,krr:k=20:eps0=1): eps = 0.242
}
