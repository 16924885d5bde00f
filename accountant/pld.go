package accountant

import (
	"math"
	"math/big"
)

// This file turns sampled points of a shuffled mechanism's privacy profile
// into privacy loss distributions (PLDs) on a lattice of losses j*step,
// one that dominates the mechanism (pessimistic) and one that it dominates
// (optimistic), so that compositions of them bracket the composition of the
// mechanism (docs/time.md sections 2 and 3).
//
// Notation. For a pair (P, Q) and a >= 0, H(a) = H_a(P||Q) =
// sum_o (P(o) - a Q(o))_+. H is convex and non-increasing with H(0) = 1;
// H(e^eps) is delta(eps). A pair has the PLD "P-mass pi at loss l" when
// P(L = l) = pi and then Q(L = l) = pi e^-l; H(a) = sum_l (pi_l - a q_l)_+.
//
// Why the single-report bound is the profile of a pair. For an atom set
// (r_j, p_j, q_j) and n users let N ~ Multinomial(n; r_1..r_J, 1 - gamma)
// and A = sum_j N_j p_j/r_j, B = sum_j N_j q_j/r_j. The laws P* and Q* of N
// with densities A/n and B/n have H_a(P*||Q*) = E[(A - aB)_+]/n =
// (1/n) E[(Z_1 + ... + Z_n)_+] for every a >= 0, the engine's quantity.
// The blanket argument (user 1 drawn from R(x) or R(x'), every other user
// from the blanket with probability gamma, independently of the data, and
// the rest handed to the adversary) shows the shuffled output is a
// post-processing of (P*, Q*) for every a >= 0, so (P*, Q*) dominates the
// shuffled mechanism for that neighbouring pair (Zhu, Dong, Wang 2022,
// Definition 7) and the max over candidate pairs of H is the profile of a
// dominating pair. For a < 1, H_a(P||Q) = 1 - a + a H_{1/a}(Q||P): the
// candidate list is closed under swapping P and Q (upperSets), so the
// maximal profile F is symmetric and the whole of F follows from F on
// a >= 1, which the engine brackets: l_i <= F(a_i) <= u_i at grid points
// a_i = e^{j_i step}, j_0 = 0 < j_1 < ... < j_m, with F(a_m) = 0 because
// j_m step >= the mechanism's local eps.
//
// Pessimistic PLD (dominates). Let U be the lower convex hull of the points
// (a_i, u_i). A chord of the convex F between two points lies above F, and
// the chord through points above F lies above that, so U >= F on
// [1, a_m]; U is convex, non-increasing (it ends at 0) and piecewise linear
// with kinks at some a_i. It is the profile on a >= 1 of the symmetric pair
// with, for every kink a_k > 1 with slope jump q_k, P-mass a_k q_k at loss
// j_k step and its mirror (P-mass q_k at loss -j_k step), and P-mass
// P_0 = 1 - U(1) - 2|U'(1+)| at loss 0; its profile for a < 1 is then
// 1 - a + a U(1/a), the symmetric extension, which bounds F there for the
// same reason. P_0 >= 0 is the condition for the extension to be convex at
// a = 1; when the bounds u_i are loose enough to break it, the points are
// raised to the line through (1, u_0) with slope -(1 - u_0)/2 before the
// hull is taken, which restores it (P_0 = 0) and keeps U >= F. The raised
// hull ends at (a_m, 0) only if that line reaches 0 by a_m, i.e. u_0 <=
// (a_m - 1)/(a_m + 1); so every u_i is first lowered to at most
// (a_m - a_i)/(a_m + 1), the profile of randomized response with loss
// log a_m. That is sound: F(a_m) = 0 and symmetry put every loss of the
// pair in [-log a_m, log a_m], and randomized response with that loss
// dominates every such pair (Kairouz, Oh, Viswanath 2015, Theorem 2.4).
//
// Optimistic PLD (dominated). Here F is the profile of one fixed pair (the
// lower-bound datasets of docs/accounting.md §4, or the blanket pair
// itself for the tightness certificate), possibly asymmetric, sampled on
// both sides: F+(a) = H_a(P||Q) and F-(a) = H_a(Q||P), a >= 1. On the
// interval [a_i, a_{i+1}] three lines lie below F+:
//   - the forward line through (a_i, l_i) with slope
//     (l_i - u_{i-1})/(a_i - a_{i-1}): it is at most the slope of the chord
//     of F+ over [a_{i-1}, a_i], hence at most F+'(a_i), so the line stays
//     below F+ to the right of a_i (for i = 0 the left neighbour is the
//     mirror point 1/a_1, where F+(1/a_1) = 1 - 1/a_1 + F-(a_1)/a_1);
//   - the backward line through (a_{i+1}, l_{i+1}) with slope
//     min(0, (u_{i+2} - l_{i+1})/(a_{i+2} - a_{i+1})), below F+ to the left
//     of a_{i+1} by the mirror argument and monotonicity;
//   - zero.
// Their maximum g_i lies below F+ on the interval. Values v_i <= l_i are
// chosen so that every chord (a_i, v_i)-(a_{i+1}, v_{i+1}) lies below g_i
// (a linear function minus a convex piecewise-linear one is concave, so it
// is checked at g_i's breakpoints). The lower convex hull C of (a_i, v_i),
// cut at zero, is then convex, below F+, with kinks at grid points (and at
// most one more where it reaches 0, whose atom is moved down to the lattice:
// see below). Likewise for F-. With a common value at a = 1 (the total
// variation is the same in both directions) and P_0 = 1 - C(1) -
// |C+'(1+)| - |C-'(1+)| >= 0 (lowering C(1) until it holds), the atoms
// define a pair dominated by (P, Q) for every a >= 0.
//
// From pairs to compositions. Domination is preserved by products (Zhu,
// Dong, Wang 2022, Theorem 10, adaptive composition), so the composition of
// the pessimistic pairs dominates the composed mechanism and the composition
// of optimistic pairs is dominated by the composed fixed pair. Then only the
// P-law of the loss is used: delta(eps) = E_P[(1 - e^{eps - L})_+] is
// non-decreasing in L, and independent sums keep stochastic order, so
// moving P-mass to larger losses (to +inf beyond the cut, negative losses up
// to the cut) keeps an upper bound and moving it to smaller losses (dropping
// it at -inf, rounding a loss down) keeps a lower bound.
//
// Arithmetic. Hulls, slopes and masses are computed in 256-bit big.Float
// from the float64 points; a_i = exp(j_i step) is rounded in float64, so
// the kinks sit at losses within kinkSlack of j_i step, and the composition
// reads delta at eps -/+ rounds*kinkSlack to cover it (a shift of every
// loss by at most s moves delta(eps) to at most delta(eps - s)). Each mass
// is then rounded to float64 (relative error 2^-53), which the composition
// covers with a relative margin (see convolve.go).

