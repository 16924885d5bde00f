// Package ldptest holds what randomizer tests (and the plugin conformance
// kit) share: Pearson's chi-square goodness-of-fit test and z-tests with
// thresholds derived from a stated false-failure rate, a comparison of two
// accountant decompositions, and the scaffolding of the built-in plugins'
// tests: seeded sources, category labels, the checks that every
// categorical randomizer passes the same way (configuration, description,
// unbiased estimates, malformed reports, merging, concurrent use, fuzzing
// the index decoder) and benchmark drivers.
//
// A seeded test whose statistic is compared with the (1 - alpha) quantile
// of its null distribution fails, for a correct sampler, with probability
// alpha over the choice of seed; with alpha = 1e-6 a suite of a thousand
// such checks has a false-failure probability below 1e-3 (union bound).
//
//	x2, df := ldptest.ChiSquare(observed, probs)
//	if x2 > ldptest.ChiSquareCritical(df, 1e-6) { ... }
//
// A plugin's tests adapt its New to a NewFunc and run the shared checks:
//
//	func newKRR(o ldptest.Options) (sdk.Randomizer, error) {
//		return ldptest.Randomizer(krr.New(krr.Options{Categories: o.Categories, Other: o.Other, Confidence: o.Confidence, Rand: o.Rand}))
//	}
//	func TestEstimateUnbiased(t *testing.T) { ldptest.CheckEstimateUnbiased(t, newKRR, "") }
package ldptest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/accountant"
)

// MinExpected is the smallest expected cell count ChiSquare keeps as its own
// cell; smaller cells are pooled. Pearson's statistic is close to its
// chi-square limit when every expected count is at least about 5 (Cochran's
// rule).
const MinExpected = 5

// ChiSquare returns Pearson's statistic sum (O - E)^2 / E of observed counts
// against cell probabilities (summing to 1), E = n·prob, and its degrees of
// freedom (cells - 1). Cells with expected count below MinExpected are
// pooled into one cell (and that cell into the next smallest if it is still
// below). It panics if the lengths differ.
func ChiSquare(observed []int64, probs []float64) (x2 float64, df int) {
	if len(observed) != len(probs) {
		panic(fmt.Sprintf("ldptest: %d observed cells, %d probabilities", len(observed), len(probs)))
	}
	var n int64
	for _, o := range observed {
		n += o
	}
	type cell struct{ o, e float64 }
	var cells []cell
	var pooled cell
	for i, p := range probs {
		c := cell{float64(observed[i]), float64(n) * p}
		if c.e < MinExpected {
			pooled.o += c.o
			pooled.e += c.e
			continue
		}
		cells = append(cells, c)
	}
	if pooled.e > 0 || pooled.o > 0 {
		if pooled.e < MinExpected && len(cells) > 0 {
			i := 0
			for j, c := range cells {
				if c.e < cells[i].e {
					i = j
				}
			}
			cells[i].o += pooled.o
			cells[i].e += pooled.e
		} else {
			cells = append(cells, pooled)
		}
	}
	for _, c := range cells {
		if c.e == 0 {
			if c.o > 0 {
				return math.Inf(1), len(cells) - 1
			}
			continue
		}
		d := c.o - c.e
		x2 += d * d / c.e
	}
	return x2, len(cells) - 1
}

// ChiSquareCritical returns the (1 - alpha) quantile of the chi-square
// distribution with df degrees of freedom: a statistic above it has
// probability alpha under the null hypothesis.
func ChiSquareCritical(df int, alpha float64) float64 {
	return distuv.ChiSquared{K: float64(df)}.Quantile(1 - alpha)
}

// ZCritical returns the two-sided standard normal critical value for
// false-failure rate alpha: P(|N(0,1)| > z) = alpha.
func ZCritical(alpha float64) float64 {
	return distuv.UnitNormal.Quantile(1 - alpha/2)
}

// CheckChiSquare fails t when observed counts do not fit probs at
// false-failure rate alpha.
func CheckChiSquare(t testing.TB, name string, observed []int64, probs []float64, alpha float64) {
	t.Helper()
	x2, df := ChiSquare(observed, probs)
	if df < 1 {
		t.Fatalf("%s: chi-square test has %d degrees of freedom; draw more samples", name, df)
	}
	if crit := ChiSquareCritical(df, alpha); !(x2 <= crit) {
		t.Errorf("%s: chi-square = %.2f with %d df exceeds %.2f (false-failure rate %g)", name, x2, df, crit, alpha)
	}
}

// declTol is the relative tolerance for comparing atoms of two declarations:
// both forms compute the same closed forms in different orders, a few ulps
// apart.
const declTol = 1e-12

// CheckSameDecomposition fails t unless the two declarations validate and
// decompose to the same atom sets: the same upper-bound pair sets and the
// same lower-bound triple sets, each compared up to swapping the pair
// (x, x') and with a relative tolerance of 1e-12.
func CheckSameDecomposition(t testing.TB, a, b *accountant.Declaration) {
	t.Helper()
	da, err := accountant.Decompose(a)
	if err != nil {
		t.Fatalf("first declaration (%s): %v", a.Form, err)
	}
	db, err := accountant.Decompose(b)
	if err != nil {
		t.Fatalf("second declaration (%s): %v", b.Form, err)
	}
	if d := math.Abs(da.Gamma() - db.Gamma()); d > declTol {
		t.Errorf("blanket mass: %s %.15g, %s %.15g", a.Form, da.Gamma(), b.Form, db.Gamma())
	}
	compareCollections(t, "upper", da.Upper, db.Upper)
	compareCollections(t, "lower", da.Lower, db.Lower)
}

