package accountant

import "math"

// Binomial laws and their convolutions with certified floating-point
// error, for the exact node profile (node_exact.go, proof point 3): every
// computed pmf x carries a relative error eps and an excess mass tau
// against the true pmf pi (pi(k) >= (1-eps) x(k), and the mass of pi above
// (1+eps) x is at most tau).

// gammaU returns gamma_n = n u/(1 - n u), the relative error bound of n
// roundings of positive quantities.
func gammaU(n int) float64 {
	nu := float64(n) * unitRound
	return nu / (1 - nu)
}

// upF returns a factor f with fl(fl(expr) f) >= (1+e) expr for an
// expression of positive terms with at most 28 roundings.
func upF(e float64) float64 { return 1 + e + 32*unitRound }

// dnF returns a factor f with fl(fl(expr) f) <= (1-e) expr likewise.
func dnF(e float64) float64 { return 1 - e - 32*unitRound }

// ndist is a computed pmf on the integers off, off+1, ...: for the true
// pmf pi, pi(k) >= (1-eps) x(k) for every k, and the mass of pi above
// (1+eps) x, sum_k (pi(k) - (1+eps) x(k))_+, is at most tau (x is 0
// outside the array).
type ndist struct {
	off      int
	x        []float64
	eps, tau float64
}

// binomDist returns Bin(n, p) with p/(1-p) = e^{±eps0}, given rho =
// fl(exp(±eps0)) (within 4 ulp): see the file comment, point 3.
func binomDist(n int, rho float64) ndist {
	if n == 0 {
		return ndist{x: []float64{1}}
	}
	p := rho / (1 + rho)
	k0 := min(max(int(math.Floor(float64(n+1)*p)), 0), n)
	// Each step: three roundings of the ratio, one of the product, and the
	// error of rho (allowed 4 ulp, 8u, for the platform's exp): gamma_12
	// per step, n steps at most.
	gB := gammaU(12*n + 12)
	g6 := gammaU(12)
	// tail bounds the w-mass beyond a kept end w with next ratio r < 1.
	tail := func(w, r float64) float64 {
		ru := r * upF(g6)
		if ru >= 1 {
			return math.Inf(1)
		}
		return w * upF(gB) * ru / (1 - ru) * upF(0)
	}
	right := []float64{1}
	var tR float64
	w := 1.0
	for k := k0; k < n; k++ {
		w *= float64(n-k) * rho / float64(k+1)
		right = append(right, w)
		if k+1 == n {
			break
		}
		if r := float64(n-k-1) * rho / float64(k+2); w < exactTrim && r < 1 {
			if t := tail(w, r); !math.IsInf(t, 1) {
				tR = t
				break
			}
		}
	}
	var left []float64 // w(k0-1), w(k0-2), ...
	var tL float64
	w = 1.0
	for k := k0; k > 0; k-- {
		w *= float64(k) / (float64(n-k+1) * rho)
		left = append(left, w)
		if k-1 == 0 {
			break
		}
		if r := float64(k-1) / (float64(n-k+2) * rho); w < exactTrim && r < 1 {
			if t := tail(w, r); !math.IsInf(t, 1) {
				tL = t
				break
			}
		}
	}
	L := len(left) + len(right)
	x := make([]float64, L)
	for i, v := range left {
		x[len(left)-1-i] = v
	}
	copy(x[len(left):], right)
	var z float64
	for _, v := range x {
		z += v
	}
	for i := range x {
		x[i] /= z
	}
	gL := gammaU(L)
	T := tL + tR
	d := ndist{off: k0 - len(left), x: x}
	d.eps = 1.01 * (2*gB + gL + 2*unitRound + T/z)
	d.tau = T * upF(gL+gB) / z * upF(0)
	return d
}

// conv returns the law of the sum of independent a and b, its ends below
// exactTrim of its maximum cut (file comment, point 3).
func (a ndist) conv(b ndist) ndist {
	if len(a.x) < len(b.x) {
		a, b = b, a
	}
	y := make([]float64, len(a.x)+len(b.x)-1)
	for k, xb := range b.x {
		row := y[k : k+len(a.x)]
		for i, xa := range a.x {
			row[i] += xa * xb
		}
	}
	out := ndist{off: a.off + b.off}
	// pi <= (1+ea)(1+eb)/(1-gamma) x + excess; sum x_a <= 1/(1-ea).
	out.eps = 1.01 * (a.eps + b.eps + 2*gammaU(len(b.x)))
	out.tau = (a.tau + b.tau*(1+a.eps)/(1-a.eps)) * upF(0)
	var mx float64
	for _, v := range y {
		mx = math.Max(mx, v)
	}
	lo, hi := 0, len(y)-1
	var cut float64
	for lo < hi && y[lo] < exactTrim*mx {
		cut += y[lo]
		lo++
	}
	for hi > lo && y[hi] < exactTrim*mx {
		cut += y[hi]
		hi--
	}
	if cut > 0 {
		out.tau += cut * upF(out.eps+gammaU(len(y)))
	}
	out.off += lo
	out.x = y[lo : hi+1]
	return out
}