// kinkSlack bounds |log(fl(exp(x))) - x| for the lattice losses x used
// (|x| <= MaxEps0 + 1): exp is within 4u = 2^-51 relative (Go's amd64 exp
// errs by up to about 2.5u), so the log error is at most about 2^-51, and
// 1e-14 leaves a wide margin for the rounding of j*step itself.
const kinkSlack = 1e-14

// hullPrec is the precision of the big.Float hull arithmetic.
const hullPrec = 256

// pld is a privacy loss distribution on the lattice step*Z: the P-law of
// the privacy loss, possibly with mass at +inf. Masses may sum to less
// than 1 when mass was dropped at -inf (optimistic side).
type pld struct {
	step float64
	// lo is the lattice index of mass[0].
	lo int64
	// mass holds P-masses at indices lo, lo+1, ...
	mass []float64
	// inf is the P-mass at +inf.
	inf float64
}

// pldAtom is one atom before it is placed in a dense pld.
type pldAtom struct {
	j int64
	p float64
}

// newPLD places atoms on a dense array, adding masses at equal indices.
func newPLD(step float64, atoms []pldAtom, inf float64) *pld {
	d := &pld{step: step, inf: inf}
	if len(atoms) == 0 {
		d.mass = []float64{0}
		return d
	}
	lo, hi := atoms[0].j, atoms[0].j
	for _, a := range atoms {
		lo, hi = min(lo, a.j), max(hi, a.j)
	}
	d.lo = lo
	d.mass = make([]float64, hi-lo+1)
	for _, a := range atoms {
		d.mass[a.j-lo] += a.p
	}
	return d
}

