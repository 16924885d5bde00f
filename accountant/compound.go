package accountant

import (
	"math"
	"slices"
)

// The compound path brackets D(eps) = (1/n) E[(S_n)_+] when a few atoms are
// rare (n times their mass is small) and far out (their values dwarf the
// others'): at a large eps0 the atoms that carry a report's distinguishing
// output have mass about e^-eps0 and values about e^eps0. The lattice has
// to span them with a step fine enough for the common atoms, and fails
// (windows of millions of points, a lower side that stays at 0); the
// sparse path needs a dominant atom, which such sets often lack. Split the
// atoms into the rare ones R (total mass pi) and the common ones C. With M
// ~ Binomial(n, pi) the number of rare draws,
//
//	E[(S_n)_+] = sum_m P(M = m) sum_c P(c | m) F(n - m, t_c),
//	F(k, t) = E[(C_k + t)_+],
//
// where c runs over the multinomial counts of the rare atoms summing to m
// (P(c | m) with the masses w_j / pi), t_c = sum_j c_j z_j, and C_k is the
// sum of k draws from the common atoms with masses w_j / (1 - pi). Each F
// is bracketed on its own:
//
//   - t + k max_C z <= 0: F = 0 (every sum is at most that).
//   - t + k min_C z >= 0: F = t + k E[Z | C] (the sum is never negative).
//   - where a Chernoff bound (leafChernoff) puts F below
//     compoundNegligible, F is in [0, that bound]; where it puts
//     E[(-(C_k + t))_+] below 1e-9 |E[C_k + t]|, F = E[C_k + t] +
//     E[(-(C_k + t))_+] is linear plus at most that bound. Either bound
//     also caps the engine's upper end below.
//   - otherwise F = k D_C'(k), the engine's bracket (sparse path or
//     lattice) for k draws of the common atoms shifted by s = t / k each;
//     (.)_+ is 1-Lipschitz, so the rounding of s and of the shifted values,
//     at most k u (max |z'| + |s|) in all, and that of t widen it by as
//     much. k = 1 is summed directly.
//
// The counts beyond m_max are bounded as the sparse path bounds them:
// (S_n)_+ <= sum of the common draws' (z)_+ plus M max_R (z)_+, so the
// omitted part is at most n E[Z_+ | C] P(M > m_max) + max_R (z)_+ n pi
// P(Binomial(n - 1, pi) >= m_max) (Chernoff), added to the upper side.
//
// Rounding. The masses w_j / (1 - pi) and w_j / pi are computed within
// eta = (a + 4) u relative each (a atoms: the sums, the division); for a
// non-negative function of k draws the expectation under the computed
// masses is then within (1 +- eta)^k of the exact one, which the inner
// bracket's ends pay as e^(+-1.01 k eta') with eta' = 2 (|C| + 1) eta (the
// sparse path takes its dominant mass, at least 1/|C|, as 1 minus the
// others, off by at most eta + |C| u absolute).
// P(M = m) is within sparseRel (Loader's method, as the sparse path);
// each P(c | m), an exp of a sum of r + 2 logs and log-factorials, within
// e^(+-E_c) with E_c = 8 (r + 4) u (log m! + sum log c_j! + sum c_j |log
// w_j/pi| + 1) + m eta. The terms are non-negative and few; their sums'
// rounding (K u for K terms) is paid by a final factor 1 +- 2 K u. A
// leaf's mass below e^-700 is subnormal or 0 in float64, of unbounded
// relative error: the upper side adds its term in logs instead (and an m
// whose P(M = m) is below e^-746 its whole share, P(M = m) times the
// largest sum), the lower side drops it. A pi that rounds to 0 or 1
// declines the path.
//
// Only the lower side's eps search takes this path (setSolver.compound),
// where it replaces lattices that cannot certify anything (hadamard:k=64
// at eps0 = 20, n = 1e5: lo = 0 on every lattice, 11 s per set); upper
// figures never take it.

