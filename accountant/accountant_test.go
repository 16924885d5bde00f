package accountant_test

// Property and accuracy tests of the engine (SetDelta, Delta, Epsilon,
// Calibrate) against the references of exact_test.go, plus argument and
// declaration errors.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// Tolerances shared by the tests below.
const (
	// refTol is the relative slack granted to the float64 references when a
	// bound is compared with them: exactDelta agrees with 200-bit arithmetic
	// to 1e-13 and krrExactDelta with exactDelta to 1e-12 (exact_test.go),
	// so a violation smaller than 1e-9 could be the references' own
	// rounding, while any real flaw of the engine's lattice or windowing
	// shows up far above it.
	refTol = 1e-9
	// specTightness is docs/accounting.md §7's accuracy requirement: eps_up within
	// 0.5% above the exact value, eps_low within 0.5% below it.
	specTightness = 1.005
	// maxEnum caps the count vectors exactDelta may enumerate per call in
	// tests that call it once per case; maxEnumSolve caps those that invert
	// it (about 30 calls per case).
	maxEnum      = 3e6
	maxEnumSolve = 3e5
)

// namedSet is an atom set under test with the local eps of its mechanism.
type namedSet struct {
	name string
	set  accountant.AtomSet
	eps0 float64
}

func mustDecompose(t testing.TB, m accountant.Mechanism, eps0 float64) *accountant.Decomposition {
	t.Helper()
	d, err := m.Decompose(eps0)
	if err != nil {
		t.Fatalf("%s.Decompose(%v): %v", m, eps0, err)
	}
	return d
}

func setsOf(name string, d *accountant.Decomposition) []namedSet {
	var out []namedSet
	for i, s := range d.Upper {
		out = append(out, namedSet{fmt.Sprintf("%s upper %d", name, i), s, d.LocalEps})
	}
	for i, s := range d.Lower {
		out = append(out, namedSet{fmt.Sprintf("%s lower %d", name, i), s, d.LocalEps})
	}
	return out
}

// matrixMech wraps dense rows as a matrix declaration whose eps0 is the
// largest log likelihood ratio.
func matrixMech(t testing.TB, rows [][]float64) (accountant.DeclaredMech, float64) {
	t.Helper()
	m, err := accountant.NewMatrix(rows)
	if err != nil {
		t.Fatalf("NewMatrix: %v", err)
	}
	decl := &accountant.Declaration{Form: accountant.FormMatrix, Matrix: m}
	d, err := accountant.Decompose(decl)
	if err != nil {
		t.Fatalf("Decompose: %v", err)
	}
	return accountant.DeclaredMech{Decl: decl, Name: "matrix"}, d.LocalEps
}

// referenceSets returns the atom sets SetDelta is checked on: k-RR upper and
// lower sets, the generic clone and generic lower sets, joint, parallel and
// subsampled compositions, and the pair and triple sets of random small LDP
// matrices.
func referenceSets(t *testing.T) []namedSet {
	var out []namedSet
	for _, k := range []int{2, 3, 10, 1000} {
		for _, eps0 := range []float64{0.5, 2, 5} {
			out = append(out, setsOf(fmt.Sprintf("krr k=%d eps0=%v", k, eps0), mustDecompose(t, accountant.KRR(k), eps0))...)
		}
	}
	for _, eps0 := range []float64{0.5, 2, 6} {
		out = append(out, namedSet{fmt.Sprintf("clone eps0=%v", eps0), accountant.CloneDecomposition(eps0).Upper[0], eps0})
		d := mustDecompose(t, accountant.Generic(), eps0)
		for i, s := range d.Lower {
			out = append(out, namedSet{fmt.Sprintf("generic eps0=%v lower %d", eps0, i), s, eps0})
		}
	}
	out = append(out, setsOf("joint(krr3,krr4) eps0=2", mustDecompose(t, accountant.Joint(accountant.KRR(3), accountant.KRR(4)), 2))...)
	out = append(out, setsOf("parallel(0.3 krr3, 0.7 generic) eps0=1.5", mustDecompose(t, accountant.Parallel([]float64{0.3, 0.7}, accountant.KRR(3), accountant.Generic()), 1.5))...)
	out = append(out, setsOf("subsample(0.25, krr5) eps0=3", mustDecompose(t, accountant.Subsample(0.25, accountant.KRR(5)), 3))...)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 6 {
		rows := randomMatrix(rng, 2+rng.IntN(3), 2+rng.IntN(3), 1+2*rng.Float64())
		m, err := accountant.NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		d, err := accountant.Decompose(&accountant.Declaration{Form: accountant.FormMatrix, Matrix: m})
		if err != nil {
			t.Fatalf("random matrix %d: %v", i, err)
		}
		out = append(out, setsOf(fmt.Sprintf("random matrix %d %v", i, rows), d)...)
	}
	return out
}

