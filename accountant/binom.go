package accountant

import "math"

// logBinomPMF returns log P(Binomial(n, p) = x) accurately for n up to
// 10^10 and beyond, by Loader's saddle-point method ("Fast and accurate
// computation of binomial probabilities", 2000): the Stirling remainders and
// the deviance term are computed without the cancellation that differences
// of log-gamma values suffer at large n (lgamma(1e10) ~ 2.2e11 loses about
// 1e-5 in absolute terms).
func logBinomPMF(x, n int, p float64) float64 {
	q := 1 - p
	switch {
	case p == 0:
		if x == 0 {
			return 0
		}
		return math.Inf(-1)
	case q == 0:
		if x == n {
			return 0
		}
		return math.Inf(-1)
	case x < 0 || x > n:
		return math.Inf(-1)
	}
	nf, xf := float64(n), float64(x)
	if x == 0 {
		return nf * math.Log1p(-p)
	}
	if x == n {
		return nf * math.Log(p)
	}
	lc := stirlerr(nf) - stirlerr(xf) - stirlerr(nf-xf) - bd0(xf, nf*p) - bd0(nf-xf, nf*q)
	return lc + 0.5*math.Log(nf/(2*math.Pi*xf*(nf-xf)))
}

// stirlerr returns log(n!) - log(sqrt(2 pi n) (n/e)^n).
func stirlerr(n float64) float64 {
	const (
		s0 = 1.0 / 12
		s1 = 1.0 / 360
		s2 = 1.0 / 1260
		s3 = 1.0 / 1680
		s4 = 1.0 / 1188
	)
	if n <= 15 {
		lg, _ := math.Lgamma(n + 1)
		return lg - (n+0.5)*math.Log(n) + n - 0.5*math.Log(2*math.Pi)
	}
	nn := n * n
	switch {
	case n > 500:
		return (s0 - s1/nn) / n
	case n > 80:
		return (s0 - (s1-s2/nn)/nn) / n
	case n > 35:
		return (s0 - (s1-(s2-s3/nn)/nn)/nn) / n
	default:
		return (s0 - (s1-(s2-(s3-s4/nn)/nn)/nn)/nn) / n
	}
}

// bd0 returns x log(x/np) + np - x, the deviance term, accurately when x is
// close to np.
func bd0(x, np float64) float64 {
	if math.Abs(x-np) < 0.1*(x+np) {
		v := (x - np) / (x + np)
		s := (x - np) * v
		ej := 2 * x * v
		v2 := v * v
		for j := 1; j < 1000; j++ {
			ej *= v2
			s1 := s + ej/float64(2*j+1)
			if s1 == s {
				return s1
			}
			s = s1
		}
		return s
	}
	return x*math.Log(x/np) + np - x
}
