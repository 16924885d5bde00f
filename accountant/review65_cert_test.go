package accountant

import (
	"math"
	"testing"
	"time"
)

// Review 65: claim 1, checked directly. Wherever one report's lower bound
// (the largest evaluate(...).lo over Decompose(eps0).Lower, exactly as
// lowerExceeds computes it) is positive, the horizon probe's upper bound d
// (composedDelta of the pessimistic PLDs, exactly as searchRoundsWith's
// probe) must be at least it: lo <= delta of a real pair of one report <=
// that report's dominating pair <= the composition of T such pairs.
// Margin 1, not 2: a d below lo at all would be a bug somewhere.

func r65LowMax(m Mechanism, eps0 float64, t Target) (float64, bool) {
	d, err := m.Decompose(eps0)
	if err != nil || len(d.Lower) == 0 {
		return 0, false
	}
	lo := 0.0
	for _, s := range d.Lower {
		lo = math.Max(lo, evaluate(s, t.N, t.Eps, hRelStart, true).lo)
	}
	return lo, true
}

func r65HorizonProbe(t *testing.T, m Mechanism, eps0 float64, tg Target) (d float64, local float64) {
	c, err := NewComposition(Part{Mech: m, Eps0: eps0, N: tg.N, Rounds: tg.Rounds, Floor: tg.Floor})
	if err != nil {
		t.Fatalf("%s eps0 %g: %v", m, eps0, err)
	}
	le := c.LocalEps()
	if le <= tg.Eps {
		return 0, le
	}
	return composedDelta(c.plds(tg.Delta, 0, true).upper, tg.Eps, true), le
}

func TestReview65LowerBelowHorizonUpper(t *testing.T) { review65LowerBelowHorizonUpper(t, false) }

// review65LowerBelowHorizonUpper is the grid; full adds the tiny-delta
// target and the costly mechanisms (make audit).
func review65LowerBelowHorizonUpper(t *testing.T, full bool) {
	start := time.Now()
	mechs := []Mechanism{
		KRR(2), KRR(3), KRR(10), KRR(1000), Generic(), hadamardFamily(8),
		Joint(KRR(4), KRR(3)),
		Parallel([]float64{0.5, 0.5}, KRR(4), KRR(5)),
		Subsample(0.3, KRR(5)),
	}
	targets := []Target{
		{Eps: 0.3, Delta: 1e-3, N: 2, Rounds: 2},
		{Eps: 1.5, Delta: 1e-8, N: 50, Rounds: 3},
		{Eps: 0.5, Delta: 1e-15, N: 200, Rounds: 2},
		{Eps: 1, Delta: 1e-6, N: 3000, Rounds: 7},
	}
	if !full {
		// The quick grid (< 5 s): the audit's (about 11 s) adds the
		// tiny-delta target and the costly mechanisms.
		mechs = []Mechanism{KRR(2), KRR(10), Generic(), Joint(KRR(4), KRR(3)), Parallel([]float64{0.5, 0.5}, KRR(4), KRR(5)), Subsample(0.3, KRR(5))}
		targets = []Target{targets[0], targets[1], targets[3]}
	}
	fired, checked := 0, 0
	minRatio := math.Inf(1)
	for _, m := range mechs {
		for _, tg := range targets {
			for eps0 := 0.15; eps0 <= 16; eps0 *= 1.9 {
				lo, ok := r65LowMax(m, eps0, tg)
				if !ok || !(lo > 0) {
					continue
				}
				t0 := time.Now()
				d, le := r65HorizonProbe(t, m, eps0, tg)
				if dt := time.Since(t0); dt > 300*time.Millisecond || (d < 1 && d/lo < 1.2) {
					t.Logf("%s %+v eps0 %.4g: lo %.6g d %.6g (%v)", m, tg, eps0, lo, d, dt)
				}
				checked++
				if lo > 2*tg.Delta {
					fired++
				}
				if le <= tg.Eps {
					t.Errorf("%s %+v eps0 %g: lo %.3g > 0 but the horizon's local eps %g <= eps", m, tg, eps0, lo, le)
					continue
				}
				minRatio = math.Min(minRatio, d/lo)
				if !(d >= lo) {
					t.Errorf("%s %+v eps0 %g: one report's lower bound %.6g above the horizon's upper bound %.6g", m, tg, eps0, lo, d)
				}
			}
		}
	}
	t.Logf("checked %d points (certificate fires at %d); smallest d/lo %.4g; %v", checked, fired, minRatio, time.Since(start))
	if fired < 20 {
		t.Errorf("the certificate fired at %d points only", fired)
	}
}