func TestSetDeltaBracketsExactSmallN(t *testing.T) {
	sets := referenceSets(t)
	for _, ns := range sets {
		for _, n := range []int{1, 2, 3, 5, 10, 20, 40} {
			if compositions(n, len(ns.set)+1) > maxEnum {
				continue
			}
			for _, f := range []float64{0, 0.05, 0.2, 0.5, 0.8} {
				eps := f * ns.eps0
				lo, hi, err := accountant.SetDelta(ns.set, n, eps)
				if err != nil {
					t.Errorf("%s n=%d eps=%v: %v", ns.name, n, eps, err)
					continue
				}
				exact := exactDelta(ns.set, n, eps)
				if !(lo >= 0 && lo <= hi) {
					t.Errorf("%s n=%d eps=%v: bracket [%.17g, %.17g] is not ordered and non-negative", ns.name, n, eps, lo, hi)
				}
				if lo > exact*(1+refTol) {
					t.Errorf("%s n=%d eps=%v: lower bound %.17g above exact %.17g (rel %.3g)", ns.name, n, eps, lo, exact, lo/exact-1)
				}
				if hi < exact*(1-refTol) {
					t.Errorf("%s n=%d eps=%v: upper bound %.17g below exact %.17g (rel %.3g)", ns.name, n, eps, hi, exact, 1-hi/exact)
				}
				// SetDelta's contract: hi(eps) is at most the lower bound,
				// hence the exact value, at eps/(1+0.5%).
				if eps > 0 {
					if ex := exactDelta(ns.set, n, eps/specTightness); hi > ex*(1+refTol) {
						t.Errorf("%s n=%d eps=%v: upper bound %.6g exceeds exact delta at eps/1.005 = %.6g (ratio %.6g): bracket wider than 0.5%% in eps (exact at eps: %.6g)", ns.name, n, eps, hi, ex, hi/ex, exact)
					}
				}
			}
		}
	}
}

// largeNCase is a k-RR point (k, eps0, n, eps) of the upper-set divergence.
type largeNCase struct {
	k    int
	eps0 float64
	n    int
	eps  float64
}

// largeNCases are k-RR points where the upper-set divergence runs from 1e-2
// down to 1e-17 (values from krrExactDelta), up to n = MaxN. The points at
// n = 1e5 whose reference costs about a second each are largeNAuditCases
// (make audit).
var largeNCases = []largeNCase{
	{10, 1, 100, 0.1},
	{10, 1, 100, 0.3},
	{10, 1, 1000, 0.03},
	{10, 1, 1000, 0.1},
	{10, 1, 10000, 0.01},
	{10, 1, 10000, 0.03},
	{100, 4, 100, 1},
	{100, 4, 1000, 0.3},
	{100, 4, 1000, 1},
	{100, 4, 10000, 0.1},
	{100, 4, 10000, 0.3},
	{1000, 6, 100000, 0.1},
	{1000, 6, 100000, 0.3},
	// Huge n up to MaxN: binary RR at large eps0, where almost every user
	// falls in the residual atom (the reference is cheap here).
	{2, 14, 1_000_000_000, 0.1},
	{2, 16.5, 3_000_000_000, 0.3},
	{2, 16.8, 10_000_000_000, 0.25},
	{2, 20, 10_000_000_000, 0.5},
	{2, 28, 7_000_000_000, 1},
}

func TestSetDeltaBracketsExactLargeN(t *testing.T) {
	checkSetDeltaLargeN(t, largeNCases)
}

// checkSetDeltaLargeN checks SetDelta's bracket and Delta's upper bound of
// k-RR against krrExactDeltaBound at each case.
func checkSetDeltaLargeN(t *testing.T, cases []largeNCase) {
	t.Helper()
	for _, c := range cases {
		set := krrUpper(t, c.k, c.eps0)
		lo, hi, err := accountant.SetDelta(set, c.n, c.eps)
		if err != nil {
			t.Errorf("k=%d eps0=%v n=%d eps=%v: %v", c.k, c.eps0, c.n, c.eps, err)
			continue
		}
		// The true value is in [exact, exact + trunc].
		exact, trunc := krrExactDeltaBound(c.k, c.eps0, c.n, c.eps)
		if lo > (exact+trunc)*(1+refTol) {
			t.Errorf("k=%d eps0=%v n=%d eps=%v: lower bound %.17g above exact %.17g (rel %.3g)", c.k, c.eps0, c.n, c.eps, lo, exact, lo/exact-1)
		}
		if hi < exact*(1-refTol) {
			t.Errorf("k=%d eps0=%v n=%d eps=%v: upper bound %.17g below exact %.17g (rel %.3g)", c.k, c.eps0, c.n, c.eps, hi, exact, 1-hi/exact)
		}
		d, err := accountant.Delta(accountant.KRR(c.k), c.eps0, c.n, c.eps)
		if err != nil {
			t.Errorf("k=%d eps0=%v n=%d eps=%v: Delta: %v", c.k, c.eps0, c.n, c.eps, err)
		} else if d.Upper < exact*(1-refTol) {
			t.Errorf("k=%d eps0=%v n=%d eps=%v: Delta().Upper = %.17g below exact %.17g (rel %.3g)", c.k, c.eps0, c.n, c.eps, d.Upper, exact, 1-d.Upper/exact)
		}
	}
}