// cutUpper keeps the pessimistic PLD within [-cut, cut]: mass above goes
// to +inf, mass below moves up to -cut (both stochastically larger).
func (d *pld) cutUpper(cut int64) *pld {
	var atoms []pldAtom
	inf := d.inf
	for i, m := range d.mass {
		j := d.lo + int64(i)
		switch {
		case m == 0:
		case j > cut:
			inf = math.Nextafter(inf+m, 2) // rounded up
		case j < -cut:
			atoms = append(atoms, pldAtom{-cut, m})
		default:
			atoms = append(atoms, pldAtom{j, m})
		}
	}
	return newPLD(d.step, atoms, math.Min(inf, 1))
}

// cutLower keeps the optimistic PLD within [-cut, cut] by dropping the
// rest at -inf (stochastically smaller).
func (d *pld) cutLower(cut int64) *pld {
	var atoms []pldAtom
	for i, m := range d.mass {
		j := d.lo + int64(i)
		if m != 0 && j >= -cut && j <= cut {
			atoms = append(atoms, pldAtom{j, m})
		}
	}
	return newPLD(d.step, atoms, 0)
}

// bigF returns x as a big.Float of precision hullPrec (exact).
func bigF(x float64) *big.Float { return new(big.Float).SetPrec(hullPrec).SetFloat64(x) }

func bsub(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(hullPrec).Sub(x, y) }
func badd(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(hullPrec).Add(x, y) }
func bmul(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(hullPrec).Mul(x, y) }
func bquo(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(hullPrec).Quo(x, y) }
func bf64(x *big.Float) float64       { f, _ := x.Float64(); return f }

// hullPoint is one profile point: lattice index j (loss j*step, a = e^{j
// step}) and a value.
type hullPoint struct {
	j    int64
	a, y *big.Float
}

// lowerHull returns the lower convex hull of points sorted by a (monotone
// chain), as indices into pts.
func lowerHull(pts []hullPoint) []int {
	var h []int
	for i := range pts {
		for len(h) >= 2 {
			o, p := pts[h[len(h)-2]], pts[h[len(h)-1]]
			// Remove p if it is not strictly below the segment o-i:
			// (p.a - o.a)(i.y - o.y) - (p.y - o.y)(i.a - o.a) <= 0.
			c := bsub(bmul(bsub(p.a, o.a), bsub(pts[i].y, o.y)), bmul(bsub(p.y, o.y), bsub(pts[i].a, o.a)))
			if c.Sign() <= 0 {
				h = h[:len(h)-1]
				continue
			}
			break
		}
		h = append(h, i)
	}
	return h
}

// hullSide is one side (losses >= 0) of a piecewise-linear convex profile:
// its value at a = 1 and the kinks a_k > 1 with their slope jumps q_k
// (Q-masses); the slope right of the last kink is 0.
type hullSide struct {
	at1   *big.Float
	kinks []hullPoint // y holds the slope jump q_k
}

// firstSlope returns -U'(1+) = sum of the slope jumps.
func (s *hullSide) firstSlope() *big.Float {
	t := bigF(0)
	for _, k := range s.kinks {
		t = badd(t, k.y)
	}
	return t
}

// sideFromHull converts hull vertices (the first at a = 1, the last with
// value 0) to kinks.
func sideFromHull(pts []hullPoint, h []int) hullSide {
	s := hullSide{at1: pts[h[0]].y}
	slopes := make([]*big.Float, len(h))
	for k := 0; k+1 < len(h); k++ {
		p, q := pts[h[k]], pts[h[k+1]]
		slopes[k] = bquo(bsub(q.y, p.y), bsub(q.a, p.a))
	}
	slopes[len(h)-1] = bigF(0)
	for k := 1; k < len(h); k++ {
		jump := bsub(slopes[k], slopes[k-1])
		if jump.Sign() > 0 {
			s.kinks = append(s.kinks, hullPoint{j: pts[h[k]].j, a: pts[h[k]].a, y: jump})
		}
	}
	return s
}

