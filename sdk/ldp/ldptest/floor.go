package ldptest

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// FloorEstimator is a randomizer whose estimates take the shuffler's
// blanket draws out.
type FloorEstimator interface {
	sdk.Randomizer
	sdk.FloorEstimator
}

// CheckFloorEstimate checks r's EstimateFloor at eps0 against a
// computation that shares none of its closed forms: the blanket law omega
// of r's declared matrix m (BlanketLaw) and r's own Estimate of the
// statistic of one report of each output y (single(y), which the caller
// builds in r's statistic format). An estimator affine in the statistic's
// counts, as every built-in's raw estimate is, gives a draw the expected
// contribution mu = sum_y omega_y Estimate(single(y)) and the variance
// v = sum_y omega_y Estimate(single(y))^2 - mu^2 per item; so for a
// statistic base and draws D <= base.N - 1 of its reports, EstimateFloor
// must give Estimate(base)'s values less D mu, a variance of at least
// D v (the draws' own part), an estimate of base.N - D reports, and with
// D = 0 exactly Estimate(base). Only the items labelled in affine (all
// when nil) are checked for the draws: a mean, sum/N, is not affine in
// the counts.
func CheckFloorEstimate(t testing.TB, r FloorEstimator, eps0 float64, m *accountant.Matrix, single func(y int) *sdk.Statistic, base *sdk.Statistic, draws int64, affine []string) {
	t.Helper()
	ctx := context.Background()
	omega := BlanketLaw(m)
	var mu, sq []float64
	for y, w := range omega {
		e, err := r.Estimate(ctx, single(y))
		if err != nil {
			t.Fatalf("Estimate of one report of output %d: %v", y, err)
		}
		if mu == nil {
			mu, sq = make([]float64, len(e.Items)), make([]float64, len(e.Items))
		}
		for i, it := range e.Items {
			mu[i] += w * it.Value
			sq[i] += w * it.Value * it.Value
		}
	}
	plain, err := r.Estimate(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	zero, err := r.EstimateFloor(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range zero.Items {
		if it != plain.Items[i] {
			t.Errorf("EstimateFloor without draws, item %d: %+v, Estimate %+v", i, it, plain.Items[i])
		}
	}
	with := base.Clone()
	with.Draws = draws
	got, err := r.EstimateFloor(ctx, with)
	if err != nil {
		t.Fatal(err)
	}
	if got.N != base.N-draws || len(got.Items) != len(plain.Items) {
		t.Fatalf("EstimateFloor with %d draws: N = %d, %d items; want %d, %d", draws, got.N, len(got.Items), base.N-draws, len(plain.Items))
	}
	tol := func(x float64) float64 { return 1e-9 * (1 + math.Abs(x)) }
	for i, it := range got.Items {
		if affine != nil && !slices.Contains(affine, it.Label) {
			continue
		}
		want := plain.Items[i].Value - float64(draws)*mu[i]
		if math.Abs(it.Value-want) > tol(want) {
			t.Errorf("item %q: EstimateFloor %.9g, Estimate less %d draws' expected %.9g each = %.9g", it.Label, it.Value, draws, mu[i], want)
		}
		if v := float64(draws) * (sq[i] - mu[i]*mu[i]); it.Variance < v*(1-1e-9) {
			t.Errorf("item %q: variance %.9g below the draws' own %.9g", it.Label, it.Variance, v)
		}
	}
	if _, err := r.Estimate(ctx, with); err == nil {
		t.Error("Estimate took a statistic with draws")
	}
}

// FloorSampler is a FloorEstimator that draws from its blanket and
// declares a matrix.
type FloorSampler interface {
	FloorEstimator
	sdk.BlanketSampler
	Declaration(eps0 float64, form accountant.Form) (*accountant.Declaration, error)
}

// CheckFloorEstimates runs CheckFloorEstimate on r at eps0 0.5, 2 and 6,
// on the statistic of r's reports of in and 300 of its blanket draws;
// single sets the counts (len counts) of one report of output y.
func CheckFloorEstimates(t testing.TB, r FloorSampler, in sdk.Inputs, counts int, single func(c []int64, y int), affine []string) {
	t.Helper()
	ctx := context.Background()
	desc, err := r.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const draws = 300
	for _, eps0 := range []float64{0.5, 2, 6} {
		d, err := r.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		one := func(y int) *sdk.Statistic {
			s := &sdk.Statistic{Plugin: desc.Name, Digest: desc.Digest, Eps0: eps0, N: 1, Counts: make([]int64, counts)}
			single(s.Counts, y)
			return s
		}
		reports, err := r.Randomize(ctx, eps0, in)
		if err != nil {
			t.Fatal(err)
		}
		drawn, err := r.SampleBlanket(ctx, eps0, draws)
		if err != nil {
			t.Fatal(err)
		}
		base, err := r.Accumulate(ctx, eps0, append(reports, drawn...))
		if err != nil {
			t.Fatal(err)
		}
		CheckFloorEstimate(t, r, eps0, d.Matrix, one, base, draws, affine)
	}
}
