package laplace

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// floorTol is the relative tolerance of the exact comparisons of
// TestEstimateFloor: sums of a few thousand grid indices in float64 and
// a handful of products, on either side.
const floorTol = 1e-9

// Sizes of TestEstimateFloor's Monte Carlo: floorReps estimates of the
// same apps' reports with floorDraws fresh draws each, 6000 draws per
// eps0 (Google's sampler is the costliest part under make test's -race).
const (
	floorReps  = 60
	floorDraws = 100
)

// floorAlpha is the false-failure rate of each of the Monte Carlo's four
// tests (mean and variance at two eps0), 1e-6 in all. Each estimate
// varies by a sum of floorDraws independent draws, whose excess kurtosis
// is that of one draw (3, a two-sided geometric's) over floorDraws: 0.03,
// which widens the chi-square's spread by about 1.5%, moving its 1e-6
// tail no further than 2e-6.
const floorAlpha = 1e-6 / 4

// report encodes a report of value y (in [0, 1] units), as Randomize does.
func report(y float64) []byte {
	b := make([]byte, ReportBytes)
	binary.BigEndian.PutUint64(b, math.Float64bits(y))
	return b
}

// TestEstimateFloor checks EstimateFloor (floor.go) against the plugin's
// own Estimate, which does not use floor.go's claims, in three ways at
// eps0 0.5 and 2:
//
//   - Draws in symmetric pairs. The blanket is the law of a report of the
//     middle of the range (TestBlanketIsMiddleLaw), symmetric about the
//     grid index m/2; reports at m/2 ± j contribute exactly one range
//     width to the sum of grid indices, as their expectation does. So the
//     apps' reports with D draws in such pairs must estimate the apps'
//     Estimate sum and mean exactly, with the variance the apps' plus D
//     times the variance Estimate gives one report (a draw is a report of
//     a fixed input, as an app's is), and N - D reports.
//   - Real draws (SampleBlanket), once: the sum is Estimate's of all the
//     reports less D times the middle of the range, the variance
//     Estimate's of all N, and with no draws EstimateFloor is Estimate.
//   - Monte Carlo: floorReps estimates of the same apps' reports, each
//     with floorDraws fresh draws, vary only by their draws: their mean
//     must be the apps' Estimate (z-test) and their variance floorDraws
//     times Estimate's variance of one report (chi-square), each at
//     floorAlpha.
//
// And the refusals (ldptest.CheckFloorRefusals).
func TestEstimateFloor(t *testing.T) {
	ctx := context.Background()
	r, err := New(Options{Lo: -5, Hi: 60})
	if err != nil {
		t.Fatal(err)
	}
	mid := (r.lo + r.hi) / 2
	in := make([]float64, 500)
	for i := range in {
		in[i] = r.lo + (r.hi-r.lo)*float64(i%37)/36
	}
	near := func(got, want, scale float64) bool { return math.Abs(got-want) <= floorTol*(math.Abs(want)+scale) }
	for _, eps0 := range []float64{0.5, 2} {
		reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Reals: in})
		if err != nil {
			t.Fatal(err)
		}
		apps, err := r.Accumulate(ctx, eps0, reports)
		if err != nil {
			t.Fatal(err)
		}
		want, err := r.Estimate(ctx, apps)
		if err != nil {
			t.Fatal(err)
		}
		one, err := r.Accumulate(ctx, eps0, [][]byte{report(0.5)})
		if err != nil {
			t.Fatal(err)
		}
		single, err := r.Estimate(ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		v1 := single.Items[0].Variance // of one report's contribution to the sum

		// Draws in symmetric pairs about the middle.
		g := Grid(eps0)
		var pairs [][]byte
		for _, j := range []float64{0, 1, 12345, 1 << 20, 3 << 30, 1 << 40} {
			pairs = append(pairs, report(0.5+g*j), report(0.5-g*j))
		}
		d := int64(len(pairs))
		ds, err := r.Accumulate(ctx, eps0, pairs)
		if err != nil || ds.N != d {
			t.Fatalf("eps0 %g: the pairs accumulate to %+v, %v", eps0, ds, err)
		}
		stat := apps.Clone()
		if err := stat.Merge(ds); err != nil {
			t.Fatal(err)
		}
		stat.Draws = d
		got, err := r.EstimateFloor(ctx, stat)
		if err != nil {
			t.Fatal(err)
		}
		if got.N != apps.N {
			t.Errorf("eps0 %g: EstimateFloor counts N = %d, want the apps' %d", eps0, got.N, apps.N)
		}
		for i, it := range got.Items {
			w := want.Items[i]
			sd := math.Sqrt(w.Variance)
			if it.Label != w.Label || !near(it.Value, w.Value, sd) || !near(it.Post, w.Post, sd) {
				t.Errorf("eps0 %g, %d draws in symmetric pairs, item %q: EstimateFloor %q %.12g (post %.12g), the apps' Estimate %.12g (%.12g)", eps0, d, w.Label, it.Label, it.Value, it.Post, w.Value, w.Post)
			}
			vd := float64(d) * v1
			if it.Label == "mean" {
				vd /= float64(apps.N * apps.N)
			}
			if wv := w.Variance + vd; !near(it.Variance, wv, 0) {
				t.Errorf("eps0 %g, %d draws in symmetric pairs, item %q: variance %.12g, want the apps' %.12g plus the draws' %.12g", eps0, d, it.Label, it.Variance, w.Variance, vd)
			}
		}
		ldptest.CheckFloorRefusals(t, r, stat)

		// Real draws, once.
		drawn := ldptest.SampleBlanket(t, r, eps0, 300)
		all, err := r.Accumulate(ctx, eps0, append(reports, drawn...))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := r.Estimate(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if zero, err := r.EstimateFloor(ctx, all); err != nil || zero.N != plain.N || zero.Items[0] != plain.Items[0] || zero.Items[1] != plain.Items[1] {
			t.Errorf("eps0 %g: EstimateFloor without draws %+v, %v; Estimate %+v", eps0, zero, err, plain)
		}
		all.Draws = int64(len(drawn))
		got, err = r.EstimateFloor(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		sum, mean := got.Items[0], got.Items[1]
		wantSum := plain.Items[0].Value - float64(all.Draws)*mid
		if sd := math.Sqrt(plain.Items[0].Variance); !near(sum.Value, wantSum, sd) || !near(mean.Value, wantSum/float64(apps.N), sd/float64(apps.N)) || !near(sum.Variance, plain.Items[0].Variance, 0) {
			t.Errorf("eps0 %g, %d draws: sum %.12g (variance %.12g), mean %.12g; want Estimate's sum less the draws' middles %.12g (variance %.12g), mean %.12g", eps0, all.Draws, sum.Value, sum.Variance, mean.Value, wantSum, plain.Items[0].Variance, wantSum/float64(apps.N))
		}

		// Monte Carlo over the draws.
		sums := make([]float64, floorReps)
		for i := range sums {
			ds, err := r.Accumulate(ctx, eps0, ldptest.SampleBlanket(t, r, eps0, floorDraws))
			if err != nil {
				t.Fatal(err)
			}
			stat := apps.Clone()
			if err := stat.Merge(ds); err != nil {
				t.Fatal(err)
			}
			stat.Draws = floorDraws
			e, err := r.EstimateFloor(ctx, stat)
			if err != nil {
				t.Fatal(err)
			}
			sums[i] = e.Items[0].Value
		}
		ldptest.CheckMean(t, "sum of the apps' reports with fresh draws", sums, want.Items[0].Value, floorDraws*v1, floorAlpha)
		ldptest.CheckVariance(t, "sum of the apps' reports with fresh draws", sums, floorDraws*v1, floorAlpha)
	}
}