// epsCheck compares an EpsilonResult with exact references: up(eps) and
// low(eps) are the exact upper-set and lower-set divergences (max over
// candidate sets), nil low when the mechanism has no lower-bound set.
func epsCheck(t *testing.T, name string, r accountant.EpsilonResult, delta float64, up, low func(float64) float64) {
	t.Helper()
	// Soundness, decided directly: delta(eps) is non-increasing, so
	// Upper >= exact eps_up iff up(Upper) <= delta.
	if r.Upper < r.LocalEps {
		if v := up(r.Upper); v > delta*(1+refTol) {
			t.Errorf("%s: UNSOUND upper: exact delta at Upper = %.6g is %.6g > delta = %g", name, r.Upper, v, delta)
		}
	}
	exactUp := exactEps(up, delta, r.LocalEps, r.Upper)
	t.Logf("%s: Upper = %.8g, exact eps_up = %.8g (ratio %.6f); Lower = %.8g", name, r.Upper, exactUp, r.Upper/exactUp, r.Lower)
	if r.Upper < exactUp*(1-epsSolveTol) {
		t.Errorf("%s: Upper = %.8g below exact eps_up = %.8g", name, r.Upper, exactUp)
	}
	if r.Upper > specTightness*exactUp*(1+epsSolveTol) {
		t.Errorf("%s: Upper = %.8g more than 0.5%% above exact eps_up = %.8g (ratio %.6f)", name, r.Upper, exactUp, r.Upper/exactUp)
	}
	if low == nil {
		return
	}
	// Lower <= exact eps_low iff low(Lower) >= delta.
	if v := low(r.Lower); v < delta*(1-refTol) {
		t.Errorf("%s: UNSOUND lower: exact lower-set delta at Lower = %.6g is %.6g < delta = %g", name, r.Lower, v, delta)
	}
	exactLow := exactEps(low, delta, r.LocalEps, r.Lower)
	t.Logf("%s: Lower = %.8g, exact eps_low = %.8g (ratio %.6f)", name, r.Lower, exactLow, r.Lower/exactLow)
	if r.Lower > exactLow*(1+epsSolveTol) {
		t.Errorf("%s: Lower = %.8g above exact eps_low = %.8g", name, r.Lower, exactLow)
	}
	if r.Lower < exactLow/specTightness*(1-epsSolveTol) {
		t.Errorf("%s: Lower = %.8g more than 0.5%% below exact eps_low = %.8g (ratio %.6f)", name, r.Lower, exactLow, r.Lower/exactLow)
	}
}

func maxOver(sets []accountant.AtomSet, n int) func(float64) float64 {
	return func(eps float64) float64 {
		var v float64
		for _, s := range sets {
			v = math.Max(v, exactDelta(s, n, eps))
		}
		return v
	}
}

func TestEpsilonTightSmallN(t *testing.T) {
	type mech struct {
		m    accountant.Mechanism
		eps0 float64
	}
	var mechs []mech
	for _, k := range []int{2, 3, 10} {
		for _, eps0 := range []float64{1, 3} {
			mechs = append(mechs, mech{accountant.KRR(k), eps0})
		}
	}
	mechs = append(mechs,
		mech{accountant.Generic(), 1},
		mech{accountant.Generic(), 3},
		mech{accountant.Joint(accountant.KRR(3), accountant.KRR(3)), 2},
		mech{accountant.Subsample(0.5, accountant.KRR(4)), 2},
		mech{accountant.Parallel([]float64{0.5, 0.5}, accountant.KRR(3), accountant.Generic()), 2},
	)
	rng := rand.New(rand.NewPCG(21, 22))
	for _, spread := range []float64{2, 2, 2, 4} {
		m, eps0 := matrixMech(t, randomMatrix(rng, 3, 3, spread))
		mechs = append(mechs, mech{m, eps0})
	}
	checked := 0
	for _, mc := range mechs {
		d := mustDecompose(t, mc.m, mc.eps0)
		parts := 0
		for _, s := range append(slices.Clone(d.Upper), d.Lower...) {
			parts = max(parts, len(s)+1)
		}
		for _, n := range []int{10, 20, 40} {
			if compositions(n, parts) > maxEnumSolve {
				continue
			}
			up := maxOver(d.Upper, n)
			var low func(float64) float64
			if len(d.Lower) > 0 {
				low = maxOver(d.Lower, n)
			}
			for _, delta := range []float64{1e-2, 1e-4, 1e-6} {
				name := fmt.Sprintf("%s eps0=%v n=%d delta=%g", mc.m, mc.eps0, n, delta)
				// At eps = 0 relative accuracy in eps means nothing; keep
				// cases whose exact eps_up is clearly positive.
				if up(0) <= delta*1.01 {
					continue
				}
				r, err := accountant.Epsilon(mc.m, mc.eps0, n, delta)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				epsCheck(t, name, r, delta, up, low)
				checked++
			}
		}
	}
	// The filters above must leave a meaningful number of cases.
	if checked < 100 {
		t.Errorf("only %d cases checked", checked)
	}
}

// tightCase is an Epsilon query checked against an exact reference: k > 0
// is KRR(k) against krrExactDelta (and, for k = 3, its lower bound against
// krr3LowerExactDelta); k = 0 is Generic(), whose upper bound is the clone
// decomposition, against cloneExactDelta.
type tightCase struct {
	k     int
	eps0  float64
	n     int
	delta float64
}

// TestEpsilonTightLargeN checks docs/accounting.md §7's tightness at large n: a
// k-RR point at each n from 1e3 to 1e5, delta down to 1e-12, the 3-RR lower
// bound, the generic clone bound, and binary RR up to n = 1e10. Points whose
// reference takes more than a second to invert (n = 1e5 at small eps0,
// 3-RR at n = 1e4 and delta = 1e-12, k = 10 at n = 1e4, the clone bound at
// eps0 = 4 and n = 1e5) are TestEpsilonTightLargeNDeep (make audit).
func TestEpsilonTightLargeN(t *testing.T) {
	if testing.Short() {
		t.Skip("about 5 s: inverts krrExactDelta at n up to 1e5")
	}
	checkEpsilonTight(t, []tightCase{
		{10, 1, 1000, 1e-6},
		{100, 4, 10000, 1e-6},
		{1000, 8, 100000, 1e-9},
		{3, 0.5, 1000, 1e-12},
		{2, 10, 100000, 1e-6},
		{2, 14, 1_000_000_000, 1e-6},
		{2, 16.8, 10_000_000_000, 1e-6},
		{2, 20, 10_000_000_000, 1e-8},
		{0, 8, 100000, 1e-6},
		{0, 0.2, 10000, 1e-10},
	})
}

