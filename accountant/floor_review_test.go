package accountant

import (
	"math"
	"strings"
	"testing"
)

// hEnum: h(K) for atoms (w_j, p_j, q_j), sum w = 1, by enumerating the
// counts N of the K + 1 reports: P(N) = sum_j p_j Mult(K, w)(N - e_j).
func hEnum(w, p, q []float64, K int, eps float64) float64 {
	J := len(w)
	lf := func(n int) float64 { v, _ := math.Lgamma(float64(n) + 1); return v }
	logMult := func(N []int) float64 {
		s, l := 0, 0.0
		for j, n := range N {
			if n < 0 {
				return math.Inf(-1)
			}
			s += n
			l += float64(n)*math.Log(w[j]) - lf(n)
		}
		return l + lf(s)
	}
	ee := math.Exp(eps)
	var h float64
	N := make([]int, J)
	var rec func(j, left int)
	rec = func(j, left int) {
		if j == J-1 {
			N[j] = left
			var P, Q float64
			for i := range N {
				N[i]--
				m := math.Exp(logMult(N))
				N[i]++
				P += p[i] * m
				Q += q[i] * m
			}
			if v := P - ee*Q; v > 0 {
				h += v
			}
			return
		}
		for n := 0; n <= left; n++ {
			N[j] = n
			rec(j+1, left-n)
		}
	}
	rec(0, K+1)
	return h
}

// floorEnumSet is an asymmetric set of four atoms (two exact outputs and
// two of another ratio), its blanket rescaled to a law.
func floorEnumSet() (set AtomSet, w, p, q []float64) {
	a := 0.3 / 2.75
	set = AtomSet{{R: 0.2, P: 0.5, Q: 0.2}, {R: 0.2, P: 0.2, Q: 0.5}, {R: a, P: 1.75 * a, Q: a}, {R: a, P: a, Q: 1.75 * a}}.Merge()
	g := set.Gamma()
	for _, at := range set {
		w, p, q = append(w, at.R/g), append(p, at.P), append(q, at.Q)
	}
	return set, w, p, q
}

// floorMixtureEnum checks the floor's bracket against the mixture
// E[h(m + K')] with every h(K) enumerated over the counts of the K + 1
// reports (hEnum, independent of the engine), at the given (n_h, m).
func floorMixtureEnum(t *testing.T, cases []struct{ nh, m int }, epsilons []float64) {
	set, w, p, q := floorEnumSet()
	g := set.Gamma()
	lf := func(n int) float64 { v, _ := math.Lgamma(float64(n) + 1); return v }
	for _, c := range cases {
		for _, eps := range epsilons {
			var ex float64
			for k := 0; k <= c.nh-1; k++ {
				pk := math.Exp(lf(c.nh-1) - lf(k) - lf(c.nh-1-k) + float64(k)*math.Log(g) + float64(c.nh-1-k)*math.Log1p(-g))
				ex += pk * hEnum(w, p, q, c.m+k, eps)
			}
			b := newFloorSolver(set, c.m, c.nh).bracket(eps, 1e-3, 0, 0)
			if b.lo > ex*(1+1e-9) || ex > b.hi*(1+1e-9) {
				t.Errorf("nh=%d m=%d eps=%.2f: enumerated %.10g outside the bracket [%.10g, %.10g]", c.nh, c.m, eps, ex, b.lo, b.hi)
			}
			if c.nh <= 3 && b.lo < ex*(1-1e-6) {
				// Every count of K' is a point: the bracket is the points'.
				t.Errorf("nh=%d m=%d eps=%.2f: lower end %.10g below the enumerated %.10g with every stratum a point", c.nh, c.m, eps, b.lo, ex)
			}
		}
	}
}

// TestFloorMixtureEnum: the floor's bracket holds the enumerated mixture
// of an asymmetric four-atom set (make audit runs larger n_h and m); with
// n_h = 2 its lower end is the exact value (each stratum's own left
// point counts at its own value: found in review, where the lower end
// used the next point's and stayed 22% low, so no eps with a floor and a
// few honest others was ever certified).
func TestFloorMixtureEnum(t *testing.T) {
	floorMixtureEnum(t, []struct{ nh, m int }{{1, 40}, {2, 0}, {3, 12}, {12, 6}}, []float64{0, 0.3, 0.6})
}

