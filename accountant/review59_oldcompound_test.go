package accountant

// A verbatim copy of compoundEval as of 009ddb7 (the parent of 2aba623),
// before the per-m leaf-count pre-check: review59_leafcheck_test.go checks
// that the committed compoundEval returns the same bits.

import "math"

func r59OldCompoundEval(p prepared, n int, hRel float64, wantLo bool) (bracket, bool) {
	rare := compoundSplit(p, n)
	if rare == nil {
		return bracket{}, false
	}
	a := len(p.z)
	eta := float64(a+4) * ulp
	var rz, rw []float64
	var law compoundLaw
	var piSum, cSum float64
	isRare := make([]bool, a)
	for _, j := range rare {
		isRare[j] = true
		rz = append(rz, p.z[j])
		piSum += p.w[j]
	}
	for j := range p.z {
		if !isRare[j] {
			cSum += p.w[j]
		}
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
	mMax := int(math.Min(nf, math.Ceil(mean+2*math.Sqrt(mean)+2)))
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
