package accountant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// Review 58: f8ecf06 (compound path's leaf cap) and 009ddb7 (scanLower,
// othersBelow), checked against oracles that share nothing with the
// lattice: exact enumeration of the count vectors (enumerateDelta,
// compound_test.go) for small n.

// TestReview58CompoundDeclineIsLattice: where the compound path declines
// past compoundMaxLeaves, nothing of its partial sums reaches the
// result: the compound evaluation is bit for bit the plain one (sparse
// path, else lattice) at every lattice step and both sides.
func TestReview58CompoundDeclineIsLattice(t *testing.T) {
	d, err := Decompose(laplace.Declaration(20, laplace.Bins))
	if err != nil {
		t.Fatal(err)
	}
	s := d.Upper[0]
	for _, eps := range []float64{18.5, 19} {
		p := prepare(s, eps)
		if _, ok := compoundEval(p, 1000, hRelStart, true); ok {
			t.Fatalf("eps %g: the compound path did not decline", eps)
		}
		for _, hRel := range []float64{hRelStart, hRelStart / 4} {
			for _, lo := range []bool{false, true} {
				a := computePaths(s, 1000, eps, hRel, lo, true)
				b := computePaths(s, 1000, eps, hRel, lo, false)
				if a != b {
					t.Errorf("eps %g hRel %g wantLo %v: compound %+v, plain %+v", eps, hRel, lo, a, b)
				}
			}
		}
	}
}

// TestReview58ScanLowerProperty: for random non-monotone functions (step
// functions with random levels), scanLower returns 0 or a point where f
// exceeds the target, and never less than the largest grid point cap k/8
// where f exceeds it.
func TestReview58ScanLowerProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(58, 10))
	for c := range 3000 {
		cap := 1 + rng.Float64()*30
		nb := 1 + rng.IntN(40)
		cuts := make([]float64, nb)
		levels := make([]float64, nb+1)
		for i := range cuts {
			cuts[i] = rng.Float64() * cap * 1.1
		}
		for i := range levels {
			levels[i] = rng.Float64() * 2
		}
		f := func(x float64) float64 {
			k := 0
			for _, cu := range cuts {
				if x >= cu {
					k++
				}
			}
			return levels[k]
		}
		const target = 1.0
		a := scanLower(f, target, cap)
		if a != 0 && !(f(a) > target) {
			t.Fatalf("case %d: scanLower = %v with f = %v <= target", c, a, f(a))
		}
		if a < 0 || a > cap {
			t.Fatalf("case %d: scanLower = %v outside [0, %v]", c, a, cap)
		}
		step := cap / lowerScanPoints
		for k := lowerScanPoints; k >= 1; k-- {
			if x := step * float64(k); f(x) > target {
				if a < x {
					t.Fatalf("case %d: scanLower = %v below the grid point %v where f = %v", c, a, x, f(x))
				}
				break
			}
		}
	}
}

// r58ExactEps returns the exact eps of one set: the smallest eps in [0,
// cap] with D(eps) <= delta (D non-increasing), by bisection on exact
// enumeration, or cap when D(cap) > delta.
func r58ExactD(s AtomSet, n int, eps float64) float64 {
	p := prepare(s, eps)
	if p.maxZ <= 0 {
		return 0
	}
	return enumerateDelta(p.z, p.w, n)
}

