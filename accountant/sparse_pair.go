package accountant

import "math"

// The last two atoms of sparseExact's enumeration, summed by a walk.
//
// With the counts of every other atom fixed, sparseExact's leaves are
// c = 0..left draws of atom x and left-c of atom y, of mass
//
//	V(c) = exp(lm + lp + c lx - log c! + (left-c) ly - log (left-c)!)
//
// and sum s(c) = s + c zx + (left-c) zy; it adds V(c) s(c) for each c whose
// leaf counts (s(c) may be positive: sparse_sum.go). It used to take one
// exp per leaf, most of its time. Consecutive masses differ by an exact
// factor,
//
//	V(c+1) / V(c) = rho (left-c)/(c+1),   rho = e^(lx - ly),
//
// so one exp and a few multiplications and a division per step give them
// all. The leaves before the first that counts are not even scanned: the
// true sums s(c) rise with c (zx >= zy), a leaf that does not count has a
// true sum <= 0 (sparse_sum.go), so every leaf before one that does not
// count adds nothing, and a bisection finds such a leaf f-1 with leaf f
// counting (or f = 0). The walk covers the leaves from the first to the
// last that counts and starts at the largest mass among them (the masses
// are unimodal in c: the factor falls as c grows); every step is a product
// of positive numbers, so nothing cancels.
//
// Rounding, with u = 2^-53. rho is exp of the rounded difference d = lx-ly:
// relative error at most (|d| + 4) u to first order (the subtraction's
// rounding, amplified by exp, and exp's own error, up to 4u relative:
// Go's amd64 exp errs by up to about 2.5u, more than the one ulp, 2u,
// this comment first assumed); the step's factor, rho times the exact
// integer left-c over the exact integer c+1, adds u for each of the two
// operations, and its product with the walked value one more. A walked
// term k steps from its start therefore has relative error at most
// k (|d| + 7) u (1.01) beyond that of the exp it started from (for
// k (|d|+7) u <= 0.01), and the start is computed as sparseExact computes
// every term. sum walks only when left (|d| + 5) u (1.01) <= walkRel =
// 1e-11, so a walked term is within (7/5) walkRel, which sparse_sum.go
// adds to each term's relative error r_m. A second engineer measured the walk
// against a 300-bit reference at 0.4 of this bound at most. Otherwise, and
// for every term once a walked one falls below walkTiny, it takes the exp
// per term as before.
//
// Under the relative cut (sparse_cut.go) the leaves walked are cutBand's
// instead of aliveLeaves', and the walk is the same on them.
//
// Underflow: the walk holds only normal numbers. A step's factor lies
// between e^-600 2^-15 and e^600 2^15 (|d| > 600 takes the exp per term;
// left is at most 1e-11/(5u) < 2^15), normal and finite; the walked value
// times it is the step's only result, and one below walkTiny = 2^-900
// (denormal or not) sends the term and the rest of its direction to the
// exp per term.
const (
	walkRel  = 1e-11
	walkTiny = 0x1p-900
)

// aliveLeaves returns the leaves [cl, cr] of a pair sum outside which
// every mass is exactly 0, and false when none is alive. E(c) is a leaf's
// log mass as the pair sum computes it; exactly, lm + lp plus the log of
// the binomial probability of c among left at odds e^d, concave in c with
// its maximum within one of c* = floor((e^d left - 1)/(1 + e^d)) + 1
// (where e^d (left - c) = c + 1); computed, within E_m <= 0.01 of that
// (sparse_sum.go). The seed is the best of c*-1, c*, c*+1; cl and cr are
// the last leaves on either side with computed E >= -800, found by
// bisection. Beyond them the exact E only falls further (concavity), so
// every computed exponent there is below -800 + 0.02, where exp
// underflows to exactly 0 (below -745.13), directly or by a walk (which
// hands every mass below walkTiny to the exp): such leaves add +0 (which
// leaves a compensated sum as it is, or moves it by one ulp in a rare
// state: sparse.go). c* is kept inside [cl, cr] so that the walk starts
// where it did before.
func aliveLeaves(E func(int) float64, left int, d float64) (cl, cr int, ok bool) {
	const dead = -800
	cs := pairMode(left, d)
	seed, best := cs, E(cs)
	for _, c := range []int{cs - 1, cs + 1} {
		if c >= 0 && c <= left {
			if e := E(c); e > best {
				seed, best = c, e
			}
		}
	}
	if !(best >= dead) {
		return 0, 0, false
	}
	// The last alive leaves on either side of seed: E(no) < dead <= E(yes).
	cl, cr = firstAbove(E, seed, dead), lastAbove(E, seed, left, dead)
	return min(cl, cs), max(cr, cs), true
}

// pairWalk holds the masses and sums of one pair sum between calls.
type pairWalk struct{ v, x []float64 }

