package accountant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// Review 60 of fceb63c: the pair walk's terms against exact arithmetic.
//
// sparse_pair.go claims a walked term k steps from its start c0 is within
// k (|d| + 7) u (1.01) of the start times the exact ratio V(c)/V(c0) =
// e^((c-c0)(lx-ly)) c0! (left-c0)! / (c! (left-c)!) (lx, ly the float
// inputs, d = fl(lx - ly)), and so, under the gate left (|d| + 5) u (1.01)
// <= walkRel, within (7/5) walkRel. The walk keeps its masses in
// pairWalk.v, which the test reads after a sum whose every leaf counts.

// r60RhoErr returns |fl(exp(fl(lx-ly))) / e^(lx-ly) - 1| in 256 bits.
func r60RhoErr(ln2 *big.Float, lx, ly float64) float64 {
	D := new(big.Float).SetPrec(bigPrec).SetFloat64(lx)
	D.Sub(D, new(big.Float).SetPrec(bigPrec).SetFloat64(ly))
	E := bigExp(D, ln2)
	r := new(big.Float).SetPrec(bigPrec).SetFloat64(math.Exp(lx - ly))
	r.Quo(r, E)
	r.Sub(r, big.NewFloat(1))
	f, _ := r.Float64()
	return math.Abs(f)
}

type r60WalkStats struct {
	terms        int
	worstOfBound float64 // max over walked terms of error / (k (|d|+7) u 1.01)
	worstOfOld   float64 // the same against the old k (|d|+5) u 1.01
	worstRel     float64 // max relative error of a walked term
}

// r60CheckWalk runs the walk on one pair (all leaves counting) and checks
// every walked term against the exact ratio to the start.
func r60CheckWalk(t *testing.T, ln2 *big.Float, lf []float64, left int, lx, ly float64, st *r60WalkStats) {
	t.Helper()
	var w pairWalk
	var b bandSum
	lm := lf[left] // masses are binomial probabilities
	// s = 1 + ..., zx = 1, zy = 0: every leaf's sum is >= 1.
	w.sum(lm, 0, left, dd{hi: 1}, 1, 0, lx, ly, lf, &b)
	d := lx - ly
	if left == 0 || math.Abs(d) > 600 || float64(left)*(math.Abs(d)+5)*ulp*1.01 > walkRel {
		t.Fatalf("left %d d %g: not a walked pair", left, d)
	}
	if len(w.v) == 0 && cap(w.v) == 0 {
		return // no leaf alive
	}
	v := w.v[:left+1]
	rho := math.Exp(d)
	c0 := 0
	if x := (rho*float64(left) - 1) / (1 + rho); x >= 0 {
		c0 = min(left, int(x)+1)
	}
	// The alive range [cl, cr] clamps c0 (every leaf counts, so lo = cl
	// and hi = cr); find them as the nonzero run of v around c0.
	logMass := func(c int) float64 {
		e := float64(c)*lx - lf[c]
		e += float64(left-c)*ly - lf[left-c]
		return lm + e
	}
	cl, cr, ok := aliveLeaves(logMass, left, d)
	if !ok {
		return
	}
	c0 = min(max(c0, cl), cr)
	if v[c0] != math.Exp(logMass(c0)) {
		t.Fatalf("left %d d %g: v[c0 = %d] = %v, not the direct start %v", left, d, c0, v[c0], math.Exp(logMass(c0)))
	}
	D := new(big.Float).SetPrec(bigPrec).SetFloat64(lx)
	D.Sub(D, new(big.Float).SetPrec(bigPrec).SetFloat64(ly))
	E := bigExp(D, ln2)
	Einv := new(big.Float).SetPrec(bigPrec).Quo(big.NewFloat(1).SetPrec(bigPrec), E)
	start := new(big.Float).SetPrec(bigPrec).SetFloat64(v[c0])
	one := big.NewFloat(1)
	check := func(c int, R *big.Float) {
		if v[c] <= 0 {
			return // handed to the exp per term
		}
		k := float64(c - c0)
		if k < 0 {
			k = -k
		}
		want := new(big.Float).SetPrec(bigPrec).Mul(start, R)
		rel := new(big.Float).SetPrec(bigPrec).SetFloat64(v[c])
		rel.Quo(rel, want)
		rel.Sub(rel, one)
		r, _ := rel.Float64()
		r = math.Abs(r)
		bound := k * (math.Abs(d) + 7) * ulp * 1.01
		old := k * (math.Abs(d) + 5) * ulp * 1.01
		st.terms++
		st.worstOfBound = math.Max(st.worstOfBound, r/bound)
		st.worstOfOld = math.Max(st.worstOfOld, r/old)
		st.worstRel = math.Max(st.worstRel, r)
		if r > bound {
			t.Errorf("left %d lx %v ly %v: term %d (%g steps) off by %g > k (|d|+7) u 1.01 = %g", left, lx, ly, c, k, r, bound)
		}
		if r > 1.4*walkRel {
			t.Errorf("left %d lx %v ly %v: term %d off by %g > 1.4 walkRel", left, lx, ly, c, r)
		}
	}
	R := new(big.Float).SetPrec(bigPrec).SetInt64(1)
	for c := c0; c < cr; c++ {
		R.Mul(R, E)
		R.Mul(R, new(big.Float).SetPrec(bigPrec).SetInt64(int64(left-c)))
		R.Quo(R, new(big.Float).SetPrec(bigPrec).SetInt64(int64(c+1)))
		check(c+1, R)
	}
	R.SetInt64(1)
	for c := c0; c > cl; c-- {
		R.Mul(R, Einv)
		R.Mul(R, new(big.Float).SetPrec(bigPrec).SetInt64(int64(c)))
		R.Quo(R, new(big.Float).SetPrec(bigPrec).SetInt64(int64(left-c+1)))
		check(c-1, R)
	}
}

