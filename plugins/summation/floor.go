package summation

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The blanket is uniform on the k+1 levels (blanket.go). A draw's scaled
// level Z = j/k then has mean 1/2 and second moment U2 = (2k+1)/(6k), so
// its debiased T = (Z - gamma/2)/(1 - gamma) has mean 1/2 and variance
// (U2 - 1/4)/(1 - gamma)^2. Of S = sum T over the n reports, D draws
// contribute D/2 on average: S - D/2 is unbiased for the sum of the n - D
// apps' s_i, and the estimate's variance is the apps' part (Estimate's
// formula at n - D, its data term sum(Z^2 - Z) less the draws' expected
// D (U2 - 1/2)) plus D (U2 - 1/4)/(1 - gamma)^2, the draws' own.
// TestEstimateFloor checks the sum against the blanket of the declared
// matrix and Estimate of single reports (ldptest.CheckFloorEstimate); the
// conformance kit's floor check, the means and variances against known
// inputs mixed with real draws.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// EstimateFloor implements sdk.FloorEstimator: Estimate's sum and mean of
// the apps' reports, the draws' expected half a level each taken out and
// their variance added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	check := func(s *sdk.Statistic) error { return ldp.CheckStatistic(s, &r.desc, r.k+1, true) }
	return ldp.EstimateFloor(Name, stat, r.conf, check, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		return r.items(s, draws), nil
	})
}

// items returns the sum and mean items of st's n reports of which draws
// are blanket draws (0 in Estimate; see the top of the file).
func (r *Randomizer) items(st *sdk.Statistic, draws int64) []sdk.Item {
	gamma, notGamma := r.blanket(st.Eps0)
	kf, df := float64(r.k), float64(draws)
	nf := float64(st.N - draws) // the apps' reports
	var sumZ, sumZZ float64     // sum Z and sum (Z² - Z), over every report
	for j, c := range st.Counts {
		z := float64(j) / kf
		sumZ += float64(c) * z
		sumZZ += float64(c) * z * (z - 1)
	}
	u2 := (2*kf + 1) / (6 * kf)
	// The draws' expected Z and Z² - Z out: the apps' part.
	sumZ -= df / 2
	sumZZ -= df * (u2 - 0.5)
	s := (sumZ - nf*gamma/2) / notGamma
	varS := (gamma*sumZZ+nf*gamma*(notGamma*u2+gamma/4))/(notGamma*notGamma) + nf/(4*kf*kf)
	varS = max(varS, 0) + df*(u2-0.25)/(notGamma*notGamma)
	width := r.hi - r.lo
	z := ldp.ZScore(r.conf)
	item := func(label string, v, variance, lo, hi float64) sdk.Item {
		return ldp.ClippedItem(z, label, v, variance, lo, hi)
	}
	return []sdk.Item{
		item("sum", nf*r.lo+width*s, width*width*varS, nf*r.lo, nf*r.hi),
		item("mean", r.lo+width*s/nf, width*width*varS/(nf*nf), r.lo, r.hi),
	}
}
