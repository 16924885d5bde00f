package accountant

// Review of cf354c8: sparseExactCut, with the cut at its budget and at
// budgets up to the lower sum itself (cutRel up to 1, so that the dropped
// bound is a large share of the upper end and a wrongly dropped leaf would
// show), against an exact enumeration in the log domain (Lgamma masses,
// double-double sums with FMA): the bracket must contain it.

import (
	"math"
	"math/rand/v2"
	"testing"
)

// r61Law is a law on the sparse path: atom 0 dominant.
type r61Law struct {
	p prepared
	n int
}

func r61RandLaw(r *rand.Rand, i int) r61Law {
	a := 2 + i%2
	var n int
	if a == 2 {
		n = int(math.Pow(10, 0.3+2.9*r.Float64()))
	} else {
		n = int(math.Pow(10, 0.3+2.1*r.Float64()))
	}
	n = max(n, 2)
	mean := math.Pow(10, -3+(3+math.Log10(math.Min(0.3*float64(n), 300)))*r.Float64())
	pi := math.Min(mean/float64(n), 0.3)
	z0 := -math.Pow(10, -6+6*r.Float64())
	if r.IntN(6) == 0 {
		z0 = -z0 / 1000
	}
	p := prepared{z: []float64{z0}, w: []float64{1 - pi}, maxZ: math.Max(z0, 0)}
	ws := make([]float64, a)
	W := 0.0
	for j := range ws {
		switch r.IntN(3) {
		case 0:
			ws[j] = math.Exp(-600 * r.Float64()) // masses e^600 apart
		default:
			ws[j] = math.Pow(r.Float64(), 1+4*r.Float64()) + 1e-6
		}
		W += ws[j]
	}
	for j := range ws {
		zj := z0 + (r.Float64()-0.3)*math.Pow(10, 1-3*r.Float64())
		if r.IntN(4) == 0 && j > 0 {
			zj = p.z[len(p.z)-1] // equal values
		}
		p.z = append(p.z, zj)
		p.w = append(p.w, pi*ws[j]/W)
		p.maxZ = math.Max(p.maxZ, zj)
	}
	return r61Law{p, n}
}