const (
	// compoundMean bounds n pi: the rare atoms are drawn about that often.
	compoundMean = 1.0
	// compoundRatio is how far the smallest rare |z| must be above the
	// largest common |z|.
	compoundRatio = 8.0
	// compoundMaxInner bounds the inner evaluations of one bracket; beyond
	// it the path declines.
	compoundMaxInner = 256
	// compoundMaxLeaves bounds the leaves (count vectors) of one bracket,
	// most of which need no inner evaluation; beyond it the path
	// declines. r rare atoms have C(m + r - 1, r - 1) count vectors at m
	// draws: a laplace upper set at eps 19 (about 90 rare atoms, m up to
	// 5) has 10^8, which ran for minutes before this bound.
	compoundMaxLeaves = 1 << 16
	// compoundNegligible: a leaf whose Chernoff bound is below it takes
	// [0, bound] without an inner evaluation; every target delta is at
	// least MinDelta, far above.
	compoundNegligible = 1e-10 * MinDelta
)

// compoundSplit returns the indices of p's rare atoms (nil when no split
// qualifies): the largest set of the atoms of largest |z| whose total mass
// is at most compoundMean / n and whose smallest |z| is at least
// compoundRatio times every other atom's.
func compoundSplit(p prepared, n int) []int {
	k := len(p.z)
	if k < 2 {
		return nil
	}
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		ax, ay := math.Abs(p.z[x]), math.Abs(p.z[y])
		switch {
		case ax > ay:
			return -1
		case ax < ay:
			return 1
		}
		return 0
	})
	best := 0
	pi := 0.0
	for r := 1; r < k; r++ {
		pi += p.w[order[r-1]]
		if float64(n)*pi > compoundMean {
			break
		}
		if math.Abs(p.z[order[r-1]]) >= compoundRatio*math.Abs(p.z[order[r]]) {
			best = r
		}
	}
	if best == 0 {
		return nil
	}
	rare := slices.Clone(order[:best])
	slices.Sort(rare)
	return rare
}

// compoundLaw is the common part of a split.
type compoundLaw struct {
	z, w       []float64 // common atoms, masses renormalised
	neg        []float64 // -z
	logw       []float64 // log w
	maxZ, minZ float64
	maxAbs     float64 // max |z|
	mean       float64 // E[Z | C] as computed
	meanErr    float64 // its rounding bound
	plus       float64 // E[Z_+ | C], rounded up
	eta        float64 // relative error of each renormalised mass
}