// pairPLD builds the PLD of the pair whose profile on a >= 1 is pos and
// whose reversed profile is neg (pos.at1 == neg.at1), on lattice step.
// Atoms: P-mass a_k q_k at +j_k for pos kinks, P-mass q_k at -j_k for neg
// kinks, and the rest at 0 (which the caller has made non-negative).
func pairPLD(step float64, pos, neg hullSide) *pld {
	var atoms []pldAtom
	total := bigF(0)
	for _, k := range pos.kinks {
		pm := bmul(k.a, k.y)
		total = badd(total, pm)
		atoms = append(atoms, pldAtom{k.j, bf64(pm)})
	}
	for _, k := range neg.kinks {
		total = badd(total, k.y)
		atoms = append(atoms, pldAtom{-k.j, bf64(k.y)})
	}
	p0 := bsub(bigF(1), total)
	if p0.Sign() > 0 {
		atoms = append(atoms, pldAtom{0, bf64(p0)})
	}
	return newPLD(step, atoms, 0)
}

// zeroMass returns 1 - at1 - firstSlope(pos) - firstSlope(neg), the P-mass
// left for loss 0.
func zeroMass(pos, neg hullSide) *big.Float {
	return bsub(bsub(bsub(bigF(1), pos.at1), pos.firstSlope()), neg.firstSlope())
}

// gridA returns a_i = fl(exp(j_i step)) as exact big.Floats.
func gridA(js []int64, step float64) []*big.Float {
	a := make([]*big.Float, len(js))
	for i, j := range js {
		a[i] = bigF(math.Exp(float64(j) * step))
	}
	return a
}

// upperPLD returns the pessimistic PLD from upper bounds u_i >= F(a_i) of
// a symmetric profile F at lattice indices js (js[0] = 0, F = 0 at the
// last index).
func upperPLD(step float64, js []int64, u []float64) *pld {
	a := gridA(js, step)
	pts := make([]hullPoint, len(js))
	am := a[len(a)-1]
	amp1 := badd(am, bigF(1))
	for i := range js {
		y := bigF(math.Min(math.Max(u[i], 0), 1))
		// F(a_i) <= (a_m - a_i)/(a_m + 1), the profile of randomized
		// response with loss log a_m, which dominates every symmetric pair
		// with F(a_m) = 0 (see the file comment).
		if rr := bquo(bsub(am, a[i]), amp1); rr.Cmp(y) < 0 {
			y = rr
		}
		if i == len(js)-1 {
			y = bigF(0)
		}
		pts[i] = hullPoint{j: js[i], a: a[i], y: y}
	}
	side := sideFromHull(pts, lowerHull(pts))
	if zeroMass(side, side).Sign() < 0 {
		// Raise the points to the line through (1, u_0) with slope
		// -(1 - u_0)/2 (see the file comment).
		u0 := pts[0].y
		s := bquo(bsub(bigF(1), u0), bigF(-2))
		for i := 1; i < len(pts)-1; i++ {
			line := badd(u0, bmul(s, bsub(pts[i].a, bigF(1))))
			if line.Cmp(pts[i].y) > 0 {
				pts[i].y = line
			}
		}
		// The last point stays at 0: the segment to it from any raised
		// point is no steeper than s, so the first slope is at least s.
		side = sideFromHull(pts, lowerHull(pts))
	}
	return pairPLD(step, side, side)
}

