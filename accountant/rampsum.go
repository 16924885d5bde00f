package accountant

import (
	"math"
	"math/bits"
)

// The window's main sum in the frequency domain.
//
// lattice.window needs M = sum_{i=i0}^{i1} f(i) p(i), f(i) = h i e^{-theta h i},
// where p is the wrapped n-fold law on the window, given by its half
// spectrum: p(i) = (1/L) sum_k mult_k Re(Y_k w^{k i}), w = e^{2 pi i/L},
// over the few kept coefficients k (the others are below e^{-745}, as for
// the inverse FFT that computed p before). Exchanging the two finite sums,
//
//	M = (1/L) sum_k mult_k Re(Y_k G_k),  G_k = sum_{i=i0}^{i1} f(i) w^{k i},
//
// the same number, with K terms instead of an inverse FFT of length L and a
// loop over L/2 points: the cost no longer grows with n.
//
// G_k in closed form. With z = e^{-theta h} w^k and c = i1 - i0 + 1,
//
//	G_k = h z^{i0} (i0 P(c) + Q(c)),  P(c) = sum_{j<c} z^j,  Q(c) = sum_{j<c} j z^j.
//
// The textbook closed forms of P and Q divide by (1 - z)^2 and cancel
// catastrophically where z is near 1 (theta h tiny and k = 0). P and Q are
// built instead along the binary digits of c, from P(0) = Q(0) = 0, by
//
//	P(2b) = P(b) + z^b P(b),        Q(2b) = Q(b) + z^b (Q(b) + b P(b)),
//	P(b+1) = P(b) + z^b,            Q(b+1) = Q(b) + b z^b,
//
// (split the sums at j = b), with each power z^b = e^{-theta h b} w^{k b mod
// L} taken afresh from exp and the twiddle table, never by repeated
// multiplication.
//
// Rounding. Write A(b) for the sums with |z| in place of z: P_A(b) =
// sum_{j<b} |z|^j and Q_A(b) = sum_{j<b} j |z|^j, which obey the same
// recursions with |z^b| in place of z^b and only non-negative terms. Each
// power has relative error at most e_w = (2 min(theta h c, 746) + 20) u
// (the exponent's two roundings, 2u of its size; exp's own error, which
// reaches 2.5u on amd64; the table entry's 12 u absolute on a unit number;
// the real-complex product). An exponent beyond -746 gives 0 or a
// subnormal, whose error the subnormal clause below counts absolutely.
// Suppose |P^ - P| <= E P_A and |Q^ - Q| <= E Q_A at b. A doubling step
// then gives at 2b the same with E replaced by E + e_w + 6u, up to
// O(u^2): the product z^b P carries E + e_w plus
// sqrt(5) u for the complex product, the sum one u of the magnitudes, and
// P_A(2b) = P_A(b) + |z^b| P_A(b) is exactly the sum of those magnitudes;
// for Q the inner Q + b P adds 2u (b is exact) on Q_A + b P_A, and the same
// steps follow. An increment step adds e_w + 2u likewise. There are at most
// 2 bits.Len(c) steps, so E <= 2 bits.Len(c) (e_w + 6u); a factor 1.01
// covers the O(u^2) terms (E is below 1e-10). The last product,
// h z^{i0} (i0 P + Q), adds e_{i0} = (2 min(theta h i0, 746) + 20) u and
// 5u more, on the magnitude h |z|^{i0} (i0 P_A + Q_A) = sum_i f(i) =: F,
// the same for every k. So every computed G_k is within
// errG = 1.01 (E + e_{i0} + 6u) F of the exact one, and F itself is G_0 at
// theta's real z (all its terms >= 0), computed within the same errG:
// F <= G^_0 / (1 - 1.01 (E + e_{i0} + 6u)).
//
// The sum over k. With |Y^_k - Y_k| <= e_k (the window's coefficient
// bound), a term mult_k Re(Y^_k G^_k) is within mult_k (|Y^_k| errG + (|G^_k|
// + errG) e_k) of mult_k Re(Y_k G_k), plus its own rounding 3u |Y^_k| |G^_k|
// mult_k; a recursive sum of K terms adds (K - 1) u times the sum of their
// magnitudes, and the division by L one u; the sums that form this bound
// round by (K + 4) u of themselves. That is the window's fpErr.
//
// Subnormal results: an operation whose result is subnormal can be off by
// 2^-1074 absolute instead of relatively. Before the last factor h there
// are at most 2000 operations per coefficient and factors of at most 2^100
// (c, i0 and the sums' magnitudes) after them, so such errors add at most
// 2^-960 h to a G_k, and across 2^23 coefficients (each |Y_k| <= 1.01,
// divided by L) stay below 2^-900 max(1, h) absolute, which the window
// adds. Where z^{i0} itself underflows (theta h i0 > 700) every computed
// term may be lost: then |G^_k - G_k| <= |G^_k| + |G_k|, and both are at
// most (1.01 times) the exact tail sum
// h sum_{i >= i0} i e^{-theta h i} = h e^{-theta h i0} (i0/(1-e^{-theta h})
// + e^{-theta h}/(1-e^{-theta h})^2), taken in logarithms with a margin for
// their rounding; errG adds 2.02 times it.
//
// Checked against a 400-bit evaluation of G_k, term by term
// (rampsum_test.go) and in closed form on adversarial windows
// (rampsum_indep_test.go), against exact enumeration of whole windows, and
// against the inverse FFT and point-by-point sum it replaces.