// SameDecomposition reports whether two decompositions are equal, as
// CheckSameDecomposition checks them: the same blanket mass, and every
// upper (lower) set of one, merged, among the other's, up to swapping p
// and q, within a relative 1e-12.
func SameDecomposition(a, b *accountant.Decomposition) bool {
	if math.Abs(a.Gamma()-b.Gamma()) > declTol {
		return false
	}
	within := func(x, y []accountant.AtomSet) bool {
		for _, s := range x {
			if !slices.ContainsFunc(y, func(u accountant.AtomSet) bool { return sameSet(s, u) }) {
				return false
			}
		}
		return true
	}
	return within(a.Upper, b.Upper) && within(b.Upper, a.Upper) && within(a.Lower, b.Lower) && within(b.Lower, a.Lower)
}

func compareCollections(t testing.TB, what string, a, b []accountant.AtomSet) {
	t.Helper()
	for i, s := range a {
		if !slices.ContainsFunc(b, func(u accountant.AtomSet) bool { return sameSet(s, u) }) {
			t.Errorf("%s set %d of the first declaration has no match in the second:\n  %v\nsecond has:\n  %v", what, i, canon(s), canonAll(b))
		}
	}
	for i, s := range b {
		if !slices.ContainsFunc(a, func(u accountant.AtomSet) bool { return sameSet(s, u) }) {
			t.Errorf("%s set %d of the second declaration has no match in the first:\n  %v\nfirst has:\n  %v", what, i, canon(s), canonAll(a))
		}
	}
}

func canonAll(sets []accountant.AtomSet) [][]accountant.Atom {
	out := make([][]accountant.Atom, len(sets))
	for i, s := range sets {
		out[i] = canon(s)
	}
	return out
}

// canon sorts a merged set by its likelihood-ratio pair.
func canon(s accountant.AtomSet) []accountant.Atom {
	out := slices.Clone([]accountant.Atom(s.Merge()))
	ratio := func(x, r float64) float64 {
		if r == 0 {
			return math.Inf(1)
		}
		return x / r
	}
	slices.SortFunc(out, func(x, y accountant.Atom) int {
		if c := cmpTol(ratio(x.P, x.R), ratio(y.P, y.R)); c != 0 {
			return c
		}
		return cmpTol(ratio(x.Q, x.R), ratio(y.Q, y.R))
	})
	return out
}

func cmpTol(a, b float64) int {
	if near(a, b) {
		return 0
	}
	return cmp.Compare(a, b)
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= declTol*math.Max(math.Abs(a), math.Abs(b))
}

// sameSet reports whether two sets are equal, or equal after swapping p and
// q in one of them.
func sameSet(a, b accountant.AtomSet) bool {
	ca := canon(a)
	for _, swap := range []bool{false, true} {
		u := slices.Clone([]accountant.Atom(b))
		if swap {
			for i := range u {
				u[i].P, u[i].Q = u[i].Q, u[i].P
			}
		}
		cb := canon(u)
		if len(ca) != len(cb) {
			continue
		}
		ok := true
		for i := range ca {
			if !near(ca[i].R, cb[i].R) || !near(ca[i].P, cb[i].P) || !near(ca[i].Q, cb[i].Q) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// CheckMean fails t when the mean of independent samples, each with the
// given variance, differs from want by more than the two-sided z critical
// value at false-failure rate alpha times the standard error
// sqrt(variance/len(samples)). The samples' mean must be close to normal
// (each sample a sum of many independent reports, or many samples).
func CheckMean(t testing.TB, name string, samples []float64, want, variance, alpha float64) {
	t.Helper()
	var sum float64
	for _, s := range samples {
		sum += s
	}
	m := sum / float64(len(samples))
	se := math.Sqrt(variance / float64(len(samples)))
	if z := (m - want) / se; !(math.Abs(z) <= ZCritical(alpha)) {
		t.Errorf("%s: mean %.6g of %d samples, want %.6g (standard error %.3g, z = %.2f, false-failure rate %g)", name, m, len(samples), want, se, z, alpha)
	}
}

// CheckVariance fails t when the sample variance of normal samples is not
// consistent with variance: (m-1)·s²/variance follows chi-square(m-1) for m
// normal samples, and the check is two-sided with alpha/2 in each tail.
func CheckVariance(t testing.TB, name string, samples []float64, variance, alpha float64) {
	t.Helper()
	m := float64(len(samples))
	var sum float64
	for _, s := range samples {
		sum += s
	}
	mean := sum / m
	var ss float64
	for _, s := range samples {
		ss += (s - mean) * (s - mean)
	}
	stat := ss / variance
	chi := distuv.ChiSquared{K: m - 1}
	if lo, hi := chi.Quantile(alpha/2), chi.Quantile(1-alpha/2); !(stat >= lo && stat <= hi) {
		t.Errorf("%s: sample variance %.6g of %d samples, want %.6g (statistic %.1f outside [%.1f, %.1f], false-failure rate %g)", name, ss/(m-1), len(samples), variance, stat, lo, hi, alpha)
	}
}