func r58ExactEps(s AtomSet, n int, delta, cap float64) float64 {
	if r58ExactD(s, n, 0) <= delta {
		return 0
	}
	if r58ExactD(s, n, cap) > delta {
		return cap
	}
	lo, hi := 0.0, cap
	for hi-lo > 1e-10*cap {
		m := 0.5 * (lo + hi)
		if r58ExactD(s, n, m) > delta {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}

// r58Sets are made-up atom sets with far atoms of tiny mass (values near
// -1e12 and +1e6) beside ordinary ones.
func r58Sets() []AtomSet {
	return []AtomSet{
		{{R: 0.3, P: 0.6, Q: 0.1}, {R: 0.3, P: 0.1, Q: 0.6}, {R: 1e-12, P: 0, Q: 1}},
		{{R: 0.2, P: 0.5, Q: 0.05}, {R: 1e-9, P: 1e-3, Q: 0}, {R: 0.5, P: 0.1, Q: 0.4}},
		{{R: 0.25, P: 0.7, Q: 0.05}, {R: 0.25, P: 0.05, Q: 0.7}, {R: 1e-10, P: 0, Q: 0.1}, {R: 1e-10, P: 1e-4, Q: 0}},
		{{R: 0.1, P: 0.45, Q: 0.02}, {R: 0.4, P: 0.1, Q: 0.5}, {R: 1e-13, P: 0, Q: 0.3}},
	}
}

// TestReview58EpsilonExactSmallN: epsilonOf on decompositions of the
// made-up sets (all of them upper sets, some lower), against exact enumeration at small n: the upper figure
// meets delta exactly (each upper set's exact D there is at most delta,
// unless it is the cap); the lower figure is a lower bound (some lower
// set's exact D there exceeds delta); where Tight, every lower set's
// exact D at lower (1 + Tolerance) is at most delta (the figure is within
// Tolerance of the largest exact bound). With the pruning on and off the
// figures and Tight agree.
func TestReview58EpsilonExactSmallN(t *testing.T) {
	sets := r58Sets()
	const cap = 12.0
	checked := 0
	for _, n := range []int{6, 20} {
		for _, delta := range []float64{1e-2, 1e-3, 1e-4} {
			for _, pick := range [][2][]int{
				{{0, 1}, {2, 3}},
				{{2}, {0, 1, 3}},
				{{1, 3}, {3, 2, 0}},
			} {
				dec := &Decomposition{LocalEps: cap}
				// Every set is an upper one too (in a mechanism the upper
				// sets dominate the lower ones; epsilonOf clips the
				// lower figure at the upper).
				_ = pick[0]
				dec.Upper = append(dec.Upper, sets...)
				for _, i := range pick[1] {
					dec.Lower = append(dec.Lower, sets[i])
				}
				r := epsilonOf(dec, n, delta)
				prev := pruneLowerSets
				pruneLowerSets = false
				r2 := epsilonOf(dec, n, delta)
				pruneLowerSets = prev
				if r.Lower != r2.Lower || r.Tight != r2.Tight || r.Upper != r2.Upper {
					t.Errorf("n %d delta %g %v: pruned %+v, unpruned %+v", n, delta, pick, r, r2)
				}
				// Upper.
				exUp := 0.0
				for _, s := range dec.Upper {
					exUp = math.Max(exUp, r58ExactEps(s, n, delta, cap))
				}
				if r.Upper < exUp*(1-1e-9) {
					t.Errorf("n %d delta %g %v: upper %v below the exact %v", n, delta, pick, r.Upper, exUp)
				}
				// Lower.
				exLow := 0.0
				for _, s := range dec.Lower {
					exLow = math.Max(exLow, r58ExactEps(s, n, delta, cap))
				}
				if r.Lower > exLow*(1+1e-9) {
					t.Errorf("n %d delta %g %v: lower %v above the exact %v", n, delta, pick, r.Lower, exLow)
				}
				if r.Tight && r.Lower*(1+Tolerance) < exLow*(1-1e-9) {
					t.Errorf("n %d delta %g %v: Tight with lower %v, exact %v", n, delta, pick, r.Lower, exLow)
				}
				if r.Tight && r.Upper > exUp*(1+Tolerance)*(1+1e-9) && exUp < cap {
					t.Errorf("n %d delta %g %v: Tight with upper %v, exact %v", n, delta, pick, r.Upper, exUp)
				}
				t.Logf("n %d delta %g %v: upper %.6g (exact %.6g) lower %.6g (exact %.6g) tight %v", n, delta, pick, r.Upper, exUp, r.Lower, exLow, r.Tight)
				checked++
			}
		}
	}
}

// TestReview58LatticeFarAtomsExact: the lattice's brackets (both ends,
// several steps) for the made-up sets with far atoms of tiny mass (the
// case tiltedWeight's per-atom bound was made for: a far atom's weight
// is 0 and no longer inflates every coefficient's error) contain the
// exact value by enumeration, at n = 40 and 120.
func TestReview58LatticeFarAtomsExact(t *testing.T) {
	checked := 0
	for si, s := range r58Sets() {
		for _, n := range []int{40, 120} {
			for _, eps := range []float64{0.2, 0.7, 1.5, 2.5} {
				p := prepare(s, eps)
				if p.maxZ <= 0 {
					continue
				}
				ex := enumerateDelta(p.z, p.w, n)
				for _, hRel := range []float64{0.5, 0.125, 0.03125} {
					b := latticeEval(p, n, hRel, true)
					if b.lo > ex*(1+1e-9) || b.hi < ex*(1-1e-9) {
						t.Errorf("set %d n %d eps %g hRel %g: bracket [%g, %g], exact %g", si, n, eps, hRel, b.lo, b.hi, ex)
					}
					checked++
					if hRel == 0.03125 && eps == 0.7 {
						t.Logf("set %d n %d eps %g: [%.8g, %.8g] exact %.8g", si, n, eps, b.lo, b.hi, ex)
					}
				}
			}
		}
	}
	t.Logf("%d brackets checked", checked)
}

// TestReview58KRREpsilonExact: Epsilon's figures for k-RR (the CLI's
// krr:k=2 at eps0 8 and 12, and at 8 with n = 2000 (its sets have two
// atoms); krr:k=1000 at eps0 8, n = 60; delta 1e-8) against exact
// enumeration of every lower and upper set: lower <= exact lower, upper >= exact
// upper, and where Tight both within Tolerance.
func TestReview58KRREpsilonExact(t *testing.T) {
	const delta = 1e-8
	for _, c := range []struct {
		k  int
		n  int
		e0 []float64
	}{
		{2, 100, []float64{8, 12}},
		{2, 2000, []float64{8}},
		{1000, 60, []float64{8}},
	} {
		for _, eps0 := range c.e0 {
			m := KRRMech{K: c.k}
			d, err := m.Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Epsilon(m, eps0, c.n, delta)
			if err != nil {
				t.Fatal(err)
			}
			exLow, exUp := 0.0, 0.0
			for _, s := range d.Lower {
				exLow = math.Max(exLow, r58ExactEps(s, c.n, delta, eps0))
			}
			for _, s := range d.Upper {
				exUp = math.Max(exUp, r58ExactEps(s, c.n, delta, eps0))
			}
			t.Logf("krr:k=%d eps0 %g n %d: upper %.6g (exact %.6g) lower %.6g (exact %.6g) tight %v", c.k, eps0, c.n, r.Upper, exUp, r.Lower, exLow, r.Tight)
			if r.Lower > exLow*(1+1e-9) {
				t.Errorf("lower %v above the exact %v", r.Lower, exLow)
			}
			if r.Upper < exUp*(1-1e-9) {
				t.Errorf("upper %v below the exact %v", r.Upper, exUp)
			}
			if r.Tight && r.Lower*(1+Tolerance) < exLow*(1-1e-9) {
				t.Errorf("Tight with lower %v, exact %v", r.Lower, exLow)
			}
		}
	}
}