// compoundEval returns the bracket of the compound path and true, or false
// when no split qualifies or it would take more than compoundMaxInner inner
// evaluations.
func compoundEval(p prepared, n int, hRel float64, wantLo bool) (bracket, bool) {
	rare := compoundSplit(p, n)
	if rare == nil {
		return bracket{}, false
	}
	a := len(p.z)
	eta := float64(a+4) * ulp
	var rz, rw []float64
	var law compoundLaw
	isRare, piSum, cSum := compoundMasses(p, rare)
	for _, j := range rare {
		rz = append(rz, p.z[j])
	}
	if !(cSum > 0) || !(piSum > 0) {
		return bracket{}, false
	}
	for _, j := range rare {
		rw = append(rw, p.w[j]/piSum)
	}
	law.maxZ, law.minZ = math.Inf(-1), math.Inf(1)
	var absMean float64
	for j := range p.z {
		if isRare[j] {
			continue
		}
		w := p.w[j] / cSum
		law.z = append(law.z, p.z[j])
		law.neg = append(law.neg, -p.z[j])
		law.w = append(law.w, w)
		law.logw = append(law.logw, math.Log(w))
		law.maxZ = math.Max(law.maxZ, p.z[j])
		law.minZ = math.Min(law.minZ, p.z[j])
		law.mean += w * p.z[j]
		absMean += w * math.Abs(p.z[j])
		if p.z[j] > 0 {
			law.plus += w * p.z[j]
		}
	}
	law.eta = eta
	law.maxAbs = math.Max(math.Abs(law.maxZ), math.Abs(law.minZ))
	// Each w within eta, each product and the sum within (a + 2) u.
	law.meanErr = 1.01 * (eta + float64(a+2)*ulp) * absMean
	law.plus *= 1 + 1.01*(eta+float64(a+2)*ulp)
	pi := piSum / (piSum + cSum)
	if !(pi > 0 && pi < 1) {
		return bracket{}, false
	}
	nf := float64(n)
	r := len(rz)
	lw := make([]float64, r)
	maxL := 0.0
	for i, w := range rw {
		lw[i] = math.Log(w)
		maxL = math.Max(maxL, math.Abs(lw[i]))
	}
	maxRare := 0.0
	for _, z := range rz {
		maxRare = math.Max(maxRare, z)
	}

	mean := nf * pi
	mMax := compoundFirstM(n, pi)
	var hiSum, loSum float64
	terms := 0
	inner := 0
	leaves := 0
	capped := false
	// Adds every leaf of m in [m0, m1]; false when the inner budget runs out.
	sumRange := func(m0, m1 int) bool {
		lpms := logBinomPMFs(n, pi, m1)
		lf := logFactorials(m1)
		for m := m0; m <= m1; m++ {
			lpm := lpms[m]
			k := n - m
			if math.IsInf(lpm, -1) || math.IsNaN(lpm) {
				return false // pi rounded to 0 (masses far from summing to 1): decline
			}
			if lpm < -746 {
				// Every leaf's computed mass is 0, its exact one is not:
				// bound the m's whole share by P(M = m) times the largest
				// sum, in logs (a reviewer's case, values of 1e170, had
				// it matter; validated sets' values stay below e^60).
				if top := float64(m)*maxRare + float64(k)*math.Max(law.maxZ, 0); top > 0 {
					hiSum += math.Exp(lpm + 1e-9*math.Abs(lpm) + 1e-6 + math.Log(top*(1+8*ulp)))
				}
				continue
			}
			// The m's count vectors number C(m + r - 1, r - 1)
			// (termsUpTo, exact at these sizes): where they would take
			// the leaves past the bound, the recursion below would stop
			// there; decline without visiting them.
			if termsUpTo(r, m, m, float64(leaves), compoundMaxLeaves) > compoundMaxLeaves {
				return false
			}
			counts := make([]int, r)
			var rec func(i, left int) bool
			rec = func(i, left int) bool {
				if i == r-1 {
					if leaves++; leaves > compoundMaxLeaves {
						return false
					}
					counts[i] = left
					f, ok := compoundLeaf(&law, rz, counts, k, hRel, wantLo, &inner, &capped)
					if !ok {
						return false
					}
					if f.hi == 0 {
						return true
					}
					// log P(c | m) and its bound.
					lp := lf[m]
					mag := lf[m] + 1
					for j, c := range counts {
						if c > 0 {
							lp += float64(c)*lw[j] - lf[c]
							mag += lf[c] + float64(c)*math.Abs(lw[j])
						}
					}
					e := 8*float64(r+4)*ulp*(mag+math.Abs(lpm)) + float64(m)*eta +
						float64(m+1)*float64(a+3)*ulp*(1+mean) // pi's rounding in P(M = m)
					v := math.Exp(lpm + lp)
					if lpm+lp < -700 {
						// v is subnormal or 0, its relative error
						// unbounded: the upper side takes the term in
						// logs (a reviewer's cases, values of 1e100), the
						// lower side may drop it.
						if f.hi > 0 {
							hiSum += math.Exp(lpm + lp + math.Log(f.hi) + 1.01*e + 2*sparseRel + 1e-9)
						}
						terms++
						return true
					}
					hiSum += v * f.hi * (1 + sparseRel) * math.Exp(1.01*e) * (1 + 4*ulp)
					if f.lo > 0 {
						loSum += v * f.lo * (1 - sparseRel) * math.Exp(-1.01*e) * (1 - 4*ulp)
					}
					terms++
					return true
				}
				for c := 0; c <= left; c++ {
					counts[i] = c
					if !rec(i+1, left-c) {
						return false
					}
				}
				return true
			}
			if !rec(0, m) {
				return false
			}
		}
		return true
	}
	tailAt := func(m int) float64 {
		if m >= n {
			return 0
		}
		return 1.01 * (nf*law.plus*math.Exp(binomTailLog(n, pi, m+1)) +
			maxRare*nf*pi*math.Exp(binomTailLog(n-1, pi, m)))
	}
	if !sumRange(0, mMax) {
		return bracket{}, false
	}
	for mMax < n && tailAt(mMax) > 1e-3*sparseRel*hiSum && tailAt(mMax) > 1e-6*MinDelta*nf {
		next := min(n, mMax+1+mMax/4)
		if !sumRange(mMax+1, next) {
			return bracket{}, false
		}
		mMax = next
	}
	fin := 2 * float64(terms+2) * ulp
	hi := math.Max((hiSum*(1+fin)+tailAt(mMax))/nf, DeltaFloor)
	lo := loSum * (1 - fin) / nf
	return bracket{lo: lo, hi: hi, capped: capped}, true
}