// rampSum evaluates G_k = sum_{i=i0}^{i1} h i e^{-theta h i} w^{k i} for a
// window (see the comment above).
type rampSum struct {
	h, theta float64
	i0       int64
	c        int64 // number of terms, i1 - i0 + 1 >= 1
	L        int64
	t        []complex128 // twiddle table of L
	// steps of the binary expansion of c, most significant first: b is the
	// count before the step, double whether it is a doubling (else +1), rb
	// = e^{-theta h b}.
	steps []rampStep
	rhoI0 float64 // e^{-theta h i0}
	errG  float64 // bound on |G^_k - G_k|, every k
	total float64 // upper bound on F = sum_i f(i)
}

type rampStep struct {
	b      int64
	double bool
	rb     float64
}

// newRampSum prepares the sums over [i0, i1] (i0 >= 1, i1 >= i0) for a
// window of length L (i1 - i0 < L) with twiddle table t.
func newRampSum(h, theta float64, i0, i1 int64, L int, t []complex128) *rampSum {
	r := &rampSum{h: h, theta: theta, i0: i0, c: i1 - i0 + 1, L: int64(L), t: t}
	th := theta * h
	nb := bits.Len64(uint64(r.c))
	var b int64
	for j := nb - 1; j >= 0; j-- {
		if b > 0 {
			r.steps = append(r.steps, rampStep{b: b, double: true, rb: math.Exp(-th * float64(b))})
			b *= 2
		}
		if r.c>>uint(j)&1 == 1 {
			r.steps = append(r.steps, rampStep{b: b, rb: math.Exp(-th * float64(b))})
			b++
		}
	}
	r.rhoI0 = math.Exp(-th * float64(i0))
	ew := (2*math.Min(th*float64(r.c), 746) + 20) * ulp
	e := 2 * float64(nb) * (ew + 6*ulp)
	ei0 := (2*math.Min(th*float64(i0), 746) + 20) * ulp
	rel := 1.01 * (e + ei0 + 6*ulp)
	g0 := real(r.at(0))
	r.total = g0 / (1 - rel) * (1 + 4*ulp)
	r.errG = rel * r.total
	if x := th * float64(i0); x > 700 {
		om := -math.Expm1(-th) // 1 - e^{-theta h}, > 0
		lt := math.Log(h) - x + math.Log(float64(i0)/om+math.Exp(-th)/(om*om))
		tail := math.Exp(lt + 1e-6 + 8*ulp*x)
		r.total = math.Max(r.total, tail)
		r.errG += 2.02 * tail
	}
	return r
}

// tw returns e^{+2 pi i m / L} (the conjugate of the table's e^{-2 pi i m/L})
// for m in [0, L).
func (r *rampSum) tw(m int64) complex128 {
	if m <= r.L/2 {
		x := r.t[m]
		return complex(real(x), -imag(x))
	}
	return r.t[r.L-m]
}

// at returns G^_k.
func (r *rampSum) at(k int) complex128 {
	kk := int64(k)
	var p, q complex128
	for _, s := range r.steps {
		zb := complex(s.rb, 0) * r.tw(kk*s.b%r.L)
		if k == 0 {
			zb = complex(s.rb, 0)
		}
		if s.double {
			q += zb * (q + complex(float64(s.b), 0)*p)
			p += zb * p
		} else {
			q += complex(float64(s.b), 0) * zb
			p += zb
		}
	}
	z0 := complex(r.rhoI0, 0)
	if k != 0 {
		z0 *= r.tw(kk * (r.i0 % r.L) % r.L)
	}
	return complex(r.h, 0) * (z0 * (complex(float64(r.i0), 0)*p + q))
}

// maxF returns an upper bound on max_i f(i) over the window (rampMaxF).
func (r *rampSum) maxF() float64 { return rampMaxF(r.h, r.theta, r.i0, r.i0+r.c-1) }

// rampMaxF returns an upper bound on max f(i) = h i e^{-theta h i} over
// i0 <= i <= i1 (f rises to i = 1/(theta h) and falls after it), each
// candidate f(i) = s e^{-theta s} with a margin for exp's argument (2u of
// theta s), its own roundings and subnormal results.
func rampMaxF(h, theta float64, i0, i1 int64) float64 {
	f := func(i int64) float64 {
		s := h * float64(i)
		if theta == 0 {
			return s * (1 + 2*ulp)
		}
		// A subnormal exp is off by up to 2^-1075 absolute.
		return s*math.Exp(-theta*s)*(1+(2*theta*s+8)*ulp) + (s+1)*0x1p-1072
	}
	m := math.Max(f(i0), f(i1))
	if theta > 0 {
		if is := 1 / (theta * h); is > float64(i0) && is < float64(i1) {
			m = math.Max(m, math.Max(f(int64(is)), f(int64(is)+1)))
		}
	}
	return m
}