// checkEpsilonTight runs Epsilon at each case and compares it with the
// exact eps of the reference (epsCheck).
func checkEpsilonTight(t *testing.T, cases []tightCase) {
	t.Helper()
	for _, c := range cases {
		var m accountant.Mechanism = accountant.KRR(c.k)
		up := func(eps float64) float64 { return krrExactDelta(c.k, c.eps0, c.n, eps) }
		if c.k == 0 {
			m = accountant.Generic()
			up = func(eps float64) float64 { d, _ := cloneExactDelta(c.eps0, c.n, eps); return d }
		}
		name := fmt.Sprintf("%s eps0=%v n=%d delta=%g", m, c.eps0, c.n, c.delta)
		r, err := accountant.Epsilon(m, c.eps0, c.n, c.delta)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var low func(float64) float64
		if c.k == 3 {
			low = func(eps float64) float64 { d, _ := krr3LowerExactDelta(c.eps0, c.n, eps); return d }
		}
		epsCheck(t, name, r, c.delta, up, low)
	}
}

// TestEpsilonOrdering: lower <= upper, and k-RR's upper bound is at most
// the generic clone bound's. The points whose clone bound takes seconds
// (binary RR at delta = 1e-8, k = 100 at n = 1e5) are
// TestEpsilonOrderingDeep (make audit).
func TestEpsilonOrdering(t *testing.T) {
	checkEpsilonOrdering(t, []tightCase{
		{10, 1, 10000, 1e-6},
		{10, 3, 1000, 1e-6},
		{1000, 6, 100000, 1e-6},
	})
}

// checkEpsilonOrdering runs TestEpsilonOrdering's checks at the k-RR
// points of cases.
func checkEpsilonOrdering(t *testing.T, cases []tightCase) {
	t.Helper()
	for _, c := range cases {
		name := fmt.Sprintf("k=%d eps0=%v n=%d delta=%g", c.k, c.eps0, c.n, c.delta)
		r, err := accountant.Epsilon(accountant.KRR(c.k), c.eps0, c.n, c.delta)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cl, err := accountant.Epsilon(accountant.Generic(), c.eps0, c.n, c.delta)
		if err != nil {
			t.Fatalf("%s: generic: %v", name, err)
		}
		if !(r.Lower <= r.Upper) {
			t.Errorf("%s: Lower = %.8g > Upper = %.8g", name, r.Lower, r.Upper)
		}
		if !(r.Upper <= cl.Upper) {
			// It must hold when the exact clone eps exceeds Upper, i.e.
			// when the clone divergence at Upper is above delta.
			dc, _ := cloneExactDelta(c.eps0, c.n, r.Upper)
			t.Errorf("%s: k-RR Upper = %.8g > clone Upper = %.8g (exact clone delta at k-RR Upper = %.3g vs delta %g)", name, r.Upper, cl.Upper, dc, c.delta)
		}
	}
}

func TestEpsilonMonotone(t *testing.T) {
	// Grids are coarse on purpose: eps_up moves by more than 10% per step
	// (roughly like sqrt(e^eps0 / n)), so the engine's 0.5% slack cannot
	// reverse the order of two consecutive exact values.
	type mech struct {
		name string
		m    accountant.Mechanism
	}
	mechs := []mech{{"krr10", accountant.KRR(10)}, {"generic", accountant.Generic()}}
	for _, mc := range mechs {
		// n from 12800 on, eps0 in steps of 0.5 and k-RR with k = 100:
		// TestEpsilonMonotoneDeep (make audit).
		checkMonotoneInN(t, mc.name, mc.m, 100, 12800)
		checkMonotoneInEps0(t, mc.name, mc.m, 1)
	}
}

// checkMonotoneInN checks that Epsilon(m, 3, n, 1e-6).Upper does not rise
// as n doubles from n0 to n1.
func checkMonotoneInN(t *testing.T, name string, m accountant.Mechanism, n0, n1 int) {
	t.Helper()
	const delta = 1e-6
	prev := math.Inf(1)
	for n := n0; n <= n1; n *= 2 {
		r, err := accountant.Epsilon(m, 3, n, delta)
		if err != nil {
			t.Fatalf("%s n=%d: %v", name, n, err)
		}
		if r.Upper > prev {
			t.Errorf("%s eps0=3: Upper rises with n: %.8g at n=%d after %.8g at n=%d", name, r.Upper, n, prev, n/2)
		}
		prev = r.Upper
	}
}

// checkMonotoneInEps0 checks that Epsilon(m, eps0, 10000, 1e-6).Upper does
// not fall as eps0 runs from 0.5 to 6 in the given step.
func checkMonotoneInEps0(t *testing.T, name string, m accountant.Mechanism, step float64) {
	t.Helper()
	const delta = 1e-6
	prev := 0.0
	for eps0 := 0.5; eps0 <= 6; eps0 += step {
		r, err := accountant.Epsilon(m, eps0, 10000, delta)
		if err != nil {
			t.Fatalf("%s eps0=%v: %v", name, eps0, err)
		}
		if r.Upper < prev {
			t.Errorf("%s n=10000: Upper falls with eps0: %.8g at eps0=%v after %.8g at eps0=%v", name, r.Upper, eps0, prev, eps0-step)
		}
		prev = r.Upper
	}
}

