package accountant

import (
	"errors"
	"math"
	"testing"
)

// Checks of longitudinal_delta.go: the round trip against Epsilon, the
// parts against the compositions they are made of, the local cap against
// randomized response, and the tail against inferMates.

// TestLongitudinalDeltaRoundTrip checks Delta(Epsilon(delta).Upper) <=
// delta: Epsilon's per-period bound is a sum delta_A(m0*) + tail(m0*) at
// its eps, and Delta keeps the best of its candidates, one of which is
// Epsilon's rule (see the top of longitudinal_delta.go).
func TestLongitudinalDeltaRoundTrip(t *testing.T) {
	// loose is how far below delta the round trip may land: the two
	// directions choose their mates differently (Epsilon a 5% tail, Delta
	// the minimum it finds), and Epsilon's eps is the upper end of a
	// bracket, so Delta at it is a little below delta, not far.
	const loose = 0.5
	tests := []struct {
		name   string
		l      Longitudinal
		deltas []float64
	}{
		{"tree64 eps0=1 n=2000 W=30", Longitudinal{Tree: 64, Eps0: 1, Periods: 30, Batch: 2000}, []float64{1e-6, 1e-9}},
		{"tree8 eps0=0.5 n=2000 W=10", Longitudinal{Tree: 8, Eps0: 0.5, Periods: 10, Batch: 2000}, []float64{1e-3}},
		{"tree1 eps0=2 n=2000 W=3", Longitudinal{Tree: 1, Eps0: 2, Periods: 3, Batch: 2000}, []float64{1e-6}},
		{"tree16 eps0=1 mates=300 W=5", Longitudinal{Tree: 16, Eps0: 1, Periods: 5, Mates: 300}, []float64{1e-7}},
		// The transcript bound is the smaller here.
		{"tree64 eps0=1 n=700 W=10 users=700", Longitudinal{Tree: 64, Eps0: 1, Periods: 10, Batch: 700, Users: 700}, []float64{1e-6}},
	}
	for _, tc := range tests {
		for _, delta := range tc.deltas {
			e, err := tc.l.Epsilon(delta)
			if err != nil {
				t.Fatalf("%s: Epsilon(%g): %v", tc.name, delta, err)
			}
			d, err := tc.l.Delta(e.Upper)
			if err != nil {
				t.Fatalf("%s: Delta(%g): %v", tc.name, e.Upper, err)
			}
			if !(d.Upper <= delta) || d.Upper < loose*delta {
				t.Errorf("%s: Delta(Epsilon(%g).Upper = %g) = %+v, want in [%g, %g]", tc.name, delta, e.Upper, d, loose*delta, delta)
			}
			if d.Trees != e.Trees || d.Levels != e.Levels || d.Local != e.Local {
				t.Errorf("%s: trees, levels, local %d %d %g, Epsilon's %d %d %g", tc.name, d.Trees, d.Levels, d.Local, e.Trees, e.Levels, e.Local)
			}
		}
	}
}

// TestLongitudinalDeltaParts checks each part against the composition it
// is made of, exactly: the per-period bound with the mates known is the
// composed delta of the node pairs, the transcript bound that of T rounds
// of the generic randomizer among the users, and Upper their minimum with
// the local cap.
func TestLongitudinalDeltaParts(t *testing.T) {
	l := Longitudinal{Tree: 16, Eps0: 1, Periods: 20, Mates: 400, Users: 500}
	const eps = 0.4
	d, err := l.Delta(eps)
	if err != nil {
		t.Fatal(err)
	}
	T := TreesInWindow(l.Tree, l.Periods)
	node, err := l.nodePart(l.Mates, l.windowRounds())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ComposeDelta([]Part{node}, eps)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ComposeDelta([]Part{{Mech: GenericMech{Eps0: l.Eps0}, N: l.Users, Rounds: T}}, eps)
	if err != nil {
		t.Fatal(err)
	}
	if d.PerPeriod != a.Upper || d.Transcript != b.Upper || d.Tail != 0 || d.Mates != 400 {
		t.Errorf("Delta = %+v, want per period %g, transcript %g, no tail, 400 mates", d, a.Upper, b.Upper)
	}
	if want := math.Min(math.Min(a.Upper, b.Upper), d.LocalDelta); d.Upper != want {
		t.Errorf("Upper = %g, want the minimum %g", d.Upper, want)
	}
	// Without users the transcript bound is left out, and the bound can
	// only be larger.
	l.Users = 0
	d0, err := l.Delta(eps)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(d0.Transcript, 1) || d0.Upper != d0.PerPeriod || d0.Upper < d.Upper {
		t.Errorf("without users: %+v; with: %+v", d0, d)
	}
}