// Claim 3: the probe's answer at an eps0 does not depend on what ran
// before it (the evaluate memo, the decomposition memo, the pmf and
// log-factorial tables, the FFT pools): the same bits fresh (after
// ForgetMemo) and after the certificate and other probes have filled them.
func TestReview65ProbeIndependentOfHistory(t *testing.T) {
	cases := []struct {
		m  Mechanism
		tg Target
		x  float64
	}{
		{KRR(10), Target{Eps: 0.5, Delta: 1e-9, N: 3000, Rounds: 6}, 1.3},
		{hadamardFamily(8), Target{Eps: 1, Delta: 1e-6, N: 2000, Rounds: 4}, 2.1},
		{Subsample(0.3, KRR(5)), Target{Eps: 1, Delta: 1e-6, N: 1000, Rounds: 3}, 2.7},
	}
	probe := func(m Mechanism, tg Target, x float64) (float64, float64) {
		c, err := NewComposition(Part{Mech: m, Eps0: x, N: tg.N, Rounds: tg.Rounds})
		if err != nil {
			t.Fatal(err)
		}
		h := c.plds(tg.Delta, 0, true)
		return composedDelta(h.upper, tg.Eps, true), epsUpperOf(h.upper, tg.Delta, tg.Eps)
	}
	for _, c := range cases {
		ForgetMemo()
		d1, e1 := probe(c.m, c.tg, c.x)
		ForgetMemo()
		// History: the certificate at the halving points above x, the
		// probes there, the certificate at x, then x.
		for _, y := range []float64{8 * c.x, 4 * c.x, 2 * c.x} {
			lowerExceeds(c.m, y, c.tg)
			probe(c.m, c.tg, y)
		}
		lowerExceeds(c.m, c.x, c.tg)
		probe(c.m, c.tg, c.x/2)
		d2, e2 := probe(c.m, c.tg, c.x)
		d3, e3 := probe(c.m, c.tg, c.x) // memo hits
		if math.Float64bits(d1) != math.Float64bits(d2) || math.Float64bits(d1) != math.Float64bits(d3) ||
			math.Float64bits(e1) != math.Float64bits(e2) || math.Float64bits(e1) != math.Float64bits(e3) {
			t.Errorf("%s at %g: fresh (%.17g, %.17g), after history (%.17g, %.17g), again (%.17g, %.17g)", c.m, c.x, d1, e1, d2, e2, d3, e3)
		}
	}
}

