//go:build audit

package accountant

import (
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"
)

// Deeper grids and reproducers for the second review of compound.go.

// A wider random grid than TestReview55CompoundContainsExact.
func TestReview55AuditCompoundContainsExact(t *testing.T) {
	for seed := uint64(2); seed < 6; seed++ {
		for _, c := range r55Cases(seed, 400) {
			ex := r55BigDelta(c.p.z, c.p.w, c.n)
			for _, hRel := range []float64{0.5, 1.0 / 64} {
				b, ok := compoundEval(c.p, c.n, hRel, true)
				if !ok {
					continue
				}
				loOK, hiOK := r55Contains(b, ex)
				if !loOK || !hiOK {
					exf, _ := ex.Float64()
					t.Errorf("seed %d %s (z %v w %v) hRel %v: [%.17g, %.17g] misses %.17g", seed, c.name, c.p.z, c.p.w, hRel, b.lo, b.hi, exf)
				}
			}
		}
	}
}

// leafChernoff is evaluated at the computed t, but F(k, t) is at the exact
// t*, which differs by up to errT; the bound's exponent carries theta t
// and no theta errT. With rare values of opposite signs near 1e13 (e^30),
// three draws of one and one of the other cancel to t* = 2^-9 while the
// computed t is 0 (3A rounds), and the leaf's upper end falls far below
// the exact value. (Leaf level only: in a whole set the single positive
// rare draw's leaf outweighs it by many orders.)
func TestReview55AuditLeafChernoffIgnoresTRounding(t *testing.T) {
	P := math.Exp(-20)
	z := []float64{-1e-3, 3e-4}
	w := []float64{1 - P, P}
	law := compoundLaw{z: z, w: w, neg: []float64{1e-3, -3e-4}, maxZ: 3e-4, minZ: -1e-3, eta: 7 * ulp}
	law.mean = w[0]*z[0] + w[1]*z[1]
	law.meanErr = 1.01 * (law.eta + 5*ulp) * (w[0]*1e-3 + w[1]*3e-4)
	A := 10000000000000.123
	f3 := 3 * A
	d := math.FMA(3, A, -f3) // 3A - fl(3A), exactly
	B := f3                  // computed t = fl(3A) - B = 0
	// exact t* = 3A - B = d
	k := 2
	nb := func(x float64) *big.Float { return new(big.Float).SetPrec(r55Prec).SetFloat64(x) }
	tstar := nb(d)
	F := nb(0)
	for c := 0; c <= k; c++ {
		x := new(big.Float).SetPrec(r55Prec).Add(tstar, nb(float64(k-c)*z[0]))
		x.Add(x, nb(float64(c)*z[1]))
		if x.Sign() <= 0 {
			continue
		}
		pr := nb(float64([]int{1, 2, 1}[c]))
		for range c {
			pr.Mul(pr, nb(w[1]))
		}
		for range k - c {
			pr.Mul(pr, nb(w[0]))
		}
		F.Add(F, pr.Mul(pr, x))
	}
	inner, capped := 0, false
	b, ok := compoundLeaf(&law, []float64{A, -B}, []int{3, 1}, k, 0.5, true, &inner, &capped)
	if !ok {
		t.Fatal("declined")
	}
	if lo, hi := r55Contains(b, F); !lo || !hi {
		ff, _ := F.Float64()
		t.Errorf("t* = %v (computed t 0): leaf bracket [%.6g, %.6g] misses the exact %.6g", d, b.lo, b.hi, ff)
	}
}

// A rare value far beyond e^30 (not reachable through validated sets):
// the m with log P(M = m) < -746 are skipped on the upper side too, though
// their exact mass times F is far above DeltaFloor; hi = 1e-250 against an
// exact 4.5e-170. The compound path now bounds those m's share in logs.
func TestReview55AuditUnderflowSkipDropsUpperMass(t *testing.T) {
	p := r55Prepared([]float64{-1.25e169, 1e170}, []float64{1, 1e-170})
	n := 10
	b, ok := compoundEval(p, n, 0.5, true)
	ex := r55BigDelta(p.z, p.w, n)
	exf, _ := ex.Float64()
	if ok {
		if _, hi := r55Contains(b, ex); !hi {
			t.Errorf("compound: hi %.3g below the exact %.3g", b.hi, exf)
		}
	}
	if !ok {
		t.Errorf("the compound path declined")
	}
	// sparseExact skips such m the same way (before the compound path
	// existed); with validated sets' values below e^60 the mass it drops
	// is below DeltaFloor's share, so it is left as it is.
}

