package plugintest_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// floorLeftIn forgets to take the draws out: the estimate of the apps'
// reports and the draws as if all were apps'. k-RR with k = 4, 1000
// draws per batch: every bucket is 250 off, against a standard error of
// the mean of 100 batches near 6.
type floorLeftIn struct{ *krr.Randomizer }

func (f floorLeftIn) EstimateFloor(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	c := s.Clone()
	c.Draws = 0
	e, err := f.Randomizer.Estimate(ctx, c)
	if err == nil {
		e.N -= s.Draws
	}
	return e, err
}

// floorVarianceOut takes the draws' mean out but not their variance: at
// eps0 = 1 the draws' part, 1000 (1/4)(3/4)/(p*-q*)^2 = 2076, is about
// half the estimate's variance, so the variance statistic of 300 batches
// is near 299·2.1 = 630 (its standard deviation about 55) against a
// threshold near 430.
type floorVarianceOut struct{ *krr.Randomizer }

func (f floorVarianceOut) EstimateFloor(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	e, err := f.Randomizer.EstimateFloor(ctx, s)
	if err != nil {
		return e, err
	}
	p := f.Pure(s.Eps0)
	k := float64(f.K())
	vd := float64(s.Draws) * (1 / k) * (1 - 1/k) / (p.Diff * p.Diff)
	for i := range e.Items {
		it := &e.Items[i]
		it.Variance -= vd
		h := (it.Hi - it.Lo) / 2 * math.Sqrt(it.Variance/(it.Variance+vd))
		it.Lo, it.Hi = it.Value-h, it.Value+h
	}
	return e, nil
}

// noFloor draws from its blanket but has no EstimateFloor.
type noFloor struct {
	sdk.Randomizer
	bs sdk.BlanketSampler
}

func (n noFloor) SampleBlanket(ctx context.Context, eps0 float64, count int) ([][]byte, error) {
	return n.bs.SampleBlanket(ctx, eps0, count)
}

// estimateTakesDraws has an Estimate that takes a statistic with draws,
// counting them as apps' reports.
type estimateTakesDraws struct{ *krr.Randomizer }

func (e estimateTakesDraws) Estimate(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	c := s.Clone()
	c.Draws = 0
	return e.Randomizer.Estimate(ctx, c)
}

// floorAnyDraws takes any Draws, clamping them to [0, N-1].
type floorAnyDraws struct{ *krr.Randomizer }

func (f floorAnyDraws) EstimateFloor(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	c := s.Clone()
	c.Draws = min(max(c.Draws, 0), c.N-1)
	return f.Randomizer.EstimateFloor(ctx, c)
}

// floorPostOfAll post-processes for all N reports, the draws included:
// its post-processed counts sum to N, not N - Draws.
type floorPostOfAll struct{ *krr.Randomizer }

func (f floorPostOfAll) EstimateFloor(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	e, err := f.Randomizer.EstimateFloor(ctx, s)
	if err != nil || s.Draws == 0 {
		return e, err
	}
	scale := float64(s.N) / float64(s.N-s.Draws)
	for i := range e.Items {
		it := &e.Items[i]
		it.Post, it.PostLo, it.PostHi = it.Post*scale, it.PostLo*scale, it.PostHi*scale
	}
	return e, nil
}

// floorOff answers what EstimateFloor should plus a thousandth, also
// without draws: not Estimate's estimate.
type floorOff struct{ *krr.Randomizer }

func (f floorOff) EstimateFloor(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	e, err := f.Randomizer.EstimateFloor(ctx, s)
	if err != nil {
		return e, err
	}
	for i := range e.Items {
		it := &e.Items[i]
		it.Value, it.Lo, it.Hi = it.Value+1e-3, it.Lo+1e-3, it.Hi+1e-3
	}
	return e, nil
}

// TestBrokenFloorEstimatesFail: the floor check fails an EstimateFloor
// that leaves the draws in, one that forgets their variance, a sampler
// without EstimateFloor, an Estimate that takes draws, an EstimateFloor
// that takes negative draws or more than N, one whose post-processing
// counts the draws, and one that is not Estimate without draws; the real
// k-RR passes it.
func TestBrokenFloorEstimatesFail(t *testing.T) {
	newK := func(seed uint64) *krr.Randomizer {
		return must(krr.New(krr.Options{Categories: labels(3), Other: "other", Rand: seeded(seed)}))
	}
	only := []string{plugintest.CheckDeclaration, plugintest.CheckFrequencies, plugintest.CheckPrivacy, plugintest.CheckBlanket,
		plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}
	for _, tt := range []struct {
		name    string
		r       sdk.Randomizer
		batches int
		fails   bool
		says    string
	}{
		{"draws left in", floorLeftIn{newK(31)}, 100, true, "mean"},
		{"draws' variance left out", floorVarianceOut{newK(32)}, 300, true, "variance"},
		{"no EstimateFloor", noFloor{newK(33), newK(34)}, 100, true, "implement sdk.FloorEstimator"},
		{"Estimate takes draws", estimateTakesDraws{newK(36)}, 20, true, "draws: Estimate refuses"},
		{"negative draws taken", floorAnyDraws{newK(37)}, 20, true, "negative draws refused"},
		{"draws above N taken", floorAnyDraws{newK(38)}, 20, true, "more draws than reports refused"},
		{"post-processed for N", floorPostOfAll{newK(39)}, 20, true, "draws: items valid"},
		{"not Estimate without draws", floorOff{newK(40)}, 20, true, "no draws: Estimate's"},
		{"k-RR", newK(35), 300, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := plugintest.Options{Eps0s: []float64{1}, Batches: tt.batches, Skip: only}
			rep, err := plugintest.Verify(t.Context(), tt.r, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", rep)
			c := rep.Check(plugintest.CheckFloorEstimate)
			var failed []string
			for _, ts := range c.Tests {
				if ts.Status == plugintest.Fail {
					failed = append(failed, ts.Name+": "+ts.Message)
				}
			}
			if tt.fails != (c.Status == plugintest.Fail) || !strings.Contains(strings.Join(failed, "\n"), tt.says) {
				t.Errorf("floor check %s, want failed = %v naming %q:\n%s", c.Status, tt.fails, tt.says, rep)
			}
		})
	}
}