// r61TwoProd / r61TwoSum: error-free transformations (test-side copies).
func r61TwoSum(a, b float64) (float64, float64) {
	s := a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

// r61Exact returns log E[(S_n)_+] under the sparse path's model (M ~
// Bin(n, pi), the others at w_j/pi), and the largest exponent magnitude
// (for the tolerance).
func r61Exact(l r61Law) (logE, mag float64) {
	p, n := l.p, l.n
	z0 := p.z[0]
	pi := 0.0
	for _, w := range p.w[1:] {
		pi += w
	}
	pi = math.Min(pi, 1)
	zs := p.z[1:]
	a := len(zs)
	lw := make([]float64, a)
	for j := range lw {
		lw[j] = math.Log(p.w[1+j] / pi)
	}
	lg := make([]float64, n+1)
	for k := range lg {
		lg[k] = r61LG(k)
	}
	zmax := zs[0]
	for _, z := range zs {
		zmax = math.Max(zmax, z)
	}
	lpi, lq := math.Log(pi), math.Log1p(-pi)
	var acc r61LogAcc
	cs := make([]int, a)
	for m := 0; m <= n; m++ {
		top := float64(n-m)*z0 + float64(m)*zmax
		if top < -1e-9*(float64(n)*math.Abs(z0)+float64(m)*math.Abs(zmax)) {
			continue
		}
		lb := lg[n] - lg[m] - lg[n-m] + float64(m)*lpi + float64(n-m)*lq
		// Enumerate counts of the a atoms summing to m.
		var rec func(j, left int, le float64)
		rec = func(j, left int, le float64) {
			if j == a-1 {
				cs[j] = left
				le += float64(left)*lw[j] - lg[left]
				// s = (n-m) z0 + sum c_j z_j in double-double.
				hi := float64(n-m) * z0
				lo := math.FMA(float64(n-m), z0, -hi)
				for k := range a {
					pp := float64(cs[k]) * zs[k]
					pe := math.FMA(float64(cs[k]), zs[k], -pp)
					var e float64
					hi, e = r61TwoSum(hi, pp)
					lo += e + pe
				}
				s := hi + lo
				if s > 0 {
					lt := lb + lg[m] + le
					mag = math.Max(mag, math.Abs(lb)+2*lg[m]+float64(m)*30)
					acc.add(lt + math.Log(s))
				}
				return
			}
			for c := 0; c <= left; c++ {
				cs[j] = c
				rec(j+1, left-c, le+float64(c)*lw[j]-lg[c])
			}
		}
		rec(0, m, 0)
	}
	return acc.log(), mag
}

// TestReview61SparseCutOracle: sparseExactCut's bracket (cut on, at the
// default budget and at cutRel 1e-6, 1e-2, 1, the tightness check
// ignored) contains the exact D on random laws with two and three
// non-dominant atoms, masses up to e^600 apart, equal values, n w tiny.
func TestReview61SparseCutOracle(t *testing.T) {
	old, oldCheck := cutRel, cutCheck
	defer func() { cutRel, cutCheck = old, oldCheck }()
	r := rand.New(rand.NewPCG(61, 4))
	used, loose := 0, 0
	minLog, maxLog := 0.0, -math.MaxFloat64
	for i := range 500 {
		l := r61RandLaw(r, i)
		if l.p.maxZ <= 0 {
			continue
		}
		le, mag := r61Exact(l)
		exact := math.Exp(le - math.Log(float64(l.n)))
		// Lgamma and the exponents' own rounding: ~u per unit of
		// magnitude; plus 1e-12.
		tol := 1e-12 + 64*ulp*mag
		for _, rel := range []float64{old, 1e-6, 1e-2, 1} {
			cutRel, cutCheck = rel, math.Inf(1)
			b, ok, tight := sparseExactCut(l.p, l.n, true)
			cutRel, cutCheck = old, oldCheck
			if !ok {
				continue
			}
			used++
			if !tight {
				loose++
			}
			if !(b.hi >= exact*(1-tol)) || !(b.lo <= exact*(1+tol)) {
				t.Errorf("law %d n %d z %v w %v cutRel %g: bracket [%.17g, %.17g] tight %v, exact %.17g (tol %.2g)",
					i, l.n, l.p.z, l.p.w, rel, b.lo, b.hi, tight, exact, tol)
			}
		}
		if exact > 0 {
			minLog = math.Min(minLog, math.Log10(exact))
			maxLog = math.Max(maxLog, math.Log10(exact))
		}
		// sparseExact itself.
		if b, ok := sparseExact(l.p, l.n); ok {
			if !(b.hi >= exact*(1-tol)) || !(b.lo <= exact*(1+tol)) {
				t.Errorf("law %d: sparseExact [%.17g, %.17g], exact %.17g", i, b.lo, b.hi, exact)
			}
		}
	}
	t.Logf("%d brackets (%d past the check), exact D from 1e%.0f to 1e%.0f", used, used-loose, minLog, maxLog)
	if used < 1000 {
		t.Fatalf("only %d brackets", used)
	}
}

// TestReview61HugeDWithCut: TestSparseExactHugeD's laws (masses e^700 and
// more apart, a denormal atom) now run without the cut there; here through
// sparseExact, with the cut, against the copy from before 71187eb.
func TestReview61HugeDWithCut(t *testing.T) {
	for _, c := range []struct {
		n  int
		wy float64
	}{{30000, 1e-306}, {30000, 1e-311}, {300, 1e-311}, {300, 1e-313}, {3000, 1e-320}, {2000, 1e-300}} {
		wx := 0.01
		for _, zy := range []float64{0.1, 0.5, -0.2} {
			p := prepared{z: []float64{-1e-6, 0.5, zy}, w: []float64{1 - wx - c.wy, wx, c.wy}, maxZ: 0.5}
			got, gok, tight := sparseExactCut(p, c.n, true)
			want, wok := r51SparseExactOld(p, c.n)
			t.Logf("n %d w_y %v z_y %v: cut %+v %v tight %v, old %+v %v", c.n, c.wy, zy, got, gok, tight, want, wok)
			if gok != wok || (gok && tight && (math.Abs(got.hi-want.hi) > 1e-10*want.hi || got.hi < want.lo || got.lo > want.hi)) {
				t.Errorf("n %d w_y %v z_y %v: cut %+v %v, old %+v %v", c.n, c.wy, zy, got, gok, want, wok)
			}
		}
	}
}
