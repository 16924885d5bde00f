package accountant

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// Independent checks of longitudinal.go: the protocol's exact divergence by
// enumeration (from its definition, not from the proof's reduction), the
// binomial tail against exact rational arithmetic, and the bound's shape.

// rrBitLaw returns P(b = +1) for randomized response on node value v.
func rrBitLaw(eps0 float64, v int) float64 {
	e := math.Exp(eps0)
	switch v {
	case 1:
		return e / (e + 1)
	case -1:
		return 1 / (e + 1)
	}
	return 0.5
}

// countLaw returns the law of the number of +1 bits among reports on the
// given node values (a Poisson-binomial law), keyed by the count.
func countLaw(eps0 float64, values []int) map[string]float64 {
	law := []float64{1}
	for _, v := range values {
		p := rrBitLaw(eps0, v)
		next := make([]float64, len(law)+1)
		for c, w := range law {
			next[c] += w * (1 - p)
			next[c+1] += w * p
		}
		law = next
	}
	out := make(map[string]float64, len(law))
	for c, w := range law {
		out[fmt.Sprint(c)] = w
	}
	return out
}

// protocolDelta is the exact divergence of what the analyst sees of one
// node batch per leaking period (counts of +1 per node: every other report
// has the same law under both data), for a victim whose node values at its
// level are victimP and victimQ under the two data (one entry per period
// that differs), among level-mates holding the given node values. Rounds
// are independent given the levels (the proof's point 2), which is how the
// protocol draws fresh coins; the check is the divergence itself.
func protocolDelta(eps0 float64, victimP, victimQ []int, mates [][]int, eps float64) float64 {
	var pairs [][2]map[string]float64
	for i := range victimP {
		p := countLaw(eps0, append([]int{victimP[i]}, mates[i]...))
		q := countLaw(eps0, append([]int{victimQ[i]}, mates[i]...))
		pairs = append(pairs, [2]map[string]float64{p, q})
	}
	return oracleComposedDelta(pairs, eps)
}

// TestLongitudinalAgainstProtocol checks the per-period bound (with the
// mates known) against the exact divergence of the protocol's leaking
// rounds, for every way two data can differ at the victim's level (point
// 3: one node or two, in either order, with either sign) and several
// choices of the mates' node values. The bound must hold at its own eps.
func TestLongitudinalAgainstProtocol(t *testing.T) {
	const delta = 1e-6
	for _, eps0 := range []float64{0.5, 1.5, 3} {
		for _, mates := range []int{3, 12, 40} {
			// Two periods: a window that can hold two node ends of a level.
			res, err := Longitudinal{Tree: 8, Eps0: eps0, Periods: 2, Mates: mates}.Epsilon(delta)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trees != 2 || res.Tail != 0 {
				t.Fatalf("trees %d tail %g, want 2 and 0", res.Trees, res.Tail)
			}
			// One period: its change can still move the victim's change
			// between two nodes of its tree (one of them after the
			// period), so every case is checked against it too.
			one, err := Longitudinal{Tree: 8, Eps0: eps0, Periods: 1, Mates: mates}.Epsilon(delta)
			if err != nil {
				t.Fatal(err)
			}
			others := mates - 1
			fill := func(v int) []int {
				out := make([]int, others)
				for i := range out {
					out[i] = v
				}
				return out
			}
			mixed := make([]int, others)
			for i := range mixed {
				mixed[i] = i%3 - 1
			}
			var worst float64
			for _, s := range []int{1, -1} {
				for _, mv := range [][]int{fill(0), fill(1), fill(-1), mixed} {
					cases := []struct{ p, q []int }{
						{[]int{s, 0}, []int{0, s}}, // the change moves between two nodes
						{[]int{s}, []int{0}},       // the other data has fewer changes
						{[]int{0}, []int{s}},
					}
					for _, c := range cases {
						ms := make([][]int, len(c.p))
						for i := range ms {
							ms[i] = mv
						}
						d := protocolDelta(eps0, c.p, c.q, ms, res.Upper)
						worst = math.Max(worst, d)
						if d > delta*(1+1e-9) {
							t.Errorf("eps0=%g mates=%d victim %v vs %v: exact delta %.4g at the bound's eps %.4f exceeds %g", eps0, mates, c.p, c.q, d, res.Upper, delta)
						}
						if d := protocolDelta(eps0, c.p, c.q, ms, one.Upper); d > delta*(1+1e-9) {
							t.Errorf("eps0=%g mates=%d, one period: victim %v vs %v: exact delta %.4g at the bound's eps %.4f exceeds %g", eps0, mates, c.p, c.q, d, one.Upper, delta)
						}
					}
				}
			}
			// The one-period bound is not vacuous: below the local level,
			// and some case of the protocol (the change moving between two
			// nodes of one tree) comes within a factor of it in delta at a
			// slightly smaller eps.
			if one.Upper >= TranscriptLocalEps(8, eps0) {
				continue
			}
			var near float64
			for _, s := range []int{1} {
				for _, mv := range [][]int{fill(0), fill(1), fill(-1)} {
					near = math.Max(near, protocolDelta(eps0, []int{s, 0}, []int{0, s}, [][]int{mv, mv}, one.Upper*0.8))
				}
			}
			if near <= delta {
				t.Errorf("eps0=%g mates=%d: no protocol case reaches delta %g at 0.8 times the one-period bound (%.4f): the bound looks loose (best %.3g)", eps0, mates, delta, one.Upper, near)
			}
		}
	}
}

