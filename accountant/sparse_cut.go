package accountant

import "math"

// The relative cut of sparseExact's pair sums.
//
// A pair sum (sparse_pair.go) walks every leaf whose log mass is at least
// -800, where exp underflows; most of them add nothing the bracket can
// see. A calibration's clone baseline at n = 1e6 walked about a million
// leaves per evaluation, most of them 100 to 800 nats below the leaves that
// carry the sum. The cut walks only the leaves of a pair sum whose
// computed log mass E(c) is at least a threshold thr, and adds a bound on
// everything else to the upper sum.
//
// Which leaves may go. Let E*(c) be a leaf's exact log mass (lm + lp plus
// the log of the binomial probability of c among left at odds e^d:
// concave in c; lpm's own error is sparseRel's, as for every other leaf).
// The computed E(c) is within E_m <= 0.01 of it (sparse_sum.go). E* rises
// up to its maximum and falls after it, and the maximum lies within one
// leaf of the mode cs that pairMode returns (the rounding of d and of the
// mode's formula moves it by less than one); so E* is nondecreasing on
// [0, cs-2] and nonincreasing on [cs+2, left].
//
//   - keptLeaves keeps the core [cs-2, cs+2] and bisects outward on each
//     side for the last leaf with E >= thr: the bisection's invariant
//     leaves a leaf no with E(no) < thr just outside the band, and on its
//     side of the mode every leaf beyond no has E* <= E*(no) < thr + 0.01.
//   - If no leaf of the core has E >= thr - 0.02 (coreAbove), no leaf's E*
//     reaches thr - 0.01, and the whole pair goes.
//   - The leaves before the first that counts, f, add nothing, kept or not:
//     the true sums rise with c (zx >= zy) and f-1 does not count, so its
//     true sum and every earlier one is <= 0 (sparse_pair.go). cutBand
//     finds f (firstCountingNear: the root of the pair's sum in plain
//     floating point, checked at f-1 and f, else the bisection). Where f
//     lies right of the core, E* is nonincreasing from f on: E(f) < thr
//     drops [f, left] whole, and otherwise a bisection from f finds the
//     last leaf with E >= thr, every later one having E* < thr + 0.01.
//     Where f lies in or left of the core, keptLeaves' band is walked
//     from f on.
//
// The bound. Every leaf's true sum is at most the pair's largest, s + left
// zx, which is at most X = t + eps_m + 3u (|t| + |s| + left |zx|) for its
// computed value t (bandSum.mayCount's margin; cutThreshold). The cut
// takes thr = cut - log((left + 1) X) - 0.02, so each dropped leaf adds at
// most e^(thr + 0.01) X = e^cut / (left + 1) e^-0.01 to the exact sum, up
// to the roundings of thr (a few ulps of its terms). dropLeaves adds nd
// e^cut / (left + 1) for nd dropped leaves to bandSum.drop, and sparseExact
// adds that to the upper sum before the final scaling by 1 + sparseRel
// (which covers lpm's error, as for every leaf); the e^-0.01 to spare
// covers the roundings. e^cut is normal (startCut keeps cut >= -650), and
// so is e^cut / (left + 1). The lower sum only loses the dropped leaves'
// terms, all nonnegative. Where X is not positive no leaf counts, and
// where thr is at or below -800 the pair takes its alive band
// (aliveLeaves) as before the cut.
//
// The threshold. Soundness does not depend on cut; tightness does. A
// probe pass (probe) runs the same enumeration over about 64 of the m in
// [0, m_max] and, per pair sum, adds one leaf term the full pass adds to
// its lower sum (the largest mass among the leaves that count, as the walk
// computes them): their total L is at most the lower sum, up to the terms
// of pairs the cut then drops whole. L is raised to DeltaFloor n, below
// which sparseExact's upper end is DeltaFloor whatever the sum. Each of
// the R pair sums (one per m with two non-dominant atoms, at most one per
// leaf otherwise) gets the budget e^cut = cutRel L / R, so the dropped
// leaves add at most about cutRel L, 2^-40 of the lower sum, to the upper
// one; the lower sum loses at most as much. sparseExact checks afterwards
// that the dropped bound is within cutCheck of the lower sum (or of
// DeltaFloor n) and otherwise computes again without the cut
// (TestSparseCutFallback; it never fails on the mechanisms' own sets,
// TestSparseCutMechanismSets).
//
// Measured: the clone_composed baseline of `calibrate --mech krr:k=10
// --eps 1 --delta 1e-6 --n 1e6 --rounds 30` walked about 1.1 million
// leaves per evaluation before the cut and about 40,000 after it; the
// brackets move by at most cutCheck (TestSparseCutMatchesFull).
// cutRel is the budget's share of L, cutCheck the dropped bound's largest
// share of the lower sum (variables only so that tests can force the
// recomputation without the cut, or keep the cut's bracket whatever the
// bound's size).
var (
	cutRel   = 0x1p-40
	cutCheck = 1e-11
)

// pairMode returns c* = floor((e^d left - 1)/(1 + e^d)) + 1, within [0,
// left], the pair sum's mode up to one leaf (0 when the masses fall from
// the start).
func pairMode(left int, d float64) int {
	// x = (e^d left - 1)/(1 + e^d), in a form that neither overflows nor
	// turns NaN at |d| in the hundreds (masses e^700 apart).
	var x float64
	if d > 0 {
		q := math.Exp(-d)
		x = (float64(left) - q) / (1 + q)
	} else {
		q := math.Exp(d)
		x = (q*float64(left) - 1) / (1 + q)
	}
	if x >= 0 {
		return int(math.Min(float64(left), math.Floor(x)+1))
	}
	return 0
}