// TestFloorTightFewHonest: with a few honest others the floor's eps is
// certified (it was not, before the lower end's fix).
func TestFloorTightFewHonest(t *testing.T) {
	for _, nh := range []int{2, 3, 5, 20} {
		r, err := FloorEpsilon(KRR(5), 2, nh, 30, 1e-4)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Tight {
			t.Errorf("n_h = %d: %+v, not certified", nh, r)
		}
	}
}

// TestFloorLowerOnlyForExactPairs: the victim among the draws alone is a
// lower bound only when the candidates are real pairs. A segments
// declaration's split bins overstate it (with m = 100: 0.326 against the
// exact matrix's 0.307) and report no lower bound; the matrix does; a
// WorstOf, whose blanket no randomizer samples, is refused a floor (found
// in review: both reported their candidates' values as lower bounds).
func TestFloorLowerOnlyForExactPairs(t *testing.T) {
	a := 0.3 / 2.75
	eps0 := math.Log(2.5)
	mat, err := NewMatrix([][]float64{{0.5, 1.75 * a, 0.2, a}, {0.2, a, 0.5, 1.75 * a}})
	if err != nil {
		t.Fatal(err)
	}
	matrix := DeclaredMech{Decl: &Declaration{Eps0: eps0, Form: FormMatrix, Matrix: mat}, Name: "matrix"}
	seg := DeclaredMech{Decl: &Declaration{Eps0: eps0, Form: FormSegments, Pairs: []DeclaredSet{{
		Atoms: []Atom{{R: 0.2, P: 0.5, Q: 0.2}, {R: 0.2, P: 0.2, Q: 0.5}},
		Bins: []Bin{
			{R: a, P: 1.75 * a, Q: a, Lo: [2]float64{1, 1}, Hi: [2]float64{2.5, 1}},
			{R: a, P: a, Q: 1.75 * a, Lo: [2]float64{1, 1}, Hi: [2]float64{1, 2.5}},
		}}}}, Name: "segments"}
	em, err := FloorEpsilon(matrix, eps0, 1, 100, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	es, err := FloorEpsilon(seg, eps0, 1, 100, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if em.Lower <= 0 || es.Lower != 0 || es.Upper < em.Upper {
		t.Errorf("matrix %+v (want a lower bound), segments %+v (want none, and an upper bound above the matrix's)", em, es)
	}
	c, err := NewComposition(Part{Mech: seg, N: 1, Floor: 100, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Epsilon(1e-6); err != nil || r.Lower != 0 {
		t.Errorf("segments over two rounds: %+v, %v; want no lower bound", r, err)
	}
	for _, f := range []func() error{
		func() error { _, err := FloorEpsilon(WorstOf(KRR(2), KRR(50)), 2, 1, 100, 1e-6); return err },
		func() error { _, err := FloorDelta(Joint(KRR(2), KRR(3)), 2, 1, 100, 0.5); return err },
		func() error {
			_, err := NewComposition(Part{Mech: Generic(), Eps0: 2, N: 10, Floor: 5, Rounds: 2})
			return err
		},
		func() error {
			_, err := Calibrate(Parallel([]float64{0.5, 0.5}, KRR(2), KRR(3)), Target{Eps: 1, Delta: 1e-6, N: 100, Floor: 50})
			return err
		},
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "floor") {
			t.Errorf("a floor for a mechanism without a sampled blanket: %v", err)
		}
	}
}

// TestFloorCoupledLargestGamma: the coupled batch is chosen at the largest
// blanket mass among the candidates, where the coupling's tail is worst
// (found in review: at the smallest, a candidate of gamma 0.5 was counted
// at 561,000 draws where its coupling allows 78,000).
func TestFloorCoupledLargestGamma(t *testing.T) {
	d := &Decomposition{Upper: []AtomSet{
		{{R: 0.25, P: 0.5, Q: 0.25}, {R: 0.25, P: 0.25, Q: 0.5}},
		{{R: 0.018, P: 0.9, Q: 0.036}, {R: 0.018, P: 0.036, Q: 0.9}},
	}}
	n, g := floorCoupledPart(d, 40000, 20000)
	if g != 0.5 || n != floorCoupledN(40000, 20000, 0.5, floorEta) || n > 40000+40000 {
		t.Errorf("n_c = %d at gamma %g; want the coupling at gamma 0.5 (%d)", n, g, floorCoupledN(40000, 20000, 0.5, floorEta))
	}
}