func TestRoundTrip(t *testing.T) {
	type rtCase struct {
		name  string
		m     accountant.Mechanism
		eps0  float64
		n     int
		delta float64
		up    func(float64) float64 // exact upper-set divergence
	}
	var cases []rtCase
	for _, c := range []struct {
		m     accountant.Mechanism
		eps0  float64
		n     int
		delta float64
	}{
		{accountant.KRR(10), 2, 40, 1e-3},
		{accountant.KRR(3), 1, 30, 1e-2},
		{accountant.Generic(), 2, 40, 1e-3},
	} {
		d := mustDecompose(t, c.m, c.eps0)
		cases = append(cases, rtCase{fmt.Sprintf("%s eps0=%v n=%d", c.m, c.eps0, c.n), c.m, c.eps0, c.n, c.delta, maxOver(d.Upper, c.n)})
	}
	for _, c := range []struct {
		k     int
		eps0  float64
		n     int
		delta float64
	}{{10, 1, 10000, 1e-6}, {100, 4, 10000, 1e-8}} {
		cases = append(cases, rtCase{fmt.Sprintf("krr%d eps0=%v n=%d", c.k, c.eps0, c.n), accountant.KRR(c.k), c.eps0, c.n, c.delta,
			func(eps float64) float64 { return krrExactDelta(c.k, c.eps0, c.n, eps) }})
	}
	for _, c := range cases {
		r, err := accountant.Epsilon(c.m, c.eps0, c.n, c.delta)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !r.Amplified {
			t.Fatalf("%s delta=%g: not amplified; choose a case where the round trip means something", c.name, c.delta)
		}
		d, err := accountant.Delta(c.m, c.eps0, c.n, r.Upper)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d.Upper > c.delta {
			t.Errorf("%s: Delta(Epsilon(delta=%g).Upper = %.8g).Upper = %.8g > delta", c.name, c.delta, r.Upper, d.Upper)
		}
		// Close: Delta is sound at Upper, and Upper is at most 0.5% above
		// the exact eps_up, so Delta(Upper) >= exact delta at
		// 1.005 * exact eps_up.
		exactUp := exactEps(c.up, c.delta, r.LocalEps, r.Upper)
		if floor := c.up(specTightness * exactUp); d.Upper < floor*(1-refTol) {
			t.Errorf("%s: Delta(Epsilon(delta=%g).Upper).Upper = %.6g below exact delta at 1.005 * exact eps_up (%.6g): not close to delta", c.name, c.delta, d.Upper, floor)
		}
		if ex := c.up(r.Upper); d.Upper < ex*(1-refTol) {
			t.Errorf("%s: UNSOUND: Delta(%.8g).Upper = %.6g below exact %.6g", c.name, r.Upper, d.Upper, ex)
		}
		// eps -> delta -> eps: within 0.5% both ways (Delta and Epsilon are
		// each within 0.5% in eps of the exact profile).
		for _, f := range []float64{0.8, 1.25} {
			eps := f * r.Upper
			d, err := accountant.Delta(c.m, c.eps0, c.n, eps)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if d.Upper >= 1 || d.Upper <= 0 {
				continue
			}
			back, err := accountant.Epsilon(c.m, c.eps0, c.n, d.Upper)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if back.Upper > specTightness*eps || back.Upper < eps/specTightness {
				t.Errorf("%s: Epsilon(Delta(eps=%.8g).Upper = %.6g).Upper = %.8g, not within 0.5%% of eps (ratio %.6f)", c.name, eps, d.Upper, back.Upper, back.Upper/eps)
			}
		}
	}
}

func TestCalibrate(t *testing.T) {
	cases := []struct {
		name string
		m    accountant.Mechanism
		t    accountant.Target
		krrK int // > 0: check the result against krrExactDelta
	}{
		{"krr10", accountant.KRR(10), accountant.Target{Eps: 1, Delta: 1e-6, N: 10000}, 10},
		{"krr100", accountant.KRR(100), accountant.Target{Eps: 0.5, Delta: 1e-8, N: 100000}, 100},
		{"krr2", accountant.KRR(2), accountant.Target{Eps: 0.3, Delta: 1e-6, N: 10000}, 2},
		{"generic", accountant.Generic(), accountant.Target{Eps: 1, Delta: 1e-6, N: 100000}, 0},
		{"joint(krr5,krr5)", accountant.Joint(accountant.KRR(5), accountant.KRR(5)), accountant.Target{Eps: 1, Delta: 1e-6, N: 10000}, 0},
		{"subsample(0.5,krr10)", accountant.Subsample(0.5, accountant.KRR(10)), accountant.Target{Eps: 0.5, Delta: 1e-6, N: 10000}, 0},
	}
	// calibrationSlack: the brief's requirement, the calibrated eps0 is
	// within 1% of the largest admissible one.
	const calibrationSlack = 1.01
	for _, c := range cases {
		res, err := accountant.Calibrate(c.m, c.t)
		if err != nil {
			t.Errorf("%s %+v: %v", c.name, c.t, err)
			continue
		}
		if !(res.Eps0 > 0) {
			t.Errorf("%s %+v: Eps0 = %v", c.name, c.t, res.Eps0)
			continue
		}
		if res.Achieved.Upper > c.t.Eps {
			t.Errorf("%s %+v: Achieved.Upper = %.8g > target eps at Eps0 = %.8g", c.name, c.t, res.Achieved.Upper, res.Eps0)
		}
		again, err := accountant.Epsilon(c.m, res.Eps0, c.t.N, c.t.Delta)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if again.Upper > c.t.Eps {
			t.Errorf("%s %+v: Epsilon at the calibrated Eps0 = %.8g gives Upper = %.8g > target", c.name, c.t, res.Eps0, again.Upper)
		}
		if res.Eps0*calibrationSlack < accountant.MaxEps0 {
			more, err := accountant.Epsilon(c.m, res.Eps0*calibrationSlack, c.t.N, c.t.Delta)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !(more.Upper > c.t.Eps) {
				t.Errorf("%s %+v: Eps0 = %.8g is not within 1%%: at 1.01*Eps0 Upper = %.8g still meets the target", c.name, c.t, res.Eps0, more.Upper)
			}
		}
		if c.krrK > 0 {
			if v := krrExactDelta(c.krrK, res.Eps0, c.t.N, c.t.Eps); v > c.t.Delta*(1+refTol) {
				t.Errorf("%s %+v: UNSOUND: exact delta at target eps with Eps0 = %.8g is %.6g", c.name, c.t, res.Eps0, v)
			}
		}
	}
}

