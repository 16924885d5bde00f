package accountant

import (
	"errors"
	"math"
	"testing"
)

// Tolerances of the composition tests.
const (
	// rrExactTol: with n = 1 the single-report profile of k-RR is linear in
	// a = e^eps with one kink at e^eps0, a lattice point, so both PLDs are
	// the exact pair and only floating point separates the composition
	// from the closed form (the margins in convolve.go are ~1e-12 * T).
	rrExactTol = 1e-8
	// soundSlack: "never below the exact value" up to floating-point
	// noise of the oracles themselves (merged losses, summation), which is
	// below 1e-12 relative plus 1e-15 absolute on these cases.
	soundSlack = 1e-9
	soundAbs   = 1e-15
	// pldT1Tol: at T = 1 the PLD path adds only the connect-the-dots grid
	// error, at most ~(1/(2 gridPerSigma))^2 of the loss variance, i.e. a
	// fraction of a percent in eps (measured: <= 0.1%).
	pldT1Tol = 0.005
)

func mustCompose(t *testing.T, parts ...Part) *Composition {
	t.Helper()
	c, err := NewComposition(parts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHorizonRRClosedForm: without shuffling (n = 1), T rounds of k-RR
// against the exact T-fold composition in closed form (trinomial sums,
// oracleRRComposedDelta), both sides.
func TestHorizonRRClosedForm(t *testing.T) {
	for _, k := range []int{2, 5} {
		for _, eps0 := range []float64{0.5, 1, 3} {
			for _, T := range []int{2, 10, 100} {
				c := mustCompose(t, Part{Mech: KRR(k), Eps0: eps0, N: 1, Rounds: T})
				h := c.plds(1e-9, 0)
				for _, eps := range []float64{0, 0.5, 1, 2, 3.3, 7, 20} {
					ex := oracleRRComposedDelta(eps0, k, T, eps)
					u := composedDelta(h.upper, eps, true)
					l := composedDelta(h.lower, eps, false)
					if u < ex*(1-soundSlack)-soundAbs || l > ex*(1+soundSlack)+soundAbs {
						t.Errorf("k=%d eps0=%g T=%d eps=%g: exact %.12g not in [%.12g, %.12g]", k, eps0, T, eps, ex, l, u)
					}
					if ex > 1e-200 && (math.Abs(u/ex-1) > rrExactTol || math.Abs(l/ex-1) > rrExactTol) {
						t.Errorf("k=%d eps0=%g T=%d eps=%g: exact %.12g, bounds [%.12g, %.12g] beyond %g", k, eps0, T, eps, ex, l, u, rrExactTol)
					}
				}
			}
		}
	}
}

// TestHorizonTinyExact: n <= 6, T = 2, 3, k-RR with k = 3, against exact
// enumeration of the shuffled output laws as multisets: the upper bound is
// above the composition of every dataset pair tried and above the exact
// composition of the blanket pair (oracleBlanketPLD); the blanket-pair
// lower side is below the latter; the lower bound is below the composed
// lower-bound datasets (x, x3, ..., x3) vs (x', x3, ..., x3).
func TestHorizonTinyExact(t *testing.T) {
	k, eps0 := 3, 1.5
	R := oracleKRRRows(k, eps0)
	d, err := KRR(k).Decompose(eps0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4, 6} {
		blanket := oracleBlanketPLD(d.Upper[0], n)
		// Dataset pairs: user 1 is x = 0 or x' = 1; the others all x3 = 2
		// (the lower-bound datasets), all x, or mixed.
		others := [][]int{make([]int, n-1), make([]int, n-1), make([]int, n-1)}
		for i := range n - 1 {
			others[0][i] = 2
			others[1][i] = 0
			others[2][i] = i % 3
		}
		var laws [][2]map[string]float64
		for _, o := range others {
			laws = append(laws, [2]map[string]float64{
				oracleShuffledLaw(R, append([]int{0}, o...)),
				oracleShuffledLaw(R, append([]int{1}, o...)),
			})
		}
		for _, T := range []int{2, 3} {
			c := mustCompose(t, Part{Mech: KRR(k), Eps0: eps0, N: n, Rounds: T})
			h := c.plds(1e-9, 0)
			for _, eps := range []float64{0, 0.1, 0.3, 0.6, 1, 2, 3, 4} {
				plds := make([][]oracleAtom, T)
				for i := range plds {
					plds[i] = blanket
				}
				exBlanket := oracleComposedDeltaPLD(plds, eps)
				u := composedDelta(h.upper, eps, true)
				pl := composedDelta(h.pairLower, eps, false)
				l := composedDelta(h.lower, eps, false)
				if u < exBlanket*(1-soundSlack)-soundAbs {
					t.Errorf("n=%d T=%d eps=%g: upper %.10g < exact blanket composition %.10g", n, T, eps, u, exBlanket)
				}
				if pl > exBlanket*(1+soundSlack)+soundAbs {
					t.Errorf("n=%d T=%d eps=%g: blanket lower side %.10g > exact %.10g", n, T, eps, pl, exBlanket)
				}
				for i, law := range laws {
					pairs := make([][2]map[string]float64, T)
					for r := range pairs {
						pairs[r] = law
					}
					ex := oracleComposedDelta(pairs, eps)
					if u < ex*(1-soundSlack)-soundAbs {
						t.Errorf("n=%d T=%d eps=%g: upper %.10g < dataset pair %d composed %.10g", n, T, eps, u, i, ex)
					}
					if i == 0 && l > ex*(1+soundSlack)+soundAbs {
						t.Errorf("n=%d T=%d eps=%g: lower %.10g > lower-bound datasets composed %.10g", n, T, eps, l, ex)
					}
				}
			}
		}
	}
}

// TestHorizonSingleRound: the PLD path at T = 1 against the single-report
// engine: never below the exact value (the engine's certified Upper is
// within Tolerance of it), within pldT1Tol of the engine's upper bound; the
// lower side never above the exact lower-bound datasets; and the public
// API answers one report exactly as Epsilon. The generic bound at eps0 = 2
// (15 s of CPU: TestHorizonSingleRoundDeep, make audit) is here at eps0 = 4.
func TestHorizonSingleRound(t *testing.T) {
	checkHorizonSingleRound(t, []singleRoundCase{
		{KRR(100), 4, 10_000},
		{Generic(), 4, 10_000},
		{Joint(KRR(4), KRR(4)), 3, 5000},
		{Parallel([]float64{0.5, 0.5}, KRR(3), KRR(8)), 2, 2000},
	})
}

// singleRoundCase is one report of m at eps0 shuffled among n.
type singleRoundCase struct {
	m    Mechanism
	eps0 float64
	n    int
}

// checkHorizonSingleRound runs TestHorizonSingleRound's checks on cases.
func checkHorizonSingleRound(t *testing.T, cases []singleRoundCase) {
	t.Helper()
	for _, cs := range cases {
		c := mustCompose(t, Part{Mech: cs.m, Eps0: cs.eps0, N: cs.n})
		want, err := Epsilon(cs.m, cs.eps0, cs.n, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Epsilon(1e-6)
		if err != nil {
			t.Fatal(err)
		}
		// 1e-12: the engine sums in parallel, so two runs may differ in
		// the last digits.
		if math.Abs(got.Upper/want.Upper-1) > 1e-12 || math.Abs(got.Lower/want.Lower-1) > 1e-12 || got.Amplified != want.Amplified {
			t.Errorf("%s: one report through Composition = %+v, Epsilon = %+v", cs.m, got, want)
		}
		h := c.plds(1e-6, 0)
		up := epsUpperOf(h.upper, 1e-6, c.LocalEps())
		lo := epsLowerOf(h.lower, 1e-6, c.LocalEps())
		if up < want.Upper/(1+Tolerance) || up > want.Upper*(1+pldT1Tol) {
			t.Errorf("%s: PLD upper at T = 1 = %.6g, engine upper %.6g (exact >= %.6g)", cs.m, up, want.Upper, want.Upper/(1+Tolerance))
		}
		if lo > want.Lower*(1+Tolerance) || lo > up {
			t.Errorf("%s: PLD lower at T = 1 = %.6g above the exact lower bound (<= %.6g) or the upper %.6g", cs.m, lo, want.Lower*(1+Tolerance), up)
		}
	}
}

// TestHorizonHeterogeneousIdentical: a composition of identical parts is
// the homogeneous composition (same lattice, same PLDs, only the order of
// the products differs). At n = 5000; n = 20,000 is
// TestHorizonHeterogeneousIdenticalDeep (make audit).
func TestHorizonHeterogeneousIdentical(t *testing.T) {
	checkHorizonHeterogeneousIdentical(t, 5000)
}

// checkHorizonHeterogeneousIdentical runs TestHorizonHeterogeneousIdentical
// for k-RR (k = 20, eps0 = 3) shuffled among n.
func checkHorizonHeterogeneousIdentical(t *testing.T, n int) {
	t.Helper()
	p := Part{Mech: KRR(20), Eps0: 3, N: n}
	homo := p
	homo.Rounds = 6
	a := mustCompose(t, homo)
	p1, p2, p3 := p, p, p
	p1.Rounds, p2.Rounds, p3.Rounds = 1, 2, 3
	b := mustCompose(t, p1, p2, p3)
	ra, err := a.Epsilon(1e-7)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Epsilon(1e-7)
	if err != nil {
		t.Fatal(err)
	}
	// 1e-6 relative: the same PLDs convolved in a different order; the
	// root finder stops at relative width rootTol but starts from the same
	// bracket and sees the same function up to rounding.
	if math.Abs(ra.Upper/rb.Upper-1) > 1e-6 || math.Abs(ra.Lower/rb.Lower-1) > 1e-6 {
		t.Errorf("homogeneous %+v, heterogeneous of identical parts %+v", ra, rb)
	}
}

// TestHorizonMonotone: eps grows with T and eps0 and shrinks with n, for
// well separated values; lower <= upper everywhere. n = 80,000 and eps0 =
// 2.5 are TestHorizonMonotoneDeep's (make audit).
func TestHorizonMonotone(t *testing.T) {
	checkHorizonMonotone(t, []int{5000, 20_000}, []float64{2, 3})
}

// checkHorizonMonotone runs TestHorizonMonotone's checks over T, then over
// ns and eps0s (each increasing).
func checkHorizonMonotone(t *testing.T, ns []int, eps0s []float64) {
	t.Helper()
	base := Part{Mech: KRR(10), Eps0: 3, N: 20_000, Rounds: 10}
	eps := func(p Part) EpsilonResult {
		r, err := ComposeEpsilon([]Part{p}, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		if !(r.Lower <= r.Upper) || r.Lower <= 0 {
			t.Errorf("%+v: lower %g, upper %g", p, r.Lower, r.Upper)
		}
		return r
	}
	prev := 0.0
	c := mustCompose(t, base)
	for _, T := range []int{1, 2, 5, 20, 100} {
		ct, err := c.WithRounds(T)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ct.Epsilon(1e-6)
		if err != nil {
			t.Fatal(err)
		}
		if r.Upper <= prev {
			t.Errorf("T=%d: eps %g <= eps at fewer rounds %g", T, r.Upper, prev)
		}
		prev = r.Upper
	}
	prev = math.Inf(1)
	for _, n := range ns {
		p := base
		p.N = n
		if r := eps(p); r.Upper >= prev {
			t.Errorf("n=%d: eps %g >= eps at smaller n %g", n, r.Upper, prev)
		} else {
			prev = r.Upper
		}
	}
	prev = 0
	for _, e0 := range eps0s {
		p := base
		p.Eps0 = e0
		if r := eps(p); r.Upper <= prev {
			t.Errorf("eps0=%g: eps %g <= eps at smaller eps0 %g", e0, r.Upper, prev)
		} else {
			prev = r.Upper
		}
	}
}

// TestHorizonRoundTrip: eps(delta(eps)) returns eps, within the certified
// width of the two queries (HorizonTolerance each way).
func TestHorizonRoundTrip(t *testing.T) {
	c := mustCompose(t, Part{Mech: KRR(20), Eps0: 3, N: 50_000, Rounds: 30})
	for _, eps := range []float64{0.3, 0.5} {
		d, err := c.Delta(eps)
		if err != nil {
			t.Fatal(err)
		}
		if !(d.Lower <= d.Upper) || d.Upper <= 0 {
			t.Fatalf("eps=%g: delta [%g, %g]", eps, d.Lower, d.Upper)
		}
		e, err := c.Epsilon(d.Upper)
		if err != nil {
			t.Fatal(err)
		}
		if e.Upper > eps*(1+rootTol) || e.Upper < eps/(1+2*HorizonTolerance) {
			t.Errorf("eps=%g: delta %g, back to eps %g", eps, d.Upper, e.Upper)
		}
	}
}

// TestHorizonCalibrate: the calibrated eps0 meets the target over T rounds,
// is within 1% of the largest that does (1.01 eps0 misses it), is at least
// basic composition's and at most one round's. For k-RR with k = 100; k =
// 10 (twice the CPU) is TestHorizonCalibrateDeep (make audit).
func TestHorizonCalibrate(t *testing.T) {
	checkHorizonCalibrate(t, KRR(100))
}

// checkHorizonCalibrate runs TestHorizonCalibrate's checks for m over 30
// rounds at n = 10,000.
func checkHorizonCalibrate(t *testing.T, m Mechanism) {
	t.Helper()
	tg := Target{Eps: 1, Delta: 1e-6, N: 10_000, Rounds: 30}
	c, err := Calibrate(m, tg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ComposeEpsilon([]Part{{Mech: m, Eps0: c.Eps0, N: tg.N, Rounds: tg.Rounds}}, tg.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if r.Upper > tg.Eps || c.Achieved.Upper > tg.Eps {
		t.Errorf("calibrated eps0 %g gives eps %g (achieved %g) > %g", c.Eps0, r.Upper, c.Achieved.Upper, tg.Eps)
	}
	more, err := ComposeEpsilon([]Part{{Mech: m, Eps0: c.Eps0 * 1.01, N: tg.N, Rounds: tg.Rounds}}, tg.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if more.Upper <= tg.Eps {
		t.Errorf("1.01 eps0 = %g still meets the target (eps %g)", 1.01*c.Eps0, more.Upper)
	}
	basic, err := Calibrate(m, Target{Eps: tg.Eps / 30, Delta: tg.Delta / 30, N: tg.N})
	if err != nil {
		t.Fatal(err)
	}
	one, err := Calibrate(m, Target{Eps: tg.Eps, Delta: tg.Delta, N: tg.N})
	if err != nil {
		t.Fatal(err)
	}
	if c.Eps0 < basic.Eps0 || c.Eps0 > one.Eps0 {
		t.Errorf("eps0 %g not in [basic %g, one round %g]", c.Eps0, basic.Eps0, one.Eps0)
	}
}

// TestHorizonBaselines: the composition beats every composition baseline
// that applies, and the baselines are ordered as theory says (KOV15 is
// optimal for a single (eps_1, delta_1) guarantee, so never above basic
// composition).
func TestHorizonBaselines(t *testing.T) {
	c := mustCompose(t, Part{Mech: KRR(20), Eps0: 3, N: 20_000, Rounds: 50})
	r, err := c.Epsilon(1e-6)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.EpsilonBaselines(1e-6)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range CompositionBaselineNames {
		v := b[name]
		if v == nil {
			t.Fatalf("%s: nil", name)
		}
		if *v < r.Upper {
			t.Errorf("%s = %g below the composition's upper bound %g", name, *v, r.Upper)
		}
	}
	if *b[BaselineKOV15] > *b[BaselineBasicComposition]*(1+1e-9) {
		t.Errorf("kov15 %g > basic composition %g", *b[BaselineKOV15], *b[BaselineBasicComposition])
	}
	for _, name := range BaselineNames {
		if b[name] != nil {
			t.Errorf("single-report baseline %s = %g applies to one report only", name, *b[name])
		}
	}
}

func TestHorizonErrors(t *testing.T) {
	good := Part{Mech: KRR(4), Eps0: 1, N: 100}
	cases := []struct {
		name  string
		parts []Part
	}{
		{"no parts", nil},
		{"nil mechanism", []Part{{Eps0: 1, N: 100}}},
		{"negative rounds", []Part{{Mech: KRR(4), Eps0: 1, N: 100, Rounds: -1}}},
		{"too many rounds", []Part{{Mech: KRR(4), Eps0: 1, N: 100, Rounds: MaxRounds + 1}}},
		{"total rounds", []Part{{Mech: KRR(4), Eps0: 1, N: 100, Rounds: MaxRounds}, good}},
		{"n = 0", []Part{{Mech: KRR(4), Eps0: 1}}},
		{"eps0 NaN", []Part{{Mech: KRR(4), Eps0: math.NaN(), N: 100}}},
		{"eps0 missing", []Part{{Mech: KRR(4), N: 100}}},
	}
	for _, cs := range cases {
		if _, err := NewComposition(cs.parts...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", cs.name, err)
		}
	}
	c := mustCompose(t, good)
	if _, err := c.WithRounds(1, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("WithRounds with two counts for one part: err = %v", err)
	}
	if _, err := c.Epsilon(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("delta 0: err = %v", err)
	}
	if _, err := c.Delta(math.Inf(1)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("eps +Inf: err = %v", err)
	}
	if _, err := Calibrate(KRR(4), Target{Eps: 1, Delta: 1e-6, N: 100, Rounds: -3}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("calibrate rounds -3: err = %v", err)
	}
}

// FuzzComposition: any inputs give an error or bounds with
// 0 <= lower <= upper <= the local eps of the composition.
func FuzzComposition(f *testing.F) {
	f.Add(4, 1.5, 100, 3, 2, 2.0, 50, 1, 1e-6)
	f.Add(2, 0.3, 1, 10, 3, 5.0, 1000, 2, 1e-3)
	f.Add(100, 8.0, 5000, 1, 1, 0.1, 7, 1, 1e-12)
	f.Fuzz(func(t *testing.T, k1 int, e1 float64, n1, r1, k2 int, e2 float64, n2, r2 int, delta float64) {
		if n1 > 1_000_000 || n2 > 1_000_000 || r1 > 500 || r2 > 500 || k1 > 1000 || k2 > 1000 {
			t.Skip("too slow for a fuzz iteration")
		}
		parts := []Part{{Mech: KRR(k1), Eps0: e1, N: n1, Rounds: r1}, {Mech: KRR(k2), Eps0: e2, N: n2, Rounds: r2}}
		c, err := NewComposition(parts...)
		if err != nil {
			return
		}
		r, err := c.Epsilon(delta)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !(0 <= r.Lower && r.Lower <= r.Upper && r.Upper <= c.LocalEps()*(1+1e-12)) {
			t.Fatalf("%+v: bounds %+v, local eps %g", parts, r, c.LocalEps())
		}
	})
}