// compoundLeaf returns the bracket of F(k, t) = E[(C_k + t)_+] for the
// leaf of rare counts c (t = sum c_j z_j), counting its inner evaluations;
// false when they exceed compoundMaxInner.
func compoundLeaf(law *compoundLaw, rz []float64, c []int, k int, hRel float64, wantLo bool, inner *int, capped *bool) (bracket, bool) {
	var t, tAbs float64
	for j, cj := range c {
		t += float64(cj) * rz[j]
		tAbs += float64(cj) * math.Abs(rz[j])
	}
	errT := float64(2*len(c)+2) * ulp * tAbs
	kf := float64(k)
	if k == 0 {
		v := math.Max(t, 0)
		return bracket{lo: math.Max(v-errT, 0), hi: v + errT}, true
	}
	// The extreme sums t + k max and t + k min, with their rounding.
	errX := errT + 4*ulp*(math.Abs(t)+kf*law.maxAbs)
	if t+kf*law.maxZ+errX <= 0 {
		return bracket{}, true
	}
	// linear is F where C_k + t is never (or almost never, by at most
	// extra) negative: t + k E[Z | C] with its rounding.
	linear := func(extra float64) bracket {
		v := t + kf*law.mean
		e := errT + kf*law.meanErr + 4*ulp*(math.Abs(t)+kf*math.Abs(law.mean))
		return bracket{lo: math.Max(v-e, 0), hi: v + e + extra}
	}
	if t+kf*law.minZ-errX >= 0 {
		return linear(0), true
	}
	grow := math.Exp(1.01 * kf * 2 * float64(len(law.z)+1) * law.eta)
	if k == 1 {
		var v, mag float64
		for j, z := range law.z {
			x := z + t
			v += law.w[j] * math.Max(x, 0)
			mag += law.w[j] * (math.Abs(z) + math.Abs(t))
		}
		e := errT + float64(2*len(law.z)+4)*ulp*mag
		return bracket{lo: math.Max(v-e, 0) / grow, hi: (v + e) * grow}, true
	}
	// Chernoff first: a leaf whose sum is almost surely on one side of 0
	// costs no inner evaluation (and the inner lattice, whose window must
	// reach from 0 to the sum's mean thousands of deviations away, is
	// capped and loose there). Below 0, F <= cb; above, F = E[X] +
	// E[(-X)_+] with the second term at most cbNeg.
	// The exact t is within errT of the computed one (a reviewer's case:
	// opposite rare draws that cancel to 0 in floating point and to 2^-9
	// exactly); F is non-decreasing in t and E[(-(C_k + t))_+]
	// non-increasing, so each bound is taken at the end of that interval
	// where it is largest.
	cb := leafChernoff(law.z, law.logw, law.maxAbs, law.eta, t+errT, k)
	if cb <= compoundNegligible {
		return bracket{hi: cb}, true
	}
	if cbNeg := leafChernoff(law.neg, law.logw, law.maxAbs, law.eta, -t+errT, k); cbNeg <= 1e-9*math.Abs(t+kf*law.mean) {
		return linear(cbNeg), true
	}
	*inner++
	if *inner > compoundMaxInner {
		return bracket{}, false
	}
	s := t / kf
	q := prepared{z: make([]float64, len(law.z)), w: law.w, maxZ: math.Inf(-1)}
	maxAbs := 0.0
	for j, z := range law.z {
		q.z[j] = z + s
		q.maxZ = math.Max(q.maxZ, q.z[j])
		maxAbs = math.Max(maxAbs, math.Abs(q.z[j]))
		if q.z[j] > 0 {
			q.exactOne += law.w[j] * q.z[j]
		}
	}
	shift := errT + 1.01*kf*ulp*(maxAbs+math.Abs(s))
	var b bracket
	if q.maxZ > 0 {
		var ok bool
		if b, ok = sparseExact(q, k); !ok {
			b = latticeEval(q, k, hRel, wantLo)
		}
	}
	*capped = *capped || b.capped
	return bracket{
		lo: math.Max(kf*b.lo/grow-shift, 0),
		hi: math.Min(kf*b.hi*grow+shift, cb),
	}, true
}

