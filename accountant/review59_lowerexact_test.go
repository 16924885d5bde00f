package accountant

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// Review of 2aba623, item 2: compoundLower (the compound path's lower end,
// now asked on the upper side's sets, which carry prepare's residual atom
// at z = 0 and are renormalised when their masses sum above 1) is below
// the exact D of the same prepared law: an enumeration of the multinomial
// counts of all atoms (each count but the heaviest atom's capped far in
// its tail; every term non-negative, so the cap only lowers the oracle).

// r59ExactD returns (1/n) E[(S_n)_+] for the atoms (z, w), masses
// normalised by their sum, by enumeration (compensated float64 sum).
func r59ExactD(z, w []float64, n int) float64 {
	a := len(z)
	tot := 0.0
	for _, v := range w {
		tot += v
	}
	order := make([]int, a)
	for i := range order {
		order[i] = i
	}
	// Heaviest last: it takes the remainder.
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case w[x] < w[y]:
			return -1
		case w[x] > w[y]:
			return 1
		}
		return 0
	})
	lw := make([]float64, a)
	caps := make([]int, a)
	for i, j := range order {
		p := w[j] / tot
		lw[i] = math.Log(p)
		mu := float64(n) * p
		caps[i] = int(math.Min(float64(n), math.Ceil(mu+12*math.Sqrt(mu)+40)))
	}
	lg := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	lgn := lg(n)
	var sum, comp float64
	add := func(x float64) {
		t := sum + x
		if math.Abs(sum) >= math.Abs(x) {
			comp += (sum - t) + x
		} else {
			comp += (x - t) + sum
		}
		sum = t
	}
	var rec func(i, left int, logp, s float64)
	rec = func(i, left int, logp, s float64) {
		if i == a-1 {
			logp += float64(left)*lw[i] - lg(left)
			s += float64(left) * z[order[i]]
			if s > 0 {
				add(math.Exp(lgn+logp) * s)
			}
			return
		}
		for c := 0; c <= min(left, caps[i]); c++ {
			rec(i+1, left-c, logp+float64(c)*lw[i]-lg(c), s+float64(c)*z[order[i]])
		}
	}
	rec(0, n, 0, 0)
	return (sum + comp) / float64(n)
}

type r59LowerCase struct {
	name string
	s    AtomSet
	ns   []int
}

func r59LowerCases(t *testing.T) []r59LowerCase {
	var out []r59LowerCase
	for _, k := range []int{10, 100, 1000} {
		for _, eps0 := range []float64{12, 20} {
			d, err := KRRMech{K: k}.Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range d.Upper {
				out = append(out, r59LowerCase{fmt.Sprintf("krr:k=%d eps0 %g upper %d", k, eps0, i), s, []int{10, 30, 100, 300, 1000}})
			}
		}
	}
	for _, k := range []int{64, 256} {
		for _, eps0 := range []float64{8, 14, 20} {
			for i, s := range hadamardAtoms(t, k, eps0).Upper {
				out = append(out, r59LowerCase{fmt.Sprintf("hadamard:k=%d eps0 %g upper %d", k, eps0, i), s, []int{10, 30, 100}})
			}
		}
	}
	// Masses summing above 1 (prepare renormalises): krr:k=1000's set
	// with its residual made an explicit atom of slightly too much mass,
	// z = 0.9 (1 - e^eps) (<= 0).
	d, err := KRRMech{K: 1000}.Decompose(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range []float64{1e-13, 1e-9} {
		s := slices.Clone(d.Upper[0])
		g := 0.0
		for _, a := range s {
			g += a.R
		}
		r := 1 - g + extra
		s = append(s, Atom{R: r, P: 0.9 * r, Q: 0.9 * r})
		out = append(out, r59LowerCase{fmt.Sprintf("krr:k=1000 heavy %g", extra), s, []int{10, 100, 1000}})
	}
	return out
}

func TestReview59CompoundLowerBelowExact(t *testing.T) {
	var positive, steering int
	minRatio, maxRatio := math.Inf(1), 0.0
	for _, c := range r59LowerCases(t) {
		for _, n := range c.ns {
			for _, f := range []float64{0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9, 0.98} {
				eps := f * 20
				for _, hRel := range []float64{hRelStart, hRelStart / 16} {
					l := compoundLower(c.s, n, eps, hRel)
					if l == 0 {
						continue
					}
					p := prepare(c.s, eps)
					ex := r59ExactD(p.z, p.w, n)
					positive++
					minRatio = math.Min(minRatio, l/ex)
					maxRatio = math.Max(maxRatio, l/ex)
					// The oracle against the compound path's upper end.
					if b, ok := compoundEval(p, n, hRel, false); ok && !(ex <= b.hi*(1+1e-9)) {
						t.Errorf("%s n %d eps %g: oracle %.17g above the compound upper end %.17g", c.name, n, eps, ex, b.hi)
					}
					if l > 1e-8 {
						steering++
					}
					if !(l <= ex*(1+1e-9)) {
						t.Errorf("%s n %d eps %g hRel %g: compound lower end %.17g above the exact D %.17g (rel %.3g)", c.name, n, eps, hRel, l, ex, l/ex-1)
					}
					// The lattice's upper end (the same prepared law)
					// must not be below it either.
					if hi := evaluate(c.s, n, eps, hRel, false).hi; !(l <= hi) {
						t.Errorf("%s n %d eps %g hRel %g: compound lower end %.17g above the lattice's upper end %.17g", c.name, n, eps, hRel, l, hi)
					}
				}
			}
		}
	}
	t.Logf("%d points with a positive compound lower end, %d above 1e-8; lower end / exact in [%g, %g]", positive, steering, minRatio, maxRatio)
	if positive < 50 || steering < 10 {
		t.Errorf("too few non-vacuous points: %d positive, %d above 1e-8", positive, steering)
	}
}
