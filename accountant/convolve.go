package accountant

import (
	"math"
	"math/cmplx"
)

// This file composes lattice PLDs (pld.go) and reads the privacy profile of
// the composition:
//
//	delta(eps) = P(S = +inf) + E[(1 - e^{eps - S})_+ ; S finite],
//	S = sum over parts i of T_i independent losses drawn from part i's PLD,
//
// bracketing the exact value of the given PLDs from both sides. Each step
// and why it is sound (the same moves as engine.go, in one more dimension
// of bookkeeping):
//
//  1. +inf. Part i puts P-mass inf_i at +inf, where the integrand is 1, so
//     P(S = +inf) = 1 - prod (1 - inf_i)^{T_i}, computed with log1p/expm1.
//     The finite parts are sub-probability laws; their convolution carries
//     exactly the mass of "no round at +inf".
//  2. Tilting. Each finite part is tilted by e^{theta s} (s = j step),
//     theta >= 0 chosen so that the tilted mean of S is eps: probabilities
//     near s = eps, where the integrand starts, are of order 1/sd instead
//     of delta, and float64 keeps its relative precision for tiny delta.
//     P(S = s) = P_theta(S = s) e^{-theta s} e^{K(theta)}, K = sum T_i K_i.
//  3. Window and aliasing. The tilted law of S is computed modulo L on a
//     window [A, A+L) of lattice indices: the DFT of each part's tilted PMF
//     (a real FFT), raised to the power T_i, multiplied, and one inverse FFT
//     give the wrapped probabilities. The window covers every index above
//     eps whenever the whole support does not fit. Wrapping adds
//     non-negative mass only, which keeps the upper side sound, and the
//     mass truly above the window is bounded by a Chernoff bound on the
//     exact lattice MGF and added (the integrand is at most 1). On the lower
//     side the wrapped mass is bounded by Chernoff bounds of the tilted law
//     and subtracted at its worst weight.
//  4. Floating point. Each tilted weight is within tiltedWeight's bound
//     (window.go) of its exact value; the forward FFT has normwise error 5 u log2(L)
//     ||w||_2 sqrt(L), a bound for every coefficient; raising a coefficient
//     known to within eta to the power T errs by at most
//     (|phi| + eta)^T - |phi|^T plus the rounding of exp/rect; products of
//     parts likewise. Cauchy-Schwarz and Parseval turn the coefficient
//     errors into a bound on the weighted sum (as in engine.go), plus the
//     inverse FFT's 5 u log2(L) ||p||_2. It is added on the upper side and
//     subtracted on the lower side.
//  5. Rounded masses and kinks (pld.go): every mass is within relative
//     2^-53 of the exact hull mass, so composed masses are within
//     (1 +- 2^-53)^T, covered by a relative margin; kinks within kinkSlack
//     of their lattice loss are covered by reading delta at
//     eps -/+ T kinkSlack.

// pldPart is a PLD composed T times.
type pldPart struct {
	d      *pld
	rounds int
}

// composeWindowSD is the half-width of the window in tilted standard
// deviations of S.
const composeWindowSD = 14

// partLaw is one part's finite law in log space.
type partLaw struct {
	logw []float64 // log masses
	v    []float64 // losses j*step
	j    []int64
	T    float64
}

func lawsOf(parts []pldPart) ([]partLaw, float64, int64, int64, bool) {
	laws := make([]partLaw, 0, len(parts))
	var logNoInf float64
	var lo, hi int64
	any := false
	for _, p := range parts {
		T := float64(p.rounds)
		if p.d.inf > 0 {
			logNoInf += T * math.Log1p(-math.Min(p.d.inf, 1))
		}
		var law partLaw
		law.T = T
		plo, phi := int64(math.MaxInt64), int64(math.MinInt64)
		for i, m := range p.d.mass {
			if m > 0 {
				j := p.d.lo + int64(i)
				law.logw = append(law.logw, math.Log(m))
				law.v = append(law.v, float64(j)*p.d.step)
				law.j = append(law.j, j)
				plo, phi = min(plo, j), max(phi, j)
			}
		}
		if len(law.logw) == 0 {
			// This part never draws a finite loss: S is +inf surely.
			return nil, math.Inf(-1), 0, 0, false
		}
		any = true
		lo += int64(p.rounds) * plo
		hi += int64(p.rounds) * phi
		laws = append(laws, law)
	}
	return laws, logNoInf, lo, hi, any
}