// TestLongitudinalTwoTrees checks the composition over two trees (a window
// that straddles a tree boundary) against the exact four-round divergence.
func TestLongitudinalTwoTrees(t *testing.T) {
	const delta = 1e-5
	eps0, mates := 1.0, 8
	res, err := Longitudinal{Tree: 4, Eps0: eps0, Periods: 5, Mates: mates}.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if res.Trees != 2 {
		t.Fatalf("trees = %d, want 2", res.Trees)
	}
	mv := make([]int, mates-1)
	ms := [][]int{mv, mv, mv, mv}
	d := protocolDelta(eps0, []int{1, 0, -1, 0}, []int{0, 1, 0, -1}, ms, res.Upper)
	if d > delta {
		t.Errorf("exact delta %.4g at eps %.4f exceeds %g", d, res.Upper, delta)
	}
	one, err := Longitudinal{Tree: 4, Eps0: eps0, Periods: 4, Mates: mates}.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if one.Trees != 2 || one.Upper != res.Upper {
		t.Errorf("4 periods of trees of 4 can straddle two trees: got %d trees, eps %g (5 periods: %g)", one.Trees, one.Upper, res.Upper)
	}
}

func TestTreesInWindow(t *testing.T) {
	// Brute force: slide every window start over three trees.
	for _, tree := range []int{1, 2, 4, 8} {
		for periods := 1; periods <= 3*tree; periods++ {
			want := 0
			for start := 0; start < 2*tree; start++ {
				seen := map[int]bool{}
				for p := start; p < start+periods; p++ {
					seen[p/tree] = true
				}
				want = max(want, len(seen))
			}
			if got := TreesInWindow(tree, periods); got != want {
				t.Errorf("TreesInWindow(%d, %d) = %d, want %d", tree, periods, got, want)
			}
		}
	}
}

// exactLowerTail is Pr[Binomial(n, p) < m] in exact rational arithmetic
// for p = 1/levels.
func exactLowerTail(n, levels, m int) float64 {
	sum := new(big.Rat)
	num := new(big.Int)
	for x := 0; x < m; x++ {
		// C(n,x) (levels-1)^(n-x) / levels^n
		num.Binomial(int64(n), int64(x))
		num.Mul(num, new(big.Int).Exp(big.NewInt(int64(levels-1)), big.NewInt(int64(n-x)), nil))
		sum.Add(sum, new(big.Rat).SetInt(num))
	}
	sum.Quo(sum, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(int64(levels)), big.NewInt(int64(n)), nil)))
	f, _ := sum.Float64()
	return f
}

func TestBinomLowerTail(t *testing.T) {
	for _, c := range []struct{ n, levels, m int }{
		{10, 2, 3}, {100, 7, 5}, {999, 7, 80}, {999, 7, 120}, {1500, 4, 300}, {1500, 13, 50}, {400, 3, 1},
	} {
		want := exactLowerTail(c.n, c.levels, c.m)
		got := binomLowerTail(c.n, 1/float64(c.levels), c.m)
		if got < want*(1-1e-12) || got > want*(1+1e-5)+1e-300 {
			t.Errorf("binomLowerTail(%d, 1/%d, %d) = %.10g, exact %.10g", c.n, c.levels, c.m, got, want)
		}
	}
	// The bisection's m0 is the largest meeting the budget.
	for _, budget := range []float64{1e-3, 1e-8, 1e-12} {
		m0, tail := matesQuantile(1000, 7, budget)
		if tail > budget || exactLowerTail(999, 7, m0-1) > budget {
			t.Errorf("budget %g: m0 %d has tail %g", budget, m0, tail)
		}
		if exactLowerTail(999, 7, m0) <= budget {
			t.Errorf("budget %g: m0 %d is not the largest (m0+1 has tail %g)", budget, m0, exactLowerTail(999, 7, m0))
		}
	}
}

// TestLongitudinalShape checks the bound's structure: more mates or a
// larger batch never hurt, the transcript bound applies only with Users,
// the tail is charged when mates are inferred, and bad arguments fail.
func TestLongitudinalShape(t *testing.T) {
	const delta = 1e-6
	base := Longitudinal{Tree: 64, Eps0: 2, Periods: 3, Batch: 20000}
	r, err := base.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if r.Levels != 7 || r.Trees != 2 || math.IsInf(r.Transcript, 1) == false || r.Tail <= 0 || r.Tail > 0.05*delta {
		t.Errorf("unexpected result %+v", r)
	}
	if r.Mates >= 20000/7 || r.Mates < 20000/7*8/10 {
		t.Errorf("mates %d, want a little below 20000/7", r.Mates)
	}
	exact, err := Longitudinal{Tree: 64, Eps0: 2, Periods: 3, Mates: r.Mates}.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if !(exact.Upper <= r.Upper) {
		t.Errorf("known mates %d give %g, more than the binomial bound %g", r.Mates, exact.Upper, r.Upper)
	}
	bigger := base
	bigger.Batch = 80000
	rb, err := bigger.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if !(rb.Upper < r.Upper) {
		t.Errorf("batch 80000 gives %g, not below batch 20000's %g", rb.Upper, r.Upper)
	}
	withUsers := base
	withUsers.Users = 20000
	ru, err := withUsers.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if math.IsInf(ru.Transcript, 1) || ru.Upper != math.Min(ru.PerPeriod, ru.Transcript) || ru.PerPeriod != r.PerPeriod {
		t.Errorf("with users: %+v (without: %+v)", ru, r)
	}
	for _, bad := range []Longitudinal{
		{Tree: 3, Eps0: 1, Periods: 1, Batch: 10},
		{Tree: 0, Eps0: 1, Periods: 1, Batch: 10},
		{Tree: 4, Eps0: 0, Periods: 1, Batch: 10},
		{Tree: 4, Eps0: 1, Periods: 0, Batch: 10},
		{Tree: 4, Eps0: 1, Periods: 1},
	} {
		if _, err := bad.Epsilon(delta); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