// minorantValues returns v_i <= l_i such that the piecewise-linear
// interpolation of (a_i, v_i) lies below every convex non-increasing F with
// l_i <= F(a_i) <= u_i; mirrorU1 is an upper bound on F(1/a_1) (see the
// file comment). The last point has l = u = 0.
func minorantValues(a []*big.Float, l, u []float64, mirrorU1 *big.Float) []*big.Float {
	m := len(a) - 1
	lb := make([]*big.Float, len(a))
	ub := make([]*big.Float, len(a))
	for i := range a {
		lb[i], ub[i] = bigF(math.Max(l[i], 0)), bigF(math.Max(u[i], 0))
	}
	lb[m], ub[m] = bigF(0), bigF(0)
	type line struct{ x0, y0, s *big.Float }
	at := func(ln line, x *big.Float) *big.Float { return badd(ln.y0, bmul(ln.s, bsub(x, ln.x0))) }
	excess := make([]*big.Float, m)
	for i := 0; i < m; i++ {
		var lines []line
		// Forward line through (a_i, l_i).
		var prevA, prevU *big.Float
		if i == 0 {
			if len(a) > 1 {
				prevA, prevU = bquo(bigF(1), a[1]), mirrorU1
			}
		} else {
			prevA, prevU = a[i-1], ub[i-1]
		}
		if prevA != nil {
			lines = append(lines, line{a[i], lb[i], bquo(bsub(lb[i], prevU), bsub(a[i], prevA))})
		}
		// Backward line through (a_{i+1}, l_{i+1}).
		sb := bigF(0)
		if i+2 <= m {
			s := bquo(bsub(ub[i+2], lb[i+1]), bsub(a[i+2], a[i+1]))
			if s.Sign() < 0 {
				sb = s
			}
		}
		lines = append(lines, line{a[i+1], lb[i+1], sb})
		lines = append(lines, line{a[i], bigF(0), bigF(0)})
		g := func(x *big.Float) *big.Float {
			best := at(lines[0], x)
			for _, ln := range lines[1:] {
				if v := at(ln, x); v.Cmp(best) > 0 {
					best = v
				}
			}
			return best
		}
		chord := line{a[i], lb[i], bquo(bsub(lb[i+1], lb[i]), bsub(a[i+1], a[i]))}
		e := bigF(0)
		check := func(x *big.Float) {
			if x.Cmp(a[i]) < 0 || x.Cmp(a[i+1]) > 0 {
				return
			}
			if d := bsub(at(chord, x), g(x)); d.Cmp(e) > 0 {
				e = d
			}
		}
		check(a[i])
		check(a[i+1])
		for p := 0; p < len(lines); p++ {
			for q := p + 1; q < len(lines); q++ {
				ds := bsub(lines[p].s, lines[q].s)
				if ds.Sign() == 0 {
					continue
				}
				// y0p + sp (x - x0p) = y0q + sq (x - x0q)
				num := bsub(bsub(lines[q].y0, lines[p].y0), bsub(bmul(lines[q].s, lines[q].x0), bmul(lines[p].s, lines[p].x0)))
				check(bquo(num, ds))
			}
		}
		excess[i] = e
	}
	v := make([]*big.Float, len(a))
	for i := range a {
		d := bigF(0)
		if i > 0 && excess[i-1].Cmp(d) > 0 {
			d = excess[i-1]
		}
		if i < m && excess[i].Cmp(d) > 0 {
			d = excess[i]
		}
		v[i] = bsub(lb[i], d)
	}
	return v
}

