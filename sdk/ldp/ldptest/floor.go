package ldptest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
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
// D = 0 exactly Estimate(base); and it must refuse what
// CheckFloorRefusals says. Only the items labelled in affine (all when
// nil) are checked for the draws: a mean, sum/N, is not affine in the
// counts. The variance is checked exactly by CheckFloorBalanced.
func CheckFloorEstimate(t testing.TB, r FloorEstimator, eps0 float64, m *accountant.Matrix, single func(y int) *sdk.Statistic, base *sdk.Statistic, draws int64, affine []string) {
	t.Helper()
	ctx := context.Background()
	omega := BlanketLaw(m)
	mu, sq := drawMoments(t, r, omega, single)
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
	CheckFloorRefusals(t, r, with)
}

// CheckFloorRefusals checks what r refuses of a statistic with draws,
// each with an error wrapping sdk.ErrBadStatistic: Estimate, naming
// EstimateFloor, and EstimateFloor with Draws below 0 or at or above N
// (no report of an app). stat must hold draws (0 < Draws < N).
func CheckFloorRefusals(t testing.TB, r FloorEstimator, stat *sdk.Statistic) {
	t.Helper()
	ctx := context.Background()
	if stat.Draws <= 0 || stat.Draws >= stat.N {
		t.Fatalf("CheckFloorRefusals of a statistic with %d draws of N = %d", stat.Draws, stat.N)
	}
	if e, err := r.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) || !strings.Contains(fmt.Sprint(err), "EstimateFloor") {
		t.Errorf("Estimate of a statistic with %d draws: estimate %v, error %v; want an error wrapping sdk.ErrBadStatistic that names EstimateFloor", stat.Draws, e != nil, err)
	}
	for _, d := range []int64{-1, stat.N, stat.N + 1} {
		bad := stat.Clone()
		bad.Draws = d
		if e, err := r.EstimateFloor(ctx, bad); !errors.Is(err, sdk.ErrBadStatistic) {
			t.Errorf("EstimateFloor with Draws = %d of N = %d: estimate %v, error %v; want an error wrapping sdk.ErrBadStatistic", d, bad.N, e != nil, err)
		}
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
// on the statistic of r's reports of in and 300 of its blanket draws, and
// CheckFloorBalanced on r's reports of in at eps0 ln 2 and ln 4, where
// the built-ins' blankets have whole proportions (e^eps0 and e^(eps0/2)
// whole); it fails when neither has. single sets the counts (len counts)
// of one report of output y of the matrix declared at eps0.
func CheckFloorEstimates(t testing.TB, r FloorSampler, in sdk.Inputs, counts int, single func(c []int64, eps0 float64, y int), affine []string) {
	t.Helper()
	ctx := context.Background()
	desc, err := r.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const draws = 300
	declared := func(eps0 float64) (*accountant.Matrix, func(y int) *sdk.Statistic, *sdk.Statistic) {
		d, err := r.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		one := func(y int) *sdk.Statistic {
			s := &sdk.Statistic{Plugin: desc.Name, Digest: desc.Digest, Eps0: eps0, N: 1, Counts: make([]int64, counts)}
			single(s.Counts, eps0, y)
			return s
		}
		reports, err := r.Randomize(ctx, eps0, in)
		if err != nil {
			t.Fatal(err)
		}
		apps, err := r.Accumulate(ctx, eps0, reports)
		if err != nil {
			t.Fatal(err)
		}
		return d.Matrix, one, apps
	}
	for _, eps0 := range []float64{0.5, 2, 6} {
		m, one, apps := declared(eps0)
		drawn, err := r.SampleBlanket(ctx, eps0, draws)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := r.Accumulate(ctx, eps0, drawn)
		if err != nil {
			t.Fatal(err)
		}
		base := apps.Clone()
		if err := base.Merge(ds); err != nil {
			t.Fatal(err)
		}
		CheckFloorEstimate(t, r, eps0, m, one, base, draws, affine)
	}
	balanced := 0
	for _, eps0 := range []float64{math.Log(2), math.Log(4)} {
		m, one, apps := declared(eps0)
		if CheckFloorBalanced(t, r, eps0, m, one, apps, affine) {
			balanced++
		}
	}
	if balanced == 0 {
		t.Errorf("%s: the blanket has whole proportions at neither eps0 = ln 2 nor ln 4 (within %d draws): the variance is not checked exactly", desc.Name, MaxBalancedDraws)
	}
}

// MaxBalancedDraws bounds the draws CheckFloorBalanced looks for.
const MaxBalancedDraws = 4096

// wholeTol is how far from a whole number D omega_y may be to count as
// one: omega comes from a declared matrix, accurate to a few ulps, so
// D omega_y of a whole proportion is within 1e-12 of it for D up to
// MaxBalancedDraws; an irrational proportion is this close for every
// output of a blanket only by a coincidence of 1e-9 per output.
const wholeTol = 1e-9

// BalancedDraws returns the fewest draws D <= MaxBalancedDraws for which
// D omega_y is a whole number for every output y, and those numbers;
// ok is false when there is none.
func BalancedDraws(omega []float64) (d int64, copies []int64, ok bool) {
	for d = 1; d <= MaxBalancedDraws; d++ {
		copies = copies[:0]
		whole := true
		for _, w := range omega {
			x := float64(d) * w
			c := math.Round(x)
			if math.Abs(x-c) > wholeTol {
				whole = false
				break
			}
			copies = append(copies, int64(c))
		}
		if whole {
			return d, copies, true
		}
	}
	return 0, nil, false
}

// CheckFloorBalanced checks r's EstimateFloor at eps0 exactly, variance
// included, on draws in exact proportion. When D omega_y is a whole
// number for every output y (BalancedDraws; omega the blanket law of r's
// declared matrix m), the statistic apps plus D omega_y single reports of
// each output (single(y), as in CheckFloorEstimate) holds D draws whose
// counts are exactly their expectation. An EstimateFloor that takes the
// draws' expected share out of every count it uses must then give each
// item the Value, Post and N that Estimate gives apps alone, and a
// Variance that is Estimate's of apps plus the draws' own, D v with v
// the variance of one draw's contribution (sum_y omega_y
// Estimate(single(y))^2 - mu^2), for the items labelled in affine (all
// when nil: a mean, sum/N, is not affine in the counts). It returns
// false, checking nothing, when there is no such D.
func CheckFloorBalanced(t testing.TB, r FloorEstimator, eps0 float64, m *accountant.Matrix, single func(y int) *sdk.Statistic, apps *sdk.Statistic, affine []string) bool {
	t.Helper()
	ctx := context.Background()
	omega := BlanketLaw(m)
	d, copies, ok := BalancedDraws(omega)
	if !ok {
		return false
	}
	mu, sq := drawMoments(t, r, omega, single)
	stat := apps.Clone()
	for y := range omega {
		for j, c := range single(y).Counts {
			stat.Counts[j] += copies[y] * c
		}
	}
	stat.N += d
	stat.Draws = d
	want, err := r.Estimate(ctx, apps)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.EstimateFloor(ctx, stat)
	if err != nil {
		t.Fatalf("EstimateFloor of %d apps' reports and %d draws in exact proportion: %v", apps.N, d, err)
	}
	if got.N != apps.N || len(got.Items) != len(want.Items) {
		t.Fatalf("EstimateFloor of %d apps' reports and %d draws in exact proportion: N = %d, %d items; want %d, %d", apps.N, d, got.N, len(got.Items), apps.N, len(want.Items))
	}
	for i, it := range got.Items {
		w := want.Items[i]
		// Float64 error: the draws' expected counts D s_i are whole only
		// up to rounding, a few ulps of the counts; the scale is the
		// item's standard deviation or value.
		tol := 1e-9 * (1 + math.Abs(w.Value) + math.Sqrt(w.Variance))
		if math.Abs(it.Value-w.Value) > tol || math.Abs(it.Post-w.Post) > tol {
			t.Errorf("eps0 %g, %d draws in exact proportion, item %q: EstimateFloor value %.12g post %.12g; Estimate of the apps' reports alone %.12g, %.12g", eps0, d, it.Label, it.Value, it.Post, w.Value, w.Post)
		}
		if affine != nil && !slices.Contains(affine, it.Label) {
			continue
		}
		v := float64(d) * (sq[i] - mu[i]*mu[i])
		if wv := w.Variance + v; math.Abs(it.Variance-wv) > 1e-9*wv {
			t.Errorf("eps0 %g, %d draws in exact proportion, item %q: EstimateFloor variance %.12g; want the apps' %.12g (Estimate) plus the draws' %.12g = %.12g", eps0, d, it.Label, it.Variance, w.Variance, v, wv)
		}
	}
	return true
}

// drawMoments returns, per item, the first two moments of r's Estimate of
// one report drawn from omega: mu = sum_y omega_y Estimate(single(y)) and
// sq = sum_y omega_y Estimate(single(y))^2.
func drawMoments(t testing.TB, r FloorEstimator, omega []float64, single func(y int) *sdk.Statistic) (mu, sq []float64) {
	t.Helper()
	for y, w := range omega {
		e, err := r.Estimate(context.Background(), single(y))
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
	return mu, sq
}