// Compound against lattice on real decompositions at large n: the two
// sound brackets must overlap, and the lower eps search stay below the
// upper.
func TestReview55AuditCompoundAgainstLattice(t *testing.T) {
	type cse struct {
		d   *Decomposition
		tag string
	}
	var cs []cse
	for _, e0 := range []float64{10, 16, 20, 25, 30} {
		for _, k := range []int{4, 16, 64} {
			cs = append(cs, cse{hadamardAtoms(t, k, e0), fmt.Sprint("hadamard", k, " ", e0)})
		}
		for _, k := range []int{2, 10, 1000} {
			d, err := KRR(k).Decompose(e0)
			if err == nil {
				cs = append(cs, cse{d, fmt.Sprint("krr", k, " ", e0)})
			}
		}
	}
	taken := 0
	for _, c := range cs {
		for si, s := range c.d.Lower {
			for _, n := range []int{100, 10_000, 1_000_000} {
				for _, f := range []float64{0.2, 0.4, 0.6, 0.8} {
					eps := f * c.d.LocalEps
					p := prepare(s, eps)
					if p.maxZ <= 0 || compoundSplit(p, n) == nil {
						continue
					}
					t0 := time.Now()
					b, ok := compoundEval(p, n, 0.125, true)
					if dt := time.Since(t0); dt > 5*time.Second {
						t.Logf("%s set %d n %d eps %v: compound took %v", c.tag, si, n, eps, dt)
					}
					if !ok {
						continue
					}
					taken++
					l := evaluate(s, n, eps, 0.125, true)
					if b.lo > l.hi || l.lo > b.hi || b.lo > b.hi || math.IsNaN(b.lo) || math.IsNaN(b.hi) {
						t.Errorf("%s set %d n %d eps %v: compound [%.10g, %.10g], lattice [%.10g, %.10g]", c.tag, si, n, eps, b.lo, b.hi, l.lo, l.hi)
					}
				}
			}
		}
	}
	t.Logf("%d compound brackets compared", taken)
	for _, c := range cs[:6] {
		for si, s := range c.d.Lower {
			for _, n := range []int{1000, 1_000_000} {
				lo, _, _ := epsLower(s, n, 1e-8, c.d.LocalEps, nil)
				up, _ := epsUpper(s, n, 1e-8, c.d.LocalEps)
				if lo > up {
					t.Errorf("%s set %d n %d: lower %v above upper %v", c.tag, si, n, lo, up)
				}
			}
		}
	}
}

// Pruning on and off give the same figures with the compound path in the
// lower search.
func TestReview55AuditPruningSameWithCompound(t *testing.T) {
	for _, e0 := range []float64{12, 20, 30} {
		for _, k := range []int{8, 64} {
			d := hadamardAtoms(t, k, e0)
			for _, n := range []int{1000, 1_000_000} {
				pruneLowerSets = true
				a := epsilonOf(d, n, 1e-8)
				pruneLowerSets = false
				b := epsilonOf(d, n, 1e-8)
				pruneLowerSets = true
				if a != b {
					t.Errorf("hadamard%d eps0 %v n %d: pruned %+v, unpruned %+v", k, e0, n, a, b)
				}
			}
		}
	}
}

// Time of the compound path where the tail loop extends m_max with many
// rare atoms (the leaves are C(m + r - 1, r - 1) per m and only inner
// evaluations count against compoundMaxInner).
func TestReview55AuditCompoundManyRareTime(t *testing.T) {
	for _, r := range []int{2, 4, 6, 8} {
		n := 100
		pi := 0.9 / float64(n)
		z := []float64{-1, -1.1}
		w := []float64{(1 - pi) / 2, (1 - pi) / 2}
		for j := range r {
			z = append(z, 8.9+0.37*float64(j))
			w = append(w, pi/float64(r))
		}
		p := r55Prepared(z, w)
		t0 := time.Now()
		b, ok := compoundEval(p, n, 0.5, true)
		t.Logf("r %d: ok %v [%.4g, %.4g] in %v", r, ok, b.lo, b.hi, time.Since(t0))
	}
}

// Moderate n, integer values: the inner evaluations go to the lattice
// (five common atoms, no dominant one).
func TestReview55AuditCompoundIntegerOracle(t *testing.T) {
	sets := [][2][]float64{
		{{-3, -1, 0, 1, 2, 40}, {0.2, 0.25, 0.15, 0.25, 0.15, 0}},
		{{-3, -2, -1, 1, 3, 41, -37}, {0.3, 0.2, 0.2, 0.2, 0.1, 0, 0}},
		{{-2, -1, 0, 1, 3, 53, 29, -31}, {0.25, 0.25, 0.2, 0.2, 0.1, 0, 0, 0}},
		{{-1, 0, 1, 2, -3, 24}, {0.3, 0.3, 0.2, 0.1, 0.1, 0}},
	}
	checked := 0
	for si, s := range sets {
		for _, n := range []int{40, 300, 1500} {
			for _, mean := range []float64{0.05, 0.4, 0.95} {
				z := s[0]
				w := make([]float64, len(z))
				nr := 0
				for j := range z {
					if math.Abs(z[j]) >= 24 {
						nr++
					}
				}
				pi := mean / float64(n)
				for j := range z {
					if math.Abs(z[j]) >= 24 {
						w[j] = pi / float64(nr)
					} else {
						w[j] = s[1][j] * (1 - pi)
					}
				}
				p := r55Prepared(z, w)
				rare := compoundSplit(p, n)
				if rare == nil {
					continue
				}
				ex := r55IntegerOracle(z, w, rare, n, 40)
				for _, hRel := range []float64{0.5, 1.0 / 16} {
					b, ok := compoundEval(p, n, hRel, true)
					if !ok {
						t.Logf("set %d n %d mean %v hRel %v declined", si, n, mean, hRel)
						continue
					}
					checked++
					if b.lo > ex*(1+1e-10) || b.hi < ex*(1-1e-10) {
						t.Errorf("set %d n %d mean %v hRel %v: [%.15g, %.15g] misses %.15g", si, n, mean, hRel, b.lo, b.hi, ex)
					}
				}
			}
		}
	}
	t.Logf("%d brackets checked", checked)
}