// minorantSide returns the hull side of C = max(0, lower convex hull of
// (a_i, v_i)), with v_0 replaced by at1. Where C reaches 0 between grid
// points its kink x is off the lattice; it is moved to a grid point keeping
// its slope jump q: for the positive side (pos) to the grid point a_g <= x,
// so the P-mass a_g q at loss log a_g replaces x q at log x; for the
// reversed side to a_g >= x, so the P-mass q moves from loss -log x to
// -log a_g. Both moves only lower losses (stochastically smaller, see the
// file comment), and neither changes the Q-masses that zeroMass reads.
func minorantSide(js []int64, a []*big.Float, v []*big.Float, at1 *big.Float, pos bool) hullSide {
	pts := make([]hullPoint, len(js))
	for i := range js {
		y := v[i]
		if i == 0 {
			y = at1
		}
		pts[i] = hullPoint{j: js[i], a: a[i], y: y}
	}
	h := lowerHull(pts)
	keep := []hullPoint{pts[h[0]]}
	offGrid := false
	for _, idx := range h[1:] {
		p := pts[idx]
		if p.y.Sign() > 0 {
			keep = append(keep, p)
			continue
		}
		if p.y.Sign() == 0 {
			keep = append(keep, p)
			break
		}
		// p.y < 0 < prev.y: C reaches 0 at
		// x = prev.a + prev.y (p.a - prev.a)/(prev.y - p.y).
		prev := keep[len(keep)-1]
		x := badd(prev.a, bquo(bmul(prev.y, bsub(p.a, prev.a)), bsub(prev.y, p.y)))
		keep = append(keep, hullPoint{j: -1, a: x, y: bigF(0)})
		offGrid = true
		break
	}
	idx := make([]int, len(keep))
	for i := range idx {
		idx[i] = i
	}
	side := sideFromHull(keep, idx)
	if !offGrid {
		return side
	}
	// A crossing within snapRel of a grid point is that grid point: the
	// loss moves by at most snapRel + 2^-51 (exp within 4u) plus the
	// rounding of j*step, about 5e-15 < kinkSlack, which the composition
	// covers.
	for i := range side.kinks {
		k := &side.kinks[i]
		if k.j >= 0 {
			continue
		}
		g := -1
		for i := range js {
			d := new(big.Float).Abs(bquo(bsub(a[i], k.a), k.a))
			if d.Cmp(bigF(snapRel)) <= 0 {
				g = i
			}
		}
		if g >= 0 {
			// Only the loss moves; the masses stay those of the pair.
			k.j = js[g]
			continue
		}
		if pos {
			g = 0
			for i := range js {
				if a[i].Cmp(k.a) <= 0 {
					g = i
				}
			}
		} else {
			g = len(js) - 1
			for i := len(js) - 1; i >= 0; i-- {
				if a[i].Cmp(k.a) >= 0 {
					g = i
				}
			}
		}
		k.j, k.a = js[g], a[g]
	}
	return side
}

// snapRel is the relative distance under which a minorant's zero crossing
// is taken to be the grid point it sits at.
const snapRel = 1e-15

// lowerPLD returns the optimistic PLD of the pair whose profile F+ is
// bracketed by (lPos, uPos) and whose reversed profile F- by (lNeg, uNeg)
// at lattice indices js (js[0] = 0, both 0 at the last index).
func lowerPLD(step float64, js []int64, lPos, uPos, lNeg, uNeg []float64) *pld {
	a := gridA(js, step)
	if len(js) < 2 {
		return newPLD(step, []pldAtom{{0, 1}}, 0)
	}
	// mirror bound: F+(1/a_1) = 1 - 1/a_1 + F-(a_1)/a_1.
	inv := bquo(bigF(1), a[1])
	mirror := func(u1 float64) *big.Float {
		return badd(bsub(bigF(1), inv), bmul(inv, bigF(math.Max(u1, 0))))
	}
	vp := minorantValues(a, lPos, uPos, mirror(uNeg[1]))
	vn := minorantValues(a, lNeg, uNeg, mirror(uPos[1]))
	at1 := vp[0]
	if vn[0].Cmp(at1) < 0 {
		at1 = vn[0]
	}
	if at1.Sign() <= 0 {
		return newPLD(step, []pldAtom{{0, 1}}, 0)
	}
	build := func(t *big.Float) (hullSide, hullSide) {
		return minorantSide(js, a, vp, t, true), minorantSide(js, a, vn, t, false)
	}
	pos, neg := build(at1)
	if zeroMass(pos, neg).Sign() < 0 {
		// Lower the value at 1 (bisection): zeroMass grows as it drops.
		lo, hi := bigF(0), at1
		for range 80 {
			mid := bquo(badd(lo, hi), bigF(2))
			p, n := build(mid)
			if zeroMass(p, n).Sign() >= 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
		if lo.Sign() <= 0 {
			return newPLD(step, []pldAtom{{0, 1}}, 0)
		}
		pos, neg = build(lo)
		if zeroMass(pos, neg).Sign() < 0 {
			return newPLD(step, []pldAtom{{0, 1}}, 0)
		}
	}
	return pairPLD(step, pos, neg)
}