// r65Asym is a fixed asymmetric 4x5 randomizer family: R[x][y] proportional
// to exp(eps0 M[x][y] / 2) with M in [0, 1], so every ratio is at most
// e^eps0 (e^{eps0/2} from the entries, as much from the normalisations)
// (a matrix at every eps0; with atoms true, its decomposition's pairs and
// triples re-declared in the atoms form).
func r65Asym(atoms bool) Mechanism {
	M := [][]float64{{1, 0, 0.3, 0.7, 0.1}, {0, 1, 0.5, 0.2, 0.9}, {0.4, 0.6, 1, 0, 0.2}, {0.8, 0.1, 0, 1, 0.5}}
	name := "r65asym"
	if atoms {
		name += "-atoms"
	}
	return FuncMech{Name: name, Declare: func(e0 float64) (*Declaration, error) {
		rows := make([][]float64, len(M))
		for x := range M {
			rows[x] = make([]float64, len(M[x]))
			var s float64
			for y := range M[x] {
				rows[x][y] = math.Exp(e0 / 2 * M[x][y])
				s += rows[x][y]
			}
			for y := range rows[x] {
				rows[x][y] /= s
			}
		}
		mx, err := NewMatrix(rows)
		if err != nil {
			return nil, err
		}
		// Declared at the matrix's own level (its largest log ratio).
		decl := &Declaration{Eps0: 0, Form: FormMatrix, Matrix: mx}
		d, err := Decompose(decl)
		if err != nil {
			return nil, err
		}
		if d.LocalEps > e0*(1+1e-12) {
			return nil, argError("r65asym", e0, "level above budget")
		}
		if !atoms {
			return &Declaration{Eps0: d.LocalEps, Form: FormMatrix, Matrix: mx}, nil
		}
		out := &Declaration{Eps0: d.LocalEps, Form: FormAtoms}
		for _, u := range d.Upper {
			out.Pairs = append(out.Pairs, DeclaredSet{Atoms: u})
		}
		for _, l := range d.Lower {
			out.Triples = append(out.Triples, DeclaredSet{Atoms: l})
		}
		return out, nil
	}}
}

func TestReview65LowerBelowHorizonUpperAsymmetric(t *testing.T) {
	fired := 0
	for _, m := range []Mechanism{r65Asym(false), r65Asym(true)} {
		for _, tg := range []Target{
			{Eps: 0.3, Delta: 1e-3, N: 3, Rounds: 2},
			{Eps: 1, Delta: 1e-7, N: 300, Rounds: 4},
		} {
			for eps0 := 0.5; eps0 <= 16; eps0 *= 2 {
				lo, ok := r65LowMax(m, eps0, tg)
				if !ok {
					t.Fatalf("%s at %g: no lower-bound triples", m, eps0)
				}
				if !(lo > 0) {
					continue
				}
				if lo > 2*tg.Delta {
					fired++
				}
				d, _ := r65HorizonProbe(t, m, eps0, tg)
				if !(d >= lo) {
					t.Errorf("%s %+v eps0 %g: one report's lower bound %.6g above the horizon's upper bound %.6g", m, tg, eps0, lo, d)
				}
			}
		}
	}
	if fired < 8 {
		t.Errorf("the certificate fired at %d points only", fired)
	}
}

// The margin: lowerExceeds fires only above twice delta (a lower bound
// between delta and 2 delta does not settle a probe).
func TestReview65LowerExceedsMargin(t *testing.T) {
	m, eps0 := KRR(10), 6.0
	tg := Target{Eps: 1, Delta: 1e-6, N: 1000, Rounds: 3}
	lo, _ := r65LowMax(m, eps0, tg)
	if !(lo > 1e-6) {
		t.Fatalf("lo %g", lo)
	}
	for _, c := range []struct {
		div  float64
		want bool
	}{{1.2, false}, {1.9, false}, {2.1, true}, {5, true}} {
		tg.Delta = lo / c.div
		if got := lowerExceeds(m, eps0, tg); got != c.want {
			t.Errorf("delta = lo/%g: lowerExceeds %v, want %v", c.div, got, c.want)
		}
	}
}

// End to end, on the mechanisms TestHorizonFailsSameSearch does not cover
// (asymmetric matrix and atoms declarations, joint, parallel, subsample):
// the same eps0 and proof, bit for bit, with and without the certificate,
// each run on a fresh memo.
func TestReview65SameSearchMoreMechanisms(t *testing.T) { review65SameSearchMoreMechanisms(t, false) }