// keptLeaves returns the band [kl, kr] of leaves a cut at thr keeps and
// the number nd of leaves outside it, each with E* < thr + 0.01 (the proof
// is at the top of the file); ok is false when the whole pair is dropped
// (nd = left + 1).
func keptLeaves(E func(int) float64, left int, d, thr float64) (kl, kr, nd int, ok bool) {
	cs := pairMode(left, d)
	lo, hi := max(cs-2, 0), min(cs+2, left)
	if !coreAbove(E, lo, hi, thr) {
		return 0, 0, left + 1, false
	}
	// E* is nondecreasing on [0, lo] and nonincreasing on [hi, left].
	kl, kr = firstAbove(E, lo, thr), lastAbove(E, hi, left, thr)
	return kl, kr, left + 1 - (kr - kl + 1), true
}

// coreAbove reports whether some leaf of the core [lo, hi] has E >= thr -
// 0.02; if none does, no leaf's E* reaches thr.
func coreAbove(E func(int) float64, lo, hi int, thr float64) bool {
	for c := lo; c <= hi; c++ {
		if E(c) >= thr-0.02 {
			return true
		}
	}
	return false
}

// firstAbove returns the first leaf of [0, to] after one whose E is below
// thr (by bisection, from kept), E* being nondecreasing there: every leaf
// before it has E* < thr + 0.01.
func firstAbove(E func(int) float64, to int, thr float64) int {
	return bisectFirst(-1, to, func(c int) bool { return E(c) >= thr })
}

// lastAbove returns the last leaf of [from, left] before one whose E is
// below thr (by bisection, from kept), E* being nonincreasing there: every
// leaf after it has E* < thr + 0.01.
func lastAbove(E func(int) float64, from, left int, thr float64) int {
	return bisectLast(from, left+1, func(c int) bool { return E(c) >= thr })
}

// cutBand returns the leaves [cl, cr] a pair walks under the cut at thr
// and adds the bound on the other leaves' terms to b.drop; ok is false
// when it walks none. The leaves before the first that counts, f, have
// true sums <= 0 (sparse_pair.go: the true sums rise with c, and f-1 does
// not count) and add nothing, kept or not; g is a guess at f (the root of
// the pair's sum: firstCountingNear). Where f lies right of the mode's
// core (f > cs+2), E* is nonincreasing from f on, so the leaves from f to
// the last with E >= thr (E(f) < thr meaning none) are kept and the rest
// of [f, left] is bounded; otherwise keptLeaves' band is taken from f on.
func cutBand(E func(int) float64, sc func(int) dd, b *bandSum, left, g int, d, thr float64) (cl, cr int, ok bool) {
	cs := pairMode(left, d)
	lo, hi := max(cs-2, 0), min(cs+2, left)
	if !coreAbove(E, lo, hi, thr) {
		b.dropLeaves(left+1, left)
		return 0, 0, false
	}
	f := firstCountingNear(0, left, g, sc, b)
	if f > left {
		return 0, 0, false
	}
	if f <= hi {
		kl, kr, nd, ok := keptLeaves(E, left, d, thr)
		b.dropLeaves(nd, left)
		if !ok || kr < f {
			return 0, 0, false
		}
		return max(kl, f), kr, true
	}
	if !(E(f) >= thr) {
		b.dropLeaves(left-f+1, left)
		return 0, 0, false
	}
	cr = lastAbove(E, f, left, thr)
	b.dropLeaves(left-cr, left)
	return f, cr, true
}

// dropLeaves adds the bound on nd dropped leaves of a pair of left draws,
// nd e^cut / (left + 1): each has E* < thr + 0.01 and a true sum at most
// X, and thr + 0.01 + log X = cut - log(left + 1) - 0.01 up to the
// roundings of thr (a few ulps of its terms), which the 0.01 covers with
// those of this product (e^cut is normal: startCut).
func (b *bandSum) dropLeaves(nd, left int) {
	if nd > 0 {
		b.drop.add(float64(nd) * b.cutExp / float64(left+1))
	}
}

// cutThreshold returns the threshold cut - log((left + 1) X) - 0.02 of a
// pair of left draws from a node of sum s, zx >= zy, where X bounds its
// largest true sum (bandSum.mayCount's margin); ok is false where the cut
// does not apply (no budget, no positive sum, or a threshold at or below
// the alive band's -800).
func (b *bandSum) cutThreshold(s dd, left int, zx float64) (thr float64, ok bool) {
	if !b.cutOn {
		return 0, false
	}
	t := s.addProd(float64(left), zx).val()
	x := t + b.eps + 3*ulp*(math.Abs(t)+math.Abs(s.hi)+float64(left)*math.Abs(zx))
	if !(x > 0) {
		return 0, false
	}
	thr = b.cut - math.Log(float64(left+1)*x) - 0.02
	return thr, thr > -800
}

// startCut sets the per-pair budget cutRel L / R, or leaves the cut off
// where its log is below -650 (so that e^cut / (left + 1) stays normal:
// left is below 2^24 here) or not finite.
func (b *bandSum) startCut(L, R float64) {
	cut := math.Log(cutRel * L / R)
	b.cutOn = cut >= -650 && !math.IsInf(cut, 1)
	if b.cutOn {
		b.cut, b.cutExp = cut, math.Exp(cut)
	}
}