func sameResult(a, b accountant.EpsilonResult) bool {
	// identicalTol: both sides decompose to the same atom sets, so the
	// engine sees identical inputs; 1e-12 only absorbs a different
	// summation order of merged atoms.
	const identicalTol = 1e-12
	return relErr(a.Upper, b.Upper) <= identicalTol && relErr(a.Lower, b.Lower) <= identicalTol &&
		a.LocalEps == b.LocalEps && a.Amplified == b.Amplified && a.Tight == b.Tight
}

func TestCompositionIdentities(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	mat, matEps := matrixMech(t, randomMatrix(rng, 3, 4, 2))
	bases := []struct {
		m    accountant.Mechanism
		eps0 float64
	}{{accountant.KRR(5), 2}, {accountant.KRR(2), 1}, {accountant.Generic(), 3}, {mat, matEps}}
	const n, delta = 1000, 1e-6
	for _, b := range bases {
		want, err := accountant.Epsilon(b.m, b.eps0, n, delta)
		if err != nil {
			t.Fatalf("%s: %v", b.m, err)
		}
		for _, w := range []accountant.Mechanism{
			accountant.Joint(b.m),
			accountant.Parallel([]float64{1}, b.m),
			accountant.Subsample(1, b.m),
		} {
			got, err := accountant.Epsilon(w, b.eps0, n, delta)
			if err != nil {
				t.Errorf("%s: %v", w, err)
				continue
			}
			if !sameResult(got, want) {
				t.Errorf("%s eps0=%v: %+v, want %+v as for %s", w, b.eps0, got, want, b.m)
			}
		}
	}
}

// TestCompositionSanity checks the composition inequalities below for k-RR
// at eps0 = 1; eps0 = 2 is TestCompositionSanityDeep (make audit).
func TestCompositionSanity(t *testing.T) {
	checkCompositionSanity(t, []int{3, 10}, []float64{1})
}

// checkCompositionSanity compares Joint, Parallel and Subsample of KRR(k)
// with KRR(k) alone at budget e, for each k in ks and e in es.
func checkCompositionSanity(t *testing.T, ks []int, es []float64) {
	t.Helper()
	const n, delta = 10000, 1e-6
	eps := func(m accountant.Mechanism, eps0 float64) float64 {
		t.Helper()
		r, err := accountant.Epsilon(m, eps0, n, delta)
		if err != nil {
			t.Fatalf("%s eps0=%v: %v", m, eps0, err)
		}
		return r.Upper
	}
	for _, k := range ks {
		for _, e := range es {
			krr := accountant.KRR(k)
			one := eps(krr, e)
			// Joint of two at total 2e (e each) is no better than one
			// component alone at e: the component-1 subset of the joint
			// decomposition is the component's GPARV multiplied by an
			// independent mean-1 factor, and by Jensen that can only raise
			// delta. So exact(joint) >= exact(krr), hence
			// Upper(joint) >= exact(krr) >= Upper(krr)/1.005.
			if j := eps(accountant.Joint(krr, krr), 2*e); j < one/specTightness {
				t.Errorf("k=%d: joint(krr,krr) at eps0=%v gives %.8g < krr alone at %v: %.8g", k, 2*e, j, e, one)
			}
			// Two identical components in parallel contain the
			// all-components-changed set, which merges to the component's
			// own set.
			if p := eps(accountant.Parallel([]float64{0.4, 0.6}, krr, krr), e); p < one/specTightness {
				t.Errorf("k=%d eps0=%v: parallel(krr,krr) gives %.8g < krr alone %.8g", k, e, p, one)
			}
			// Subsampling at rate s replaces Z by the mean-preserving
			// contraction B Z + (1-B) E[Z]: delta can only fall.
			for _, s := range []float64{0.1, 0.5} {
				if sub := eps(accountant.Subsample(s, krr), e); sub > one*specTightness {
					t.Errorf("k=%d eps0=%v: subsample(%v) gives %.8g > krr alone %.8g", k, e, s, sub, one)
				}
			}
		}
	}
}