// review65SameSearchMoreMechanisms is the comparison; full adds the
// asymmetric and parallel mechanisms (make audit).
func review65SameSearchMoreMechanisms(t *testing.T, full bool) {
	for _, c := range []struct {
		m  Mechanism
		tg Target
	}{
		{r65Asym(false), Target{Eps: 1, Delta: 1e-6, N: 60, Rounds: 5}},
		{r65Asym(true), Target{Eps: 0.8, Delta: 1e-7, N: 80, Rounds: 3}},
		{Joint(KRR(4), KRR(3)), Target{Eps: 1, Delta: 1e-6, N: 40, Rounds: 4}},
		{Joint(KRR(4), KRR(3)), Target{Eps: 1, Delta: 1e-6, N: 200, Rounds: 40}},
		{Parallel([]float64{0.3, 0.7}, KRR(4), KRR(6)), Target{Eps: 1, Delta: 1e-6, N: 60, Rounds: 5}},
		{Subsample(0.4, KRR(5)), Target{Eps: 0.7, Delta: 1e-6, N: 50, Rounds: 6}},
		{Subsample(0.4, KRR(5)), Target{Eps: 0.7, Delta: 1e-6, N: 300, Rounds: 50}},
	} {
		if c.tg.Rounds > 20 && !full {
			continue
		}
		if _, slow := c.m.(FuncMech); slow && !full {
			continue
		}
		if _, slow := c.m.(ParallelMech); slow && !full {
			continue
		}
		skipped := 0
		t0 := time.Now()
		ForgetMemo()
		with, pw, err := searchRoundsWith(c.m, c.tg, func(e float64) bool {
			f := lowerExceeds(c.m, e, c.tg)
			if f {
				skipped++
			}
			return f
		})
		if err != nil {
			t.Fatalf("%s: %v", c.m, err)
		}
		ForgetMemo()
		without, pwo, err := searchRoundsWith(c.m, c.tg, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.m, err)
		}
		if math.Float64bits(with) != math.Float64bits(without) || pw() != pwo() {
			t.Errorf("%s: %.17g %+v with, %.17g %+v without", c.m, with, pw(), without, pwo())
		}
		t.Logf("%s: eps0 %.6g, %d probes skipped (%v)", c.m, with, skipped, time.Since(t0))
	}
}

// A declaration whose triple is not dominated by its pairs (a plugin's
// wrong claim; Validate cannot see it): the triple's lower bound certifies
// points the pairs prove. The search drops the certificate when a probe
// contradicts it (largest.go, point 6) and returns what it returns without
// one.
func TestReview65InconsistentTriple(t *testing.T) {
	m := FuncMech{Name: "r65-bad-triple", Declare: func(e0 float64) (*Declaration, error) {
		// Pairs: binary randomized response at e0/20 (small loss);
		// triple: the generic two-output triple at e0.
		a := math.Exp(e0/20) / (math.Exp(e0/20) + 1)
		b := 1 - a
		e := math.Exp(e0)
		p, q := e/(e+1), 1/(e+1)
		return &Declaration{Eps0: e0, Form: FormAtoms,
			Pairs:   []DeclaredSet{{Atoms: []Atom{{R: b, P: a, Q: b}, {R: b, P: b, Q: a}}}},
			Triples: []DeclaredSet{{Atoms: []Atom{{R: 0.5, P: p, Q: q}, {R: 0.5, P: q, Q: p}}}},
		}, nil
	}}
	tg := Target{Eps: 0.5, Delta: 1e-6, N: 50, Rounds: 3}
	if err := Validate(func() *Declaration { d, _ := m.Declare(4); return d }()); err != nil {
		t.Fatalf("declaration refused: %v", err)
	}
	contradicted := false
	w, pw, errW := searchRoundsWith(m, tg, nil)
	c, pc, errC := searchRoundsWith(m, tg, func(e float64) bool {
		f := lowerExceeds(m, e, tg)
		if f && e < w {
			contradicted = true
		}
		return f
	})
	if errW != nil || errC != nil {
		t.Fatalf("without the certificate: %v; with it: %v", errW, errC)
	}
	if !contradicted {
		t.Fatalf("the certificate never fired below the answer %g: the case no longer tests a wrong one", w)
	}
	if math.Float64bits(w) != math.Float64bits(c) || pw() != pc() {
		t.Errorf("eps0 %.17g %+v with a wrong certificate, %.17g %+v without", c, pc(), w, pw())
	}
}