// r60WorstPair picks, of tries random pairs (lx, ly) = (log p, log1p(-p))
// or with a gap g, the one whose rho = exp(fl(lx - ly)) is farthest from
// e^(lx-ly): the walk's systematic error.
func r60WorstPair(ln2 *big.Float, r *rand.Rand, tries int, gap float64) (float64, float64, float64) {
	bx, by, be := 0.0, 0.0, -1.0
	for range tries {
		p := r.Float64()
		lx, ly := math.Log(p), math.Log1p(-p)
		if gap > 0 {
			p = math.Exp(-gap * r.Float64())
			lx, ly = math.Log(p), math.Log1p(-p)
		}
		if r.IntN(2) == 0 {
			lx, ly = ly, lx
		}
		if e := r60RhoErr(ln2, lx, ly); e > be {
			bx, by, be = lx, ly, e
		}
	}
	return bx, by, be
}

// TestReview60PairWalkTermsExact: walked terms against 256-bit ratios, on
// pairs whose rho has the largest exp error among random candidates, with
// left from 1 to the gate's limit (about 9e4 at d = 0) and gaps |d| up to
// 60. Every walked term must be within k (|d|+7) u (1.01) and 1.4 walkRel.
func TestReview60PairWalkTermsExact(t *testing.T) {
	ln2 := bigLn2()
	r := rand.New(rand.NewPCG(60, 1))
	lf := logFactorials(100_000)
	var st r60WalkStats
	worstRho := 0.0
	for i := range 60 {
		gap := 0.0
		switch i % 4 {
		case 1:
			gap = 5
		case 2:
			gap = 60
		}
		lx, ly, re := r60WorstPair(ln2, r, 300, gap)
		d := lx - ly
		worstRho = math.Max(worstRho, re/ulp)
		limit := int(walkRel / ((math.Abs(d) + 5) * ulp * 1.01))
		var left int
		switch i % 3 {
		case 0:
			left = limit // at the gate
		case 1:
			left = 1 + r.IntN(200)
		default:
			left = 1 + r.IntN(limit)
		}
		if i >= 12 && left > 20000 {
			left = 20000 // keep the time down: the gate's edge is covered above
		}
		r60CheckWalk(t, ln2, lf, left, lx, ly, &st)
	}
	if st.terms < 10000 {
		t.Fatalf("only %d walked terms checked", st.terms)
	}
	t.Logf("%d walked terms; worst rho error %.2fu; worst term error %.3g (%.3f of k(|d|+7)u1.01, %.3f of the old k(|d|+5)u1.01, %.3f of 1.4 walkRel)",
		st.terms, worstRho, st.worstRel, st.worstOfBound, st.worstOfOld, st.worstRel/(1.4*walkRel))
}
