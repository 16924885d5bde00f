package accountant

// The PLDs of privacy over time (pld.go, convolve.go, profile.go,
// rounds.go), built and composed, against the oracles of
// horizon_oracle_test.go: adversarial tests a second engineer wrote in a
// review. TestUpperPLDRepairKeepsMass and
// TestAllocatePlanOneRoundLinearSplit are regression tests of bugs the
// review reported (they failed on the code as reviewed and pass with the
// fixes).
// The others are cheap checks kept for coverage the existing tests lack
// (asymmetric and multi-pair declarations, heterogeneous parts, synthetic
// profiles with loose brackets, T = 1000).

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

// --- helpers -----------------------------------------------------------------

// reviewMatrix returns a random k x m row-stochastic matrix with entries in
// a ratio of at most e^spread (so an eps0 <= 2 spread LDP randomizer), not
// input-symmetric.
func reviewMatrix(rng *rand.Rand, k, m int, spread float64) [][]float64 {
	rows := make([][]float64, k)
	for x := range rows {
		rows[x] = make([]float64, m)
		var s float64
		for y := range rows[x] {
			rows[x][y] = math.Exp(spread * rng.Float64())
			s += rows[x][y]
		}
		for y := range rows[x] {
			rows[x][y] /= s
		}
	}
	return rows
}