// sum adds to b, in order of c, the leaves c = 0..left that count
// (bandSum.counts), where lm + lp is the log mass of the counts fixed so
// far, s their sum, zx >= zy the two atoms' values, lx and ly their
// renormalised log masses and lf the log factorials.
func (w *pairWalk) sum(lm, lp float64, left int, s dd, zx, zy, lx, ly float64, lf []float64, b *bandSum) {
	// direct and sc are sparseExact's per-leaf formulas, term for term.
	logMass := func(c int) float64 {
		e := lp + float64(c)*lx - lf[c]
		e += float64(left-c)*ly - lf[left-c]
		return lm + e
	}
	direct := func(c int) float64 { return math.Exp(logMass(c)) }
	sc := func(c int) dd { return s.addProd(float64(c), zx).addProd(float64(left-c), zy) }
	d := lx - ly
	if b.probe {
		w.probe(logMass, left, d, pairRoot(s, left, zx, zy), sc, b)
		return
	}
	var cl, cr int
	var ok bool
	if thr, cut := b.cutThreshold(s, left, zx); cut {
		cl, cr, ok = cutBand(logMass, sc, b, left, pairRoot(s, left, zx, zy), d, thr)
	} else {
		cl, cr, ok = aliveLeaves(logMass, left, d)
	}
	if !ok {
		return
	}
	if left == 0 || math.Abs(d) > 600 || float64(left)*(math.Abs(d)+5)*ulp*1.01 > walkRel {
		for c := cl; c <= cr; c++ {
			if x := sc(c).val(); b.counts(x) {
				b.leaf(direct(c), x)
			}
		}
		return
	}
	// The leaves that count, first to last, and their evaluated sums: the
	// scan starts at the leaf f the bisection finds (the proof is at the
	// top of the file) and applies the rule term by term from there, as the
	// evaluated sums need not rise.
	f := firstCounting(cl, cr, sc, b)
	if cap(w.x) < left+1 {
		w.x = make([]float64, 2*left+1)
	}
	xs := w.x[:left+1]
	lo, hi := -1, -1
	for c := f; c <= cr; c++ {
		xs[c] = sc(c).val()
		if b.counts(xs[c]) {
			if lo < 0 {
				lo = c
			}
			hi = c
		}
	}
	if lo < 0 {
		return
	}
	rho, rhoInv := math.Exp(d), math.Exp(-d)
	// The mode: masses rise while rho (left-c) >= c+1; the walk starts at
	// the largest mass of [lo, hi].
	c0 := 0
	if x := (rho*float64(left) - 1) / (1 + rho); x >= 0 {
		c0 = min(left, int(x)+1)
	}
	c0 = min(max(c0, lo), hi)
	if cap(w.v) < left+1 {
		w.v = make([]float64, 2*left+1)
	}
	v := w.v[:left+1]
	// v[c] < 0 marks a mass left to the exp per term. Each step's factor
	// (rho times one integer over another) does not depend on the walk,
	// so the chain of dependent operations is one multiplication a step.
	v[c0] = direct(c0)
	exact := v[c0] < walkTiny
	for c := c0; c < hi; c++ {
		v[c+1] = -1
		if !exact {
			x := v[c] * (rho * float64(left-c) / float64(c+1))
			if exact = x < walkTiny; !exact {
				v[c+1] = x
			}
		}
	}
	exact = v[c0] < walkTiny
	for c := c0; c > lo; c-- {
		v[c-1] = -1
		if !exact {
			x := v[c] * (rhoInv * float64(c) / float64(left-c+1))
			if exact = x < walkTiny; !exact {
				v[c-1] = x
			}
		}
	}
	for c := lo; c <= hi; c++ {
		if b.counts(xs[c]) {
			m := v[c]
			if m < 0 {
				m = direct(c)
			}
			b.leaf(m, xs[c])
		}
	}
}

// firstCounting returns the first leaf of [cl, cr] that counts, or one
// past the last leaf before which none does (cr + 1 when none counts):
// the scan from it applies the rule term by term (the proof is at the
// top of the file).
func firstCounting(cl, cr int, sc func(int) dd, b *bandSum) int {
	if b.counts(sc(cl).val()) {
		return cl
	}
	// cl does not count; cr + 1 counts or is past the end.
	return bisectFirst(cl, cr+1, func(c int) bool { return b.counts(sc(c).val()) })
}

// firstCountingNear is firstCounting with a guess g: where g-1 (>= cl)
// does not count and g (<= cr) does, it returns g at once, which is all
// the walk needs of f (a leaf before it that does not count).
func firstCountingNear(cl, cr, g int, sc func(int) dd, b *bandSum) int {
	if g > cl && g <= cr && !b.counts(sc(g-1).val()) && b.counts(sc(g).val()) {
		return g
	}
	return firstCounting(cl, cr, sc, b)
}

// pairRoot returns floor(c) + 1 for the root c of the pair's sum s + c zx
// + (left - c) zy, in plain floating point (a guess for
// firstCountingNear), or -1 where it has none in range.
func pairRoot(s dd, left int, zx, zy float64) int {
	r := -(s.val() + float64(left)*zy) / (zx - zy)
	if !(r >= 0 && r < float64(left)) {
		return -1
	}
	return int(r) + 1
}

// probe adds to b.est, for the cut's threshold (sparse_cut.go), the term
// of the largest mass among the pair's leaves that count, as the lower
// sum takes it, and counts the pair.
func (w *pairWalk) probe(E func(int) float64, left int, d float64, g int, sc func(int) dd, b *bandSum) {
	f := firstCountingNear(0, left, g, sc, b)
	if f > left {
		return
	}
	c0 := max(pairMode(left, d), f)
	if x := sc(c0).val(); b.counts(x) && x-b.eps > 0 {
		b.est.add(math.Exp(E(c0)) * (x - b.eps) * (1 - b.rel))
	}
}