// leafChernoff returns an upper bound on E[(C_k + t)_+] for C_k the sum of
// k draws of the atoms (values z, log masses logw, maxAbs = max |z|),
// masses within eta of exact (+Inf when the mean of C_k + t is not
// negative): x_+ <= e^(theta x - 1)/theta for every
// x and theta > 0, so the value is at most exp(theta t + k log M(theta) -
// 1 - log theta), M the moment generating function (log M within 2 eta of
// the exact masses' one), taken at theta centring C_k + t (the bound's
// minimiser up to the log theta term) and twice and half that. Its
// exponent's rounding is covered by 16 (a + 4) u times the magnitudes
// summed in it. With z negated and -t it bounds E[(-(C_k + t))_+].
func leafChernoff(z, logw []float64, maxAbs, eta, t float64, k int) float64 {
	kf := float64(k)
	mean := func(th float64) float64 { _, k1, _ := cumulants(logw, z, th); return t/kf + k1 }
	if !(mean(0) < 0) {
		return math.Inf(1)
	}
	theta := centringTilt(mean, 1/math.Max(maxAbs, 1e-300))
	best := math.Inf(1)
	for _, th := range []float64{theta, 2 * theta, theta / 2} {
		if !(th > 0) || math.IsInf(th, 0) {
			continue
		}
		k0, _, _ := cumulants(logw, z, th)
		b := th*t + kf*k0 - 1 - math.Log(th)
		margin := 16*float64(len(z)+4)*ulp*(math.Abs(th*t)+kf*(math.Abs(k0)+th*maxAbs+1)+math.Abs(math.Log(th))+1) +
			kf*2*eta
		if v := math.Exp(b + margin); v < best {
			best = v
		}
	}
	return best
}

// evaluateCompound is evaluate for the lower side's eps search: the sparse
// path, else the compound path, else the lattice; memoised apart from
// evaluate (its key is one byte longer).
func evaluateCompound(s AtomSet, n int, eps, hRel float64, wantLo bool) bracket {
	key := append(memoKey(s, n, eps, hRel, wantLo), 'c')
	return memo.do(key, func() bracket { return computePaths(s, n, eps, hRel, wantLo, true) })
}

// compoundLower returns the compound path's lower end of D(eps) for set s,
// or 0 where the path does not apply. The upper side's eps search uses it
// to steer: where it exceeds delta, so do D and every valid upper end, and
// the search need not compute the lattice's (far from the root, at a large
// eps0, that is the costly evaluation: krr:k=1000 at eps0 = 20, n = 1e8,
// 0.8 s at eps 10 for an upper end of 1.5).
func compoundLower(s AtomSet, n int, eps, hRel float64) float64 {
	key := append(memoKey(s, n, eps, hRel, true), 'l')
	return memo.do(key, func() bracket {
		p := prepare(s, eps)
		if p.maxZ <= 0 || n == 1 || !compoundFew(p, n) {
			return bracket{}
		}
		b, ok := compoundEval(p, n, hRel, true)
		if !ok {
			return bracket{}
		}
		return bracket{lo: b.lo}
	}).lo
}

// compoundMasses returns which of p's atoms are rare and the total masses
// of the rare atoms (in the order of rare) and of the common ones (in
// index order): compoundEval's pi is piSum / (piSum + cSum), and
// compoundFew takes the same bits.
func compoundMasses(p prepared, rare []int) (isRare []bool, piSum, cSum float64) {
	isRare = make([]bool, len(p.w))
	for _, j := range rare {
		isRare[j] = true
		piSum += p.w[j]
	}
	for j, w := range p.w {
		if !isRare[j] {
			cSum += w
		}
	}
	return isRare, piSum, cSum
}

// compoundFirstM is compoundEval's first m_max for rare mass pi: n pi
// plus two standard deviations and two, at most n.
func compoundFirstM(n int, pi float64) int {
	mean := float64(n) * pi
	return int(math.Min(float64(n), math.Ceil(mean+2*math.Sqrt(mean)+2)))
}

// compoundFew reports whether p has a compound split whose count vectors
// up to compoundEval's first m_max number at most compoundMaxLeaves
// (termsUpTo: sum_{m <= M} C(m + r - 1, r - 1)). Steering (compoundLower)
// asks it first, so that a set the path would decline after thousands of
// leaves (a laplace upper set: r about 90, C(95, 90) = 5e7) costs nothing.
func compoundFew(p prepared, n int) bool {
	rare := compoundSplit(p, n)
	if rare == nil {
		return false
	}
	_, piSum, cSum := compoundMasses(p, rare)
	m := compoundFirstM(n, piSum/(piSum+cSum))
	return termsUpTo(len(rare), 0, m, 0, compoundMaxLeaves) <= compoundMaxLeaves
}