// totalCumulants returns K(theta) = sum T_i K_i(theta) and its first two
// derivatives.
func totalCumulants(laws []partLaw, theta float64) (k0, k1, k2 float64) {
	for _, l := range laws {
		a, b, c := cumulants(l.logw, l.v, theta)
		k0 += l.T * a
		k1 += l.T * b
		k2 += l.T * c
	}
	return
}

// composedDelta returns an upper (upper = true, for pessimistic PLDs) or
// lower bound on delta(eps) of the composition of parts, which share one
// lattice step.
func composedDelta(parts []pldPart, eps float64, upper bool) float64 {
	var totalT float64
	for _, p := range parts {
		totalT += float64(p.rounds)
	}
	if upper {
		eps -= totalT * kinkSlack
	} else {
		eps += totalT * kinkSlack
	}
	laws, logNoInf, lo, hi, ok := lawsOf(parts)
	// P(S = +inf) = 1 - prod (1 - inf)^T, with a relative margin for the
	// rounding of log1p and expm1 (a few ulps).
	pInf := -math.Expm1(logNoInf)
	if upper {
		pInf *= 1 + 1e-12
	}
	if !ok {
		if upper {
			return 1
		}
		return 0
	}
	step := parts[0].d.step
	fin := finiteDelta(laws, step, lo, hi, eps, totalT, upper)
	if upper {
		return math.Min(1, pInf+fin)
	}
	return math.Max(0, fin)
}

// finiteDelta is E[(1 - e^{eps - S})_+ ; S finite] bracketed on one side.
func finiteDelta(laws []partLaw, step float64, lo, hi int64, eps, totalT float64, upper bool) float64 {
	if float64(hi)*step <= eps {
		return 0 // every finite S is <= eps
	}
	// Tilt: theta >= 0 with K'(theta) = eps (0 when the mean is above).
	_, mean0, _ := totalCumulants(laws, 0)
	theta := 0.0
	if mean0 < eps {
		theta = centringTilt(func(t float64) float64 { _, k1, _ := totalCumulants(laws, t); return k1 - eps }, 1/math.Max(float64(hi)*step-eps, step))
	}
	k0, kc, k2 := totalCumulants(laws, theta)
	sd := math.Sqrt(k2) / step
	centre := kc / step
	half := math.Ceil(composeWindowSD*sd) + 2
	epsIdx := math.Floor(eps / step)
	A := math.Max(float64(lo), math.Min(math.Floor(centre-half), epsIdx))
	B := math.Min(float64(hi), math.Ceil(centre+half))
	full := A <= float64(lo) && B >= float64(hi)
	L := fastSize(int(B-A) + 1)
	if L > maxLattice {
		L = maxLattice
		full = false
	}
	if L < 2 {
		L = 2
	}
	Ai := int64(A)
	Lf := float64(L)
	log2L := math.Log2(Lf) + 1
	fft, putFFT := getFFT(L)
	defer putFFT()
	half2 := L/2 + 1
	Y := make([]complex128, half2)
	for k := range Y {
		Y[k] = 1
	}
	errY := make([]float64, half2) // error bound of |Y_k| accumulated
	absY := make([]float64, half2) // prod |Yhat_i| for the error recursion
	for k := range absY {
		absY[k] = 1
	}
	buf := make([]float64, L)
	for _, law := range laws {
		for i := range buf {
			buf[i] = 0
		}
		k0i, _, _ := cumulants(law.logw, law.v, theta)
		var werr, w2 float64
		for i := range law.logw {
			w, e := tiltedWeight(law.logw[i], theta*law.v[i], k0i)
			pos := int(((law.j[i] % int64(L)) + int64(L)) % int64(L))
			buf[pos] += w
			werr += e
		}
		for _, w := range buf {
			w2 += w * w
		}
		// Coefficient error: the weights' own errors (tiltedWeight: v is
		// j step rounded once, theta v once more), their sum of absolute
		// errors bounding every coefficient's, with the rounding of that
		// sum and of buf's sums (weights summing to 1: at most len u),
		// plus the FFT's normwise error.
		nl := float64(len(law.logw))
		eta := werr*(1+(nl+4)*ulp) + (nl+2)*ulp + 5*ulp*log2L*math.Sqrt(Lf)*math.Sqrt(w2)
		phi := fft.Coefficients(nil, buf)
		T := law.T
		for k := range half2 {
			a := cmplx.Abs(phi[k])
			var yk complex128
			var ek float64
			if a > 0 && T*math.Log(a+eta) >= -745 {
				la := math.Log(a)
				arg := cmplx.Phase(phi[k])
				yk = cmplx.Rect(math.Exp(T*la), T*arg)
				rel := (math.Abs(T*la)+math.Abs(T*arg))*2*ulp + 8*ulp
				ek = math.Exp(T*math.Log(a+eta)) - math.Exp(T*la) + cmplx.Abs(yk)*rel
			} else {
				// |phi^T| and its error underflow: bound by (a + eta)^T.
				ek = math.Exp(T * math.Log(a+eta))
			}
			// Product error: |x y - x^ y^| <= (|x^|+ex)(|y^|+ey) - |x^||y^|.
			ay := cmplx.Abs(yk)
			errY[k] = (absY[k]+errY[k])*(ay+ek) - absY[k]*ay + 2*ulp*absY[k]*ay
			absY[k] *= ay
			Y[k] *= yk
		}
	}
	var dY2, Y2 float64
	for k := range half2 {
		mult := 2.0
		if k == 0 || (L%2 == 0 && k == L/2) {
			mult = 1
		}
		dY2 += mult * errY[k] * errY[k]
		Y2 += mult * real(Y[k]*cmplx.Conj(Y[k]))
	}
	p := fft.Sequence(nil, Y)
	l2Err := math.Sqrt(dY2/Lf) + 5*ulp*log2L*math.Sqrt(Y2/Lf)
	// Main sum in the scaled unit e^{K(theta)}.
	var sumW2, maxW float64
	var acc kahan
	for i := max(Ai, int64(epsIdx)); i < Ai+int64(L); i++ {
		s := float64(i) * step
		if s <= eps {
			continue
		}
		u := math.Exp(-theta*(s-eps)) * -math.Expm1(eps-s) // unit e^{K(theta) - theta eps}: no underflow near eps
		pv := p[int(((i%int64(L))+int64(L))%int64(L))] / Lf
		acc.add(pv * u)
		sumW2 += u * u
		maxW = math.Max(maxW, u)
	}
	main := acc.sum
	fpErr := l2Err * math.Sqrt(sumW2)
	// Every term above is in the unit e^{K(theta) - theta eps}.
	k0 -= theta * eps
	var tail, alias float64
	if !full {
		top := float64(Ai+int64(L)) * step
		bot := float64(Ai) * step
		// Untilted mass above the window and, when the window starts
		// above eps, below it, in the scaled unit e^{K(theta)}: the
		// untilted law is e^{K(0)} times its normalisation.
		kz, _, _ := totalCumulants(laws, 0)
		tail = math.Exp(kz + tailAbove(laws, 0, top) - k0)
		if bot > eps {
			tail += math.Exp(kz + tailBelow(laws, 0, bot-step) - k0)
		}
		alias = math.Exp(tailAbove(laws, theta, top)) + math.Exp(tailBelow(laws, theta, bot-step))
	}
	margin := 4*Lf*ulp + 4*totalT*ulp + 1e-12
	if upper {
		v := main + fpErr + tail + 1e-300 // covers weights that still underflow
		return scaleUp(v, k0) * (1 + margin)
	}
	v := main - fpErr - alias*maxW
	return scaleUp(v, k0) * (1 - margin)
}