// wordRE matches name as a whole word, case-insensitively.
func wordRE(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[^a-z0-9_])` + regexp.QuoteMeta(name) + `($|[^a-z0-9_])`)
}

func TestArgumentErrors(t *testing.T) {
	krr := accountant.KRR(10)
	nan, inf := math.NaN(), math.Inf(1)
	type call struct {
		name  string
		param string // the parameter the message must name
		value string // how the value must appear
		f     func() error
	}
	var calls []call
	epsilon := func(eps0 float64, n int, delta float64) func() error {
		return func() error { _, err := accountant.Epsilon(krr, eps0, n, delta); return err }
	}
	deltaF := func(eps0 float64, n int, eps float64) func() error {
		return func() error { _, err := accountant.Delta(krr, eps0, n, eps); return err }
	}
	calibrate := func(tg accountant.Target) func() error {
		return func() error { _, err := accountant.Calibrate(krr, tg); return err }
	}
	setDelta := func(n int, eps float64) func() error {
		return func() error { _, _, err := accountant.SetDelta(krrUpper(t, 10, 1), n, eps); return err }
	}
	for _, d := range []float64{0, 1, -1e-3, 1.5, nan, inf, -inf} {
		calls = append(calls, call{fmt.Sprintf("Epsilon delta=%v", d), "delta", fmt.Sprint(d), epsilon(1, 1000, d)})
		calls = append(calls, call{fmt.Sprintf("Calibrate delta=%v", d), "delta", fmt.Sprint(d), calibrate(accountant.Target{Eps: 1, Delta: d, N: 1000})})
	}
	for _, n := range []int{0, -5, accountant.MaxN + 1} {
		calls = append(calls, call{fmt.Sprintf("Epsilon n=%d", n), "n", fmt.Sprint(n), epsilon(1, n, 1e-6)})
		calls = append(calls, call{fmt.Sprintf("Delta n=%d", n), "n", fmt.Sprint(n), deltaF(1, n, 0.5)})
		calls = append(calls, call{fmt.Sprintf("Calibrate n=%d", n), "n", fmt.Sprint(n), calibrate(accountant.Target{Eps: 1, Delta: 1e-6, N: n})})
		calls = append(calls, call{fmt.Sprintf("SetDelta n=%d", n), "n", fmt.Sprint(n), setDelta(n, 0.5)})
	}
	for _, e := range []float64{nan, inf, -inf, 0, -1, accountant.MaxEps0 + 1} {
		calls = append(calls, call{fmt.Sprintf("Epsilon eps0=%v", e), "eps0", fmt.Sprint(e), epsilon(e, 1000, 1e-6)})
		calls = append(calls, call{fmt.Sprintf("Delta eps0=%v", e), "eps0", fmt.Sprint(e), deltaF(e, 1000, 0.5)})
	}
	for _, e := range []float64{nan, inf, -inf, -0.1} {
		calls = append(calls, call{fmt.Sprintf("Delta eps=%v", e), "eps", fmt.Sprint(e), deltaF(1, 1000, e)})
		calls = append(calls, call{fmt.Sprintf("SetDelta eps=%v", e), "eps", fmt.Sprint(e), setDelta(1000, e)})
	}
	for _, e := range []float64{nan, inf, -inf, 0, -1} {
		calls = append(calls, call{fmt.Sprintf("Calibrate eps=%v", e), "eps", fmt.Sprint(e), calibrate(accountant.Target{Eps: e, Delta: 1e-6, N: 1000})})
	}
	for _, w := range []float64{nan, inf, -0.5} {
		calls = append(calls, call{fmt.Sprintf("Parallel weight=%v", w), "weight", fmt.Sprint(w), func() error {
			_, err := accountant.Epsilon(accountant.Parallel([]float64{w, 1 - w}, krr, krr), 1, 1000, 1e-6)
			return err
		}})
	}
	for _, s := range []float64{nan, inf, 0, 1.5} {
		calls = append(calls, call{fmt.Sprintf("Subsample rate=%v", s), "rate", fmt.Sprint(s), func() error {
			_, err := accountant.Epsilon(accountant.Subsample(s, krr), 1, 1000, 1e-6)
			return err
		}})
	}
	for _, c := range calls {
		err := c.f()
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case !errors.Is(err, accountant.ErrInvalidArgument):
			t.Errorf("%s: error %q does not wrap ErrInvalidArgument", c.name, err)
		case !wordRE(c.param).MatchString(err.Error()):
			t.Errorf("%s: error %q does not name the parameter %q", c.name, err, c.param)
		case !strings.Contains(err.Error(), c.value):
			t.Errorf("%s: error %q does not show the value %s", c.name, err, c.value)
		}
	}
}

func TestDeclarationErrors(t *testing.T) {
	cases := []struct {
		name string
		json string   // a bare matrix with labels
		want []string // substrings that locate the fault
	}{
		{"row sum", `{"eps0": 2, "inputs": ["a","b"], "outputs": ["u","v"], "rows": [[0.5,0.5],[0.6,0.3]]}`,
			[]string{"x=1", `"b"`}},
		{"negative entry", `{"eps0": 2, "inputs": ["a","b"], "outputs": ["u","v"], "rows": [[0.5,0.5],[1.2,-0.2]]}`,
			[]string{"x=1", `"b"`, "y=1", `"v"`}},
		{"ratio above e^eps0", `{"eps0": 1, "inputs": ["a","b"], "outputs": ["u","v"], "rows": [[0.8,0.2],[0.2,0.8]]}`,
			[]string{"y=0", `"u"`}},
		{"zero vs positive column", `{"eps0": 2, "inputs": ["a","b"], "outputs": ["u","v","w"], "rows": [[0.5,0.5,0],[0.5,0.3,0.2]]}`,
			[]string{"y=2", `"w"`, "x=0", `"a"`}},
		{"sparse row sum", `{"eps0": 3, "inputs": ["a","b","c"], "num_outputs": 3, "rows": [{"default": 0.25, "entries": {"0": 0.5}}, {"default": 0.25, "entries": {"1": 0.5}}, {"default": 0.3, "entries": {"2": 0.5}}]}`,
			[]string{"x=2", `"c"`}},
	}
	for _, c := range cases {
		decl, err := accountant.DecodeDeclaration([]byte(c.json))
		if err != nil {
			t.Errorf("%s: DecodeDeclaration: %v", c.name, err)
			continue
		}
		_, err = accountant.Decompose(decl)
		checkDeclErr(t, c.name+" (Decompose)", err, c.want)
		_, err = accountant.Epsilon(accountant.DeclaredMech{Decl: decl}, 1, 1000, 1e-6)
		checkDeclErr(t, c.name+" (Epsilon)", err, c.want)
	}
	// The atoms form names the pair and the atom.
	atoms := &accountant.Declaration{Eps0: 1, Form: accountant.FormAtoms, Pairs: []accountant.DeclaredSet{{
		Label: "x=a,x'=b",
		Atoms: []accountant.Atom{{R: 0.2, P: 0.5, Q: 0.5}, {R: 0.1, P: 0.45, Q: 0.05}, {R: 0.05, P: 0.05, Q: 0.45}},
	}}}
	_, err := accountant.Decompose(atoms)
	checkDeclErr(t, "atoms ratio", err, []string{"pair 0", "x=a,x'=b", "atom 1"})
	// A triple whose r is not a distribution.
	triple := &accountant.Declaration{Eps0: 1, Form: accountant.FormAtoms,
		Pairs:   []accountant.DeclaredSet{{Atoms: []accountant.Atom{{R: 0.3, P: 0.6, Q: 0.4}, {R: 0.3, P: 0.4, Q: 0.6}}}},
		Triples: []accountant.DeclaredSet{{Label: "x3=c", Atoms: []accountant.Atom{{R: 0.4, P: 0.6, Q: 0.4}, {R: 0.4, P: 0.4, Q: 0.6}}}},
	}
	_, err = accountant.Decompose(triple)
	checkDeclErr(t, "triple r sum", err, []string{"triple 0", "x3=c"})
}

func checkDeclErr(t *testing.T, name string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", name)
		return
	}
	if !errors.Is(err, accountant.ErrInvalidDeclaration) {
		t.Errorf("%s: error %q does not wrap ErrInvalidDeclaration", name, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %s", name, err, w)
		}
	}
}

func TestLargeKRRMatrixIsSymmetric(t *testing.T) {
	const k, eps0 = 10000, 2.0
	e := math.Exp(eps0)
	c, ec := 1/(e+k-1), e/(e+k-1)
	rows := make([]accountant.SparseRow, k)
	for x := range rows {
		rows[x] = accountant.SparseRow{Default: c, Entries: map[int]float64{x: ec}}
	}
	m, err := accountant.NewSparseMatrix(k, rows)
	if err != nil {
		t.Fatal(err)
	}
	d, err := accountant.Decompose(&accountant.Declaration{Eps0: eps0, Form: accountant.FormMatrix, Matrix: m})
	if err != nil {
		t.Fatalf("Decompose: %v", err)
	}
	want := mustDecompose(t, accountant.KRR(k), eps0)
	if len(d.Upper) != 1 {
		t.Fatalf("k-RR matrix with k=%d: %d upper sets, want 1 (all pairs are equivalent)", k, len(d.Upper))
	}
	// atomTol: the matrix path sums (k-2) equal entries by multiplication,
	// the KRR path multiplies too; a few ulps either way.
	const atomTol = 1e-12
	sameSet := func(what string, got, want accountant.AtomSet) {
		got, want = got.Merge(), want.Merge()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
		for i := range got {
			if relErr(got[i].R, want[i].R) > atomTol || relErr(got[i].P, want[i].P) > atomTol || relErr(got[i].Q, want[i].Q) > atomTol {
				t.Errorf("%s: atom %d = %+v, want %+v", what, i, got[i], want[i])
			}
		}
	}
	sameSet("upper", d.Upper[0], want.Upper[0])
	if len(d.Lower) == 0 {
		t.Errorf("no lower-bound triple")
	} else {
		for i, s := range d.Lower {
			sameSet(fmt.Sprintf("lower %d", i), s, want.Lower[0])
		}
	}
	if d.KRR != k {
		t.Errorf("Decomposition.KRR = %d, want %d", d.KRR, k)
	}
}

func TestNotAmplifiedAtTinyN(t *testing.T) {
	const n, eps0, delta = 2, 1.0, 1e-9
	for _, m := range []accountant.Mechanism{accountant.KRR(2), accountant.KRR(10), accountant.Generic()} {
		r, err := accountant.Epsilon(m, eps0, n, delta)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if r.Amplified || r.Upper != r.LocalEps || r.LocalEps != eps0 {
			t.Errorf("%s n=%d eps0=%v delta=%g: %+v, want Amplified = false and Upper = LocalEps = %v", m, n, eps0, delta, r, eps0)
		}
	}
	// The reference agrees that shuffling two reports cannot reach 1e-9
	// much below eps0.
	if v := exactDelta(krrUpper(t, 10, eps0), n, eps0*0.999); !(v > delta) {
		t.Errorf("reference: k-RR n=2 delta at 0.999 eps0 = %g, expected > %g", v, delta)
	}
}
