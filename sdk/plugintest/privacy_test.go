package plugintest_test

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// scaledKRR samples at factor × eps0 what it declares at eps0, keeping
// k-RR's AtomMapper.
type scaledKRR struct {
	*krr.Randomizer
	factor float64
}

func (s scaledKRR) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	return s.Randomizer.Randomize(ctx, s.factor*eps0, in)
}

// TestPrivacyAudit: the empirical audit passes k-RR over 4 buckets
// (matrix) and 100 (atoms) at eps0 = 2 with a bound that comes close to 2
// (1.85 and 1.2 in a run of 20,000 draws per input: the rarer the
// telling output, the wider its confidence bounds), and fails both when
// they sample at 1.5 eps0 (true eps 3: bounds 2.8 and 2.5, far above 2).
func TestPrivacyAudit(t *testing.T) {
	only := plugintest.Options{Eps0s: []float64{2}, Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}}
	small := func(seed uint64) *krr.Randomizer {
		return must(krr.New(krr.Options{Categories: labels(3), Other: "other", Rand: seeded(seed)}))
	}
	for _, tt := range []struct {
		name     string
		r        sdk.Randomizer
		fail     bool
		min, max float64 // the largest bound's range
	}{
		{"k=4", small(40), false, 1.5, 2},
		{"k=100", newKRR100(41), false, 0.9, 2},
		{"k=4 at 1.5 eps0", scaledKRR{small(42), 1.5}, true, 2, 3},
		{"k=100 at 1.5 eps0", scaledKRR{newKRR100(43), 1.5}, true, 2, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := plugintest.Verify(t.Context(), tt.r, only)
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Check(plugintest.CheckPrivacy)
			best := -1.0
			for _, x := range c.Tests {
				best = max(best, x.Statistic)
			}
			t.Logf("largest bound %.3f", best)
			if want := map[bool]plugintest.Status{false: plugintest.Pass, true: plugintest.Fail}[tt.fail]; c.Status != want || best < tt.min || best > tt.max {
				t.Errorf("privacy %s with largest bound %.3g, want %s with a bound in [%g, %g]:\n%s", c.Status, best, want, tt.min, tt.max, rep)
			}
		})
	}
}