// scaleUp returns v e^{k0} (0 for v <= 0), in log space.
func scaleUp(v, k0 float64) float64 {
	if !(v > 0) {
		return 0
	}
	return math.Exp(math.Log(v) + k0)
}

// tailAbove bounds log P_theta(S >= b) for the law of S tilted by theta
// and normalised: min over lambda >= 0 of -lambda b + K(theta+lambda) -
// K(theta). Any lambda gives a valid bound, so approximate minimisation is
// sound.
func tailAbove(laws []partLaw, theta, b float64) float64 {
	k0, _, k2 := totalCumulants(laws, theta)
	f := func(lam float64) float64 {
		k, _, _ := totalCumulants(laws, theta+lam)
		return -lam*b + k - k0
	}
	return math.Min(0, minimize1D(f, 0, chernoffScale(k2)))
}

// tailBelow bounds log P_theta(S <= b).
func tailBelow(laws []partLaw, theta, b float64) float64 {
	k0, _, k2 := totalCumulants(laws, theta)
	f := func(lam float64) float64 {
		k, _, _ := totalCumulants(laws, theta-lam)
		return lam*b + k - k0
	}
	return math.Min(0, minimize1D(f, 0, chernoffScale(k2)))
}

func chernoffScale(k2 float64) float64 {
	if k2 > 0 {
		return 50 / math.Sqrt(k2)
	}
	return 50
}