// TestLongitudinalDeltaLocal checks the local cap: 0 from the local level
// on (nothing else computed), and below it the delta of binary randomized
// response at the local level, computed here from the matrix.
func TestLongitudinalDeltaLocal(t *testing.T) {
	// tol is relative: the closed form and the sum over the two outputs
	// differ by a few roundings.
	const tol = 1e-12
	l := Longitudinal{Tree: 4, Eps0: 0.5, Periods: 4, Batch: 100, Users: 100}
	d, err := l.Delta(0.5 * 2) // T = 2 trees of eps0: Local = 1
	if err != nil {
		t.Fatal(err)
	}
	if d.Local != 1 || d.Upper != 0 || d.PerPeriod != 0 || d.Transcript != 0 || d.LocalDelta != 0 {
		t.Errorf("at eps = Local: %+v, want all 0", d)
	}
	for _, L := range []float64{0.1, 1, 5, 40} {
		for _, eps := range []float64{0, L / 3, L * 0.99} {
			e := math.Exp(L)
			p, q := e/(e+1), 1/(e+1)
			// Outputs 0 and 1 of randomized response at L, rows 0 and 1.
			want := math.Max(0, p-math.Exp(eps)*q) + math.Max(0, q-math.Exp(eps)*p)
			if got := pureDelta(L, eps); math.Abs(got-want) > tol*want {
				t.Errorf("pureDelta(%g, %g) = %g, want %g", L, eps, got, want)
			}
		}
	}
	if got := pureDelta(800, 1); !(got > 0.6 && got <= 1) {
		t.Errorf("pureDelta(800, 1) = %g, want close to 1 (no overflow)", got)
	}
}

// TestLongitudinalTailAt checks that tailAt, which Delta charges for any
// number of mates, is the tail inferMates charges for its own, so that the
// two directions pay the same point 5.
func TestLongitudinalTailAt(t *testing.T) {
	for _, l := range []Longitudinal{
		{Tree: 64, Eps0: 1, Periods: 30, Batch: 5000},
		{Tree: 1, Eps0: 1, Periods: 9, Batch: 50},
	} {
		for _, budget := range []float64{1e-3, 1e-9, 1e-15} {
			m, tail := l.inferMates(budget)
			if got := l.tailAt(m); got != tail {
				t.Errorf("%+v budget %g: inferMates = %d, %g; tailAt(%d) = %g", l, budget, m, tail, m, got)
			}
		}
	}
}

func TestLongitudinalDeltaErrors(t *testing.T) {
	l := Longitudinal{Tree: 8, Eps0: 1, Periods: 4, Batch: 100}
	for _, eps := range []float64{math.NaN(), math.Inf(1), -1} {
		if _, err := l.Delta(eps); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Delta(%g): err = %v, want ErrInvalidArgument", eps, err)
		}
	}
	bad := l
	bad.Tree = 6
	if _, err := bad.Delta(1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("tree 6: err = %v, want ErrInvalidArgument", err)
	}
	if _, err := LongitudinalDelta(KRRMech{K: 4}, 1, 100, 4, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("k-RR: err = %v, want ErrInvalidArgument", err)
	}
}

// TestLongitudinalDeltaMechanism checks LongitudinalDelta against Delta on
// the Longitudinal that LongitudinalOf returns, and that it decreases in
// eps.
func TestLongitudinalDeltaMechanism(t *testing.T) {
	m := LongitudinalMech{Tree: 8}
	l, ok, err := LongitudinalOf(m, 1)
	if err != nil || !ok || l.Tree != 8 || l.Eps0 != 1 || len(l.Node) != 3 {
		t.Fatalf("LongitudinalOf = %+v, %v, %v", l, ok, err)
	}
	l.Periods, l.Batch = 6, 1000
	want, err := l.Delta(0.3)
	if err != nil {
		t.Fatal(err)
	}
	prev := 1.0
	for _, eps := range []float64{0.3, 0.6} {
		got, err := LongitudinalDelta(m, 1, 1000, 6, eps)
		if err != nil {
			t.Fatal(err)
		}
		if eps == 0.3 && got != want {
			t.Errorf("eps %g: LongitudinalDelta = %+v, Delta = %+v", eps, got, want)
		}
		if !(got.Upper < prev) {
			t.Errorf("eps %g: delta %g not below %g at a smaller eps", eps, got.Upper, prev)
		}
		prev = got.Upper
	}
	if _, ok, err := LongitudinalOf(KRRMech{K: 3}, 1); ok || err != nil {
		t.Errorf("LongitudinalOf(k-RR) = %v, %v; want not a tree protocol", ok, err)
	}
}