// reviewMatrixMech declares rows as a matrix at their own local eps.
func reviewMatrixMech(t *testing.T, rows [][]float64) (Mechanism, *Decomposition) {
	t.Helper()
	m, err := NewMatrix(rows)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decomposeMatrix(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	return DeclaredMech{Decl: &Declaration{Eps0: d.LocalEps, Form: FormMatrix, Matrix: m}}, d
}

// reviewAtomsMech declares the first pairs and triples of a matrix's
// decomposition in the atoms form (several asymmetric pairs).
func reviewAtomsMech(t *testing.T, d *Decomposition, pairs, triples int) Mechanism {
	t.Helper()
	decl := &Declaration{Eps0: d.LocalEps, Form: FormAtoms}
	for i := 0; i < min(pairs, len(d.Upper)); i++ {
		decl.Pairs = append(decl.Pairs, DeclaredSet{Atoms: d.Upper[i]})
	}
	for i := 0; i < min(triples, len(d.Lower)); i++ {
		decl.Triples = append(decl.Triples, DeclaredSet{Atoms: d.Lower[i]})
	}
	if _, err := Decompose(decl); err != nil {
		t.Fatal(err)
	}
	return DeclaredMech{Decl: decl}
}

// reviewChosenLower returns the index into s.lows of the lower-bound triple
// build uses (largest lower bracket on the total variation; the evaluations
// are memoised, so this reads the same brackets).
func reviewChosenLower(s *partSampler) int {
	best, bestTV := -1, -1.0
	for i := range s.lows {
		if b := s.evalPoint(s.lows[i], 0, 0, 0); b.lo > bestTV {
			best, bestTV = i, b.lo
		}
	}
	return best
}

// reviewCheckTiny checks a composition of tiny-n parts against the exact
// oracles: the upper bound is above the exact composition of every
// candidate blanket pair (the same candidate in all rounds of a part, or
// alternating with the next one, e.g. a pair and its swap), and the lower
// bound is below the exact composition of the lower-bound datasets it uses.
func reviewCheckTiny(t *testing.T, name string, c *Composition, delta float64, epsList []float64) {
	t.Helper()
	h := c.plds(delta, 0)
	var cands [][][]oracleAtom
	var low [][]oracleAtom
	for _, s := range c.samplers {
		var cs [][]oracleAtom
		for _, u := range s.ups {
			cs = append(cs, oracleBlanketPLD(s.sets[u], s.n))
		}
		cands = append(cands, cs)
		if h.hasLower {
			low = append(low, oracleBlanketPLD(s.sets[s.lows[reviewChosenLower(s)]], s.n))
		}
	}
	for _, eps := range epsList {
		u := composedDelta(h.upper, eps, true)
		best := 0.0
		for alt := range 2 {
			for ci := range 4 {
				var plds [][]oracleAtom
				for pi, p := range c.parts {
					for r := range p.Rounds {
						plds = append(plds, cands[pi][(ci+alt*r)%len(cands[pi])])
					}
				}
				best = math.Max(best, oracleComposedDeltaPLD(plds, eps))
			}
		}
		if u < best*(1-soundSlack)-soundAbs {
			t.Errorf("%s eps=%g: upper %.10g < exact composition of candidate pairs %.10g", name, eps, u, best)
		}
		if h.hasLower {
			var plds [][]oracleAtom
			for pi, p := range c.parts {
				for range p.Rounds {
					plds = append(plds, low[pi])
				}
			}
			ex := oracleComposedDeltaPLD(plds, eps)
			if l := composedDelta(h.lower, eps, false); l > ex*(1+soundSlack)+soundAbs {
				t.Errorf("%s eps=%g: lower %.10g > exact composed lower-bound datasets %.10g", name, eps, l, ex)
			}
		}
	}
}

// reviewRandPair returns a random pair on m outcomes (some of tiny mass,
// some at the largest loss or at loss 0); with sym it is made symmetric by
// taking the even mixture of (P, Q) and (Q, P) on disjoint outcomes.
func reviewRandPair(rng *rand.Rand, m int, E float64, sym bool) (P, Q []float64) {
	P, Q = make([]float64, m), make([]float64, m)
	var sp, sq float64
	for i := range m {
		w := math.Exp(3 * rng.Float64())
		if rng.IntN(4) == 0 {
			w *= 1e-3
		}
		l := E * (2*rng.Float64() - 1)
		switch rng.IntN(5) {
		case 0:
			l = E
		case 1:
			l = 0
		}
		P[i], Q[i] = w*math.Exp(l/2), w*math.Exp(-l/2)
		sp, sq = sp+P[i], sq+Q[i]
	}
	for i := range m {
		P[i], Q[i] = P[i]/sp, Q[i]/sq
	}
	if !sym {
		return P, Q
	}
	P2, Q2 := append(append([]float64{}, P...), Q...), append(append([]float64{}, Q...), P...)
	for i := range P2 {
		P2[i], Q2[i] = P2[i]/2, Q2[i]/2
	}
	return P2, Q2
}

// reviewH is H_a(P||Q) = sum (P - a Q)_+.
func reviewH(P, Q []float64, a float64) float64 {
	var s float64
	for i := range P {
		s += math.Max(0, P[i]-a*Q[i])
	}
	return s
}

func reviewPairMap(P, Q []float64) [2]map[string]float64 {
	mp, mq := map[string]float64{}, map[string]float64{}
	for i := range P {
		k := strconv.Itoa(i)
		mp[k], mq[k] = P[i], Q[i]
	}
	return [2]map[string]float64{mp, mq}
}

func reviewComposedPair(P, Q []float64, T int, eps float64) float64 {
	pairs := make([][2]map[string]float64, T)
	for i := range pairs {
		pairs[i] = reviewPairMap(P, Q)
	}
	return oracleComposedDelta(pairs, eps)
}

// reviewProfile samples H_a(P||Q) at a = e^{j step} for js, with the last
// point (past the largest loss) at 0, bracketed by [f(1-rl*U), f(1+ru*U)].
func reviewProfile(rng *rand.Rand, P, Q []float64, js []int64, step, rl, ru float64) (l, u []float64) {
	for i, j := range js {
		f := reviewH(P, Q, math.Exp(float64(j)*step))
		if i == len(js)-1 {
			f = 0
		}
		l = append(l, f*(1-rl*rng.Float64()))
		u = append(u, math.Min(1, f*(1+ru*rng.Float64())+1e-15))
	}
	return l, u
}

// --- regression tests of reported bugs ------------------------------------------

// TestComposedDeltaNoUnderflow: finiteDelta untilts every lattice point
// with exp(-theta s) and rescales by e^{K(theta)} at the end; when theta s
// exceeds ~745 the factor underflows to 0 and the main sum (and the tail
// term exp(kz + tail - k0)) vanish, so the "upper bound" is 0 while the
// exact value is 2.4e-74 (within [MinDelta, 1]). Exact lattice PLD of
// binary randomized response (loss +-1 on step 1/16), T = 1000, eps = 900.
// Fix: untilt relative to eps, u = exp(-theta (s - eps)) (1 - e^{eps-s}),
// in the unit e^{K(theta) - theta eps} (k0 -= theta*eps before the tail
// terms and scaleUp).
func TestComposedDeltaNoUnderflow(t *testing.T) {
	p := math.E / (math.E + 1)
	d := newPLD(1.0/16, []pldAtom{{16, p}, {-16, 1 - p}}, 0)
	parts := []pldPart{{d, 1000}}
	for _, eps := range []float64{700, 800, 900, 950} {
		ex := oracleRRComposedDelta(1, 2, 1000, eps)
		if u := composedDelta(parts, eps, true); u < ex*(1-soundSlack) {
			t.Errorf("eps=%g: upper %.6g < exact %.6g", eps, u, ex)
		}
	}
}

// TestHorizonEpsilonNoUnderflow: the same underflow through the public API.
// Three-ary randomized response without shuffling (n = 1), eps0 = 1, over
// T = 1000 rounds at delta = 1e-80: the exact eps (closed form) is 798.17
// but Epsilon reported Upper = 786.87 with Tight = true (the exact delta
// there is 5.9e-76); Delta(790) reported 0.
func TestHorizonEpsilonNoUnderflow(t *testing.T) {
	const eps0, k, T, delta = 1.0, 3, 1000, 1e-80
	c := mustCompose(t, Part{Mech: KRR(k), Eps0: eps0, N: 1, Rounds: T})
	r, err := c.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if ex := oracleRRComposedDelta(eps0, k, T, r.Upper); ex > delta*(1+soundSlack) {
		t.Errorf("Upper = %g but the exact delta there is %g > %g (%+v)", r.Upper, ex, delta, r)
	}
	d, err := c.Delta(790)
	if err != nil {
		t.Fatal(err)
	}
	if ex := oracleRRComposedDelta(eps0, k, T, 790); d.Upper < ex*(1-soundSlack) {
		t.Errorf("Delta(790).Upper = %g < exact %g", d.Upper, ex)
	}
}

// TestMinorantLastIntervalBelowProfile: minorantValues lowers both ends of an
// interval's chord by that interval's excess, except at the last index,
// where it forces v[m] = 0. On the last interval the chord is then lowered
// only at its left end and stays above F where F reaches 0 inside the
// interval, which is the shape of every part whose local eps is not a
// lattice point (the last evaluated point is below it, jmax above). The
// cut drops the positive-side atom at jmax, but on the reversed side the
// excess stays: the optimistic PLD of this asymmetric pair (exact brackets,
// contiguous grid, production cut) is above the exact pair at T = 1 for
// eps < 0 and, composed, at T = 3, eps = 0.316 (0.1520 > 0.1497).
// Fix: drop `v[m] = bigF(0)` (keep v[m] = -excess[m-1]; minorantSide
// already handles a hull that crosses 0 before the last point).
func TestMinorantLastIntervalBelowProfile(t *testing.T) {
	P := []float64{0.3560523013798083, 0.6439476986201916}
	Q := []float64{0.5594903020806093, 0.4405096979193907}
	step := 0.1254213023161495 // largest loss 0.4513 = 3.6 steps: jmax = 4
	js := []int64{0, 1, 2, 3, 4}
	rng := rand.New(rand.NewPCG(1, 1))
	lp, up := reviewProfile(rng, P, Q, js, step, 0, 0)
	ln, un := reviewProfile(rng, Q, P, js, step, 0, 0)
	// The contract of minorantValues: the interpolation lies below F.
	a := gridA(js, step)
	v := minorantValues(a, lp, up, badd(bsub(bigF(1), bquo(bigF(1), a[1])), bmul(bquo(bigF(1), a[1]), bigF(un[1]))))
	for i := 0; i+1 < len(js); i++ {
		for s := 0; s <= 50; s++ {
			x := bf64(a[i]) + (bf64(a[i+1])-bf64(a[i]))*float64(s)/50
			w := float64(s) / 50
			interp := (1-w)*bf64(v[i]) + w*bf64(v[i+1])
			if f := reviewH(P, Q, x); interp > f+1e-12 {
				t.Errorf("minorant at a=%.6g: %.6g > F = %.6g", x, interp, f)
				break
			}
		}
	}
	d := lowerPLD(step, js, lp, up, ln, un).cutLower(js[len(js)-2])
	for _, T := range []int{1, 2, 3} {
		for _, eps := range []float64{-0.45, 0, 0.1, 0.3163639922541322, 0.5} {
			if eps < 0 && T > 1 {
				continue
			}
			ex := reviewComposedPair(P, Q, T, eps)
			if l := composedDelta([]pldPart{{d, T}}, eps, false); l > ex*(1+soundSlack)+soundAbs {
				t.Errorf("T=%d eps=%g: optimistic PLD %.10g > exact %.10g", T, eps, l, ex)
			}
		}
	}
}

// TestLowerPLDFuzz: lowerPLD (then cutLower, as build does) on random
// asymmetric pairs, exact or loose brackets, production-shaped grids (every
// lattice point below the largest loss, which is off the lattice, then
// jmax): the composed optimistic PLD must stay below the exact composed
// pair. Its 4000 trials in make audit (TestLowerPLDFuzzDeep) fail on the
// code as reviewed (the last-interval bug above; the first 1000 trials
// pass there, so the smoke run of 250 here is not what catches it, and
// TestMinorantLastIntervalBelowProfile is); it passes over 20000 trials
// with the fix.
func TestLowerPLDFuzz(t *testing.T) {
	reviewPLDFuzz(t, 250, false, true) // 4000 in make audit (TestLowerPLDFuzzDeep)
}

// TestUpperPLDRepairKeepsMass: upperPLD's repair of a negative zero atom
// raises the points to the line through (1, u_0) of slope -(1 - u_0)/2, and
// the comment claims the last point (a_m, 0) is then no steeper. That holds
// only when the line reaches 0 before a_m, i.e. u_0 <= (a_m-1)/(a_m+1),
// the largest total variation of a pair with losses in [-log a_m, log a_m].
// With a looser u_0 (here 1) the hull still drops to (a_m, 0) too steeply,
// P_0 stays negative and is dropped: the "PLD" has total P-mass 1.96. It
// happens to stay conservative here, but it is not a pair and the file's
// argument does not cover it. Not reached by the engine's brackets in the
// cases tried (TestSamplerUpperPLDMass). Fix: clamp every point to
// the profile of randomized response at the largest loss, u_i <=
// (a_m - a_i)/(a_m + 1), which bounds every such pair and whose line from
// (1, u_0) has exactly the repair slope.
func TestUpperPLDRepairKeepsMass(t *testing.T) {
	le, step := 1.0, 1.0/8
	js := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	var u []float64
	for _, j := range js {
		a := math.Exp(float64(j) * step)
		u = append(u, math.Max(0, (math.Exp(le)-a)/(math.Exp(le)+1)))
	}
	u[0] = 1
	d := upperPLD(step, js, u)
	tot := d.inf
	for _, m := range d.mass {
		tot += m
	}
	if tot > 1+1e-12 {
		t.Errorf("upper PLD total P-mass %.6g > 1 (zero atom negative after the repair)", tot)
	}
}

// TestAllocatePlanOneRoundLinearSplit: docs/time.md §4 requires the
// allocation to give every metric at least the eps0 of the linear split,
// and AllocatePlan documents "with one round s >= 1". But when the PLD
// bound at s = 1 (refine 0, pessimistic grid) misses the target while the
// linear split itself meets it (single-report engine), g(1) > 0 sends
// allocateSeparate into the "shrink" branch and s < 1: one k-RR (k = 2)
// metric at (1, 1e-6), n_min = 1e4, gets eps0 = 5.46873 < 5.46983, the
// linear split (common factor 0.9998). Privacy is not at stake (the plan's
// guarantee is certified), the documented rule is. Fix: with rounds == 1
// never shrink below s = 1 (the linear split is proven by basic
// composition); only grow from it.
func TestAllocatePlanOneRoundLinearSplit(t *testing.T) {
	m := KRR(2)
	r, err := AllocatePlan(PlanSpec{Eps: 1, Delta: 1e-6, NMin: 10_000, Metrics: []PlanMetric{{Name: "a", Mech: m}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Calibrate(m, Target{Eps: 1, Delta: 1e-6, N: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Metrics[0].Eps0 < c.Eps0 {
		t.Errorf("one-round plan eps0 %.6g < linear split %.6g (%s)", r.Metrics[0].Eps0, c.Eps0, r.Rule)
	}
}

// --- cheap checks kept ------------------------------------------------------------

// reviewPLDFuzz runs trials of upperPLD (symmetric pairs) and/or lowerPLD
// (any pair) on synthetic profiles against the exact composed pair.
func reviewPLDFuzz(t *testing.T, trials int, doUpper, doLower bool) {
	rng := rand.New(rand.NewPCG(7, 8))
	bad := 0
	for trial := 0; trial < trials && bad < 10; trial++ {
		sym := doUpper && (!doLower || rng.IntN(2) == 0)
		P, Q := reviewRandPair(rng, 1+rng.IntN(5), 0.05+4*rng.Float64(), sym)
		var le float64
		for i := range P {
			le = math.Max(le, math.Abs(math.Log(P[i]/Q[i])))
		}
		if le < 1e-6 {
			continue
		}
		step := le / (float64(2+rng.IntN(30)) + rng.Float64())
		jmax := int64(math.Ceil(le / step))
		// Every lattice point below the largest loss (as build samples the
		// finest part), or a random subset of them (any grid is valid).
		js := []int64{0}
		all := rng.IntN(2) == 0
		for j := int64(1); j < jmax; j++ {
			if all || rng.IntN(3) != 0 {
				js = append(js, j)
			}
		}
		js = append(js, jmax)
		rl, ru := 0.0, 0.0
		if rng.IntN(2) == 0 {
			rl, ru = 0.3*rng.Float64(), 0.3*rng.Float64()
		}
		lp, up := reviewProfile(rng, P, Q, js, step, rl, ru)
		ln, un := reviewProfile(rng, Q, P, js, step, rl, ru)
		cut := js[len(js)-2]
		var upper, lower *pld
		if sym && doUpper {
			upper = upperPLD(step, js, up).cutUpper(cut)
		}
		if doLower {
			lower = lowerPLD(step, js, lp, up, ln, un).cutLower(cut)
		}
		for _, T := range []int{1, 2, 3} {
			for _, eps := range []float64{-0.5 * le, -0.1, 0, 0.01, 0.3 * le, 0.7 * le, le, 1.5 * le, 0.9 * float64(T) * le} {
				if eps < 0 && T > 1 {
					continue // T = 1 at eps < 0 is the reversed side alone
				}
				ex := reviewComposedPair(P, Q, T, eps)
				if upper != nil {
					if u := composedDelta([]pldPart{{upper, T}}, eps, true); u < ex*(1-soundSlack)-1e-14 {
						bad++
						t.Errorf("trial %d upper T=%d eps=%g: %.12g < exact %.12g (P=%v Q=%v step=%g)", trial, T, eps, u, ex, P, Q, step)
					}
				}
				if lower != nil {
					if l := composedDelta([]pldPart{{lower, T}}, eps, false); l > ex*(1+soundSlack)+1e-14 {
						bad++
						t.Errorf("trial %d lower T=%d eps=%g: %.12g > exact %.12g (P=%v Q=%v step=%g rl=%g)", trial, T, eps, l, ex, P, Q, step, rl)
					}
				}
			}
		}
	}
}

// TestUpperPLDFuzz: upperPLD (then cutUpper) on random symmetric
// pairs with exact or loose (up to 30%) upper brackets, production-shaped
// grids, composed T = 1..3: never below the exact composed pair.
func TestUpperPLDFuzz(t *testing.T) {
	reviewPLDFuzz(t, 1500, true, false)
}

// TestHorizonTinyAsymmetric: random non-symmetric matrices (2-4 inputs, 2-4
// outputs, eps0 up to 7), the same matrices declared in the atoms form with
// several pairs, and heterogeneous compositions of them, at n = 1..4 and
// T = 1..3, against exact enumeration of the candidate blanket pairs and of
// the lower-bound datasets. Four trials here;
// TestHorizonTinyAsymmetricDeep (make audit) runs sixteen more.
func TestHorizonTinyAsymmetric(t *testing.T) { horizonTinyAsymmetric(t, 3, 4) }

// horizonTinyAsymmetric runs TestHorizonTinyAsymmetric's check on trials
// random compositions drawn from seed.
func horizonTinyAsymmetric(t *testing.T, seed uint64, trials int) {
	rng := rand.New(rand.NewPCG(seed, 4))
	for trial := range trials {
		var parts []Part
		var total float64
		for range 1 + rng.IntN(2) {
			rows := reviewMatrix(rng, 2+rng.IntN(3), 2+rng.IntN(3), 0.5+3*rng.Float64())
			mech, d := reviewMatrixMech(t, rows)
			if rng.IntN(2) == 0 {
				mech = reviewAtomsMech(t, d, 3, 2)
			}
			parts = append(parts, Part{Mech: mech, N: 1 + rng.IntN(4), Rounds: 1 + rng.IntN(2)})
			total += d.LocalEps * float64(parts[len(parts)-1].Rounds)
		}
		c := mustCompose(t, parts...)
		eps := []float64{0, 0.01, 0.1, 0.3 * total, 0.6 * total, 0.9 * total, 0.99 * total}
		for _, delta := range []float64{1e-2, 1e-12} {
			reviewCheckTiny(t, fmt.Sprintf("trial %d delta %g", trial, delta), c, delta, eps)
		}
	}
}

// TestHorizonRRClosedFormLong: without shuffling, T = 1000 rounds of k-RR
// against the closed form, over the whole range of eps where the exact
// delta is above 1e-60 (the underflow of TestComposedDeltaNoUnderflow
// starts beyond it for these budgets).
func TestHorizonRRClosedFormLong(t *testing.T) {
	for _, cs := range []struct {
		k    int
		eps0 float64
	}{{2, 0.3}, {10, 5}, {3, 29.9}} {
		c := mustCompose(t, Part{Mech: KRR(cs.k), Eps0: cs.eps0, N: 1, Rounds: 1000})
		h := c.plds(1e-30, 0)
		for _, f := range []float64{0, 1e-9, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99} {
			eps := f * 1000 * cs.eps0
			ex := oracleRRComposedDelta(cs.eps0, cs.k, 1000, eps)
			if ex < 1e-60 {
				continue
			}
			u, l := composedDelta(h.upper, eps, true), composedDelta(h.lower, eps, false)
			if u < ex*(1-soundSlack)-soundAbs || l > ex*(1+soundSlack)+soundAbs {
				t.Errorf("k=%d eps0=%g eps=%g: exact %.10g not in [%.10g, %.10g]", cs.k, cs.eps0, eps, ex, l, u)
			}
		}
	}
}

// TestHorizonSingleRoundExtremes: at T = 1 the PLD path against the engine's
// brackets at extreme budgets and batch sizes (k-RR at eps0 near MaxEps0,
// n = 2; the generic clone at eps0 = 10, n = 1e5), floors down to 1e-30:
// the pessimistic PLD is above the engine's lower bracket of the exact
// candidate value, the optimistic one below the upper bracket of the
// lower-bound datasets.
func TestHorizonSingleRoundExtremes(t *testing.T) {
	for _, p := range []Part{
		{Mech: KRR(2), Eps0: 29.9, N: 2},
		{Mech: Generic(), Eps0: 10, N: 100_000},
		{Mech: KRR(50), Eps0: 2, N: 3},
	} {
		c := mustCompose(t, p)
		s := c.samplers[0]
		for _, delta := range []float64{1e-3, 1e-30} {
			h := c.plds(delta, 0)
			lb := -1
			if h.hasLower {
				lb = reviewChosenLower(s)
			}
			for _, f := range []float64{0, 0.01, 0.3, 0.9, 0.999} {
				eps := f * p.Eps0
				var exLo float64
				for _, u := range s.ups {
					b, _ := deltaBracket(s.sets[u], s.n, eps)
					exLo = math.Max(exLo, b.lo)
				}
				if u := composedDelta(h.upper, eps, true); u < exLo*(1-soundSlack) {
					t.Errorf("%s n=%d eps=%g: PLD upper %.10g < engine lower bracket %.10g", p.Mech, p.N, eps, u, exLo)
				}
				if lb >= 0 {
					b, _ := deltaBracket(s.sets[s.lows[lb]], s.n, eps)
					if l := composedDelta(h.lower, eps, false); l > b.hi*(1+soundSlack) {
						t.Errorf("%s n=%d eps=%g: PLD lower %.10g > engine upper bracket %.10g", p.Mech, p.N, eps, l, b.hi)
					}
				}
			}
		}
	}
}

// TestSamplerUpperPLDMass: the pessimistic PLDs the sampler builds
// are sub-probabilities (total P-mass, +inf included, at most 1) at small
// n and large eps0, where the engine's total-variation bracket is closest
// to the largest possible one (see TestUpperPLDRepairKeepsMass).
func TestSamplerUpperPLDMass(t *testing.T) {
	for _, m := range []Mechanism{KRR(2), Generic()} {
		for _, e0 := range []float64{0.01, 5, 20, 29.9} {
			for _, n := range []int{1, 2, 5} {
				c := mustCompose(t, Part{Mech: m, Eps0: e0, N: n, Rounds: 2})
				d := c.plds(1e-6, 0).upper[0].d
				tot := d.inf
				for _, x := range d.mass {
					tot += x
				}
				if tot > 1+1e-12 {
					t.Errorf("%s eps0=%g n=%d: upper PLD total P-mass %.15g", m, e0, n, tot)
				}
			}
		}
	}
}

// keep math/big imported for the minorant test's arithmetic helpers.
var _ = big.NewFloat
