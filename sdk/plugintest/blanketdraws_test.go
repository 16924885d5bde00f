package plugintest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// drawsNoAtoms draws from k-RR's blanket but hides its sdk.AtomMapper:
// over 100 buckets, where k-RR declares atoms, the kit cannot read the
// draws.
type drawsNoAtoms struct {
	sdk.Randomizer
	bs sdk.BlanketSampler
}

// EstimateFloor passes through to the wrapped randomizer's (a shuffler
// with a floor needs it; the floor estimate check fails without it).
func (d drawsNoAtoms) EstimateFloor(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	return d.bs.(sdk.FloorEstimator).EstimateFloor(ctx, s)
}

func (d drawsNoAtoms) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	return d.bs.SampleBlanket(ctx, eps0, n)
}

// TestBlanketDrawsChecked: k-RR's blanket draws are tested at every eps0
// in process and through the plugin protocol, and pass; a randomizer
// without sdk.BlanketSampler (in process, or a plugin answering
// UNIMPLEMENTED) has the check skipped with a message that says what to
// implement and that the shuffler's floor is unavailable, while its
// summary stays a bare PASS and Strict passes (the interface is
// optional); draws the kit cannot read, or the check skipped, make the
// summary say so and fail Strict.
func TestBlanketDrawsChecked(t *testing.T) {
	opts := plugintest.Options{Eps0s: []float64{1, 4}, Samples: 5000, Skip: []string{plugintest.CheckPrivacy, plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}}
	strict := opts
	strict.Strict = true
	verify := func(r sdk.Randomizer, o plugintest.Options) *plugintest.Report {
		t.Helper()
		rep, err := plugintest.Verify(t.Context(), r, o)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	passed := func(rep *plugintest.Report) (n int) {
		for _, tt := range rep.Check(plugintest.CheckBlanket).Tests {
			if tt.Status == plugintest.Pass && tt.Alpha > 0 {
				n++
			}
		}
		return n
	}
	cfg := sdk.Config{Categories: labels(4)}
	for name, r := range map[string]sdk.Randomizer{
		"in process": must(krr.New(krr.Options{Categories: labels(4), Rand: seeded(60)})),
		"over gRPC":  served(t, sdk.FactoryOf(krr.FromConfig), cfg),
	} {
		if rep := verify(r, strict); !rep.Passed() || passed(rep) != 2 || rep.Summary() != "PASS" {
			t.Errorf("k-RR %s: %d blanket tests passed (want 2), summary %q:\n%s", name, passed(rep), rep.Summary(), rep)
		}
	}
	plain := func(cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := krr.FromConfig(cfg)
		return struct{ sdk.Randomizer }{r}, err
	}
	for name, r := range map[string]sdk.Randomizer{
		"in process": struct{ sdk.Randomizer }{must(krr.New(krr.Options{Categories: labels(4), Rand: seeded(61)}))},
		"over gRPC":  served(t, plain, cfg),
	} {
		rep := verify(r, strict)
		c := rep.Check(plugintest.CheckBlanket)
		if !rep.Passed() || c.Status != plugintest.Skip || rep.Summary() != "PASS" || len(rep.BlanketUnchecked()) != 0 ||
			!strings.Contains(rep.String(), "implement sdk.BlanketSampler") || !strings.Contains(rep.String(), "floor") {
			t.Errorf("without BlanketSampler %s: blanket %s, summary %q:\n%s", name, c.Status, rep.Summary(), rep)
		}
	}
	large := must(krr.New(krr.Options{Categories: labels(100), Rand: seeded(62)}))
	unread := verify(drawsNoAtoms{noAtoms{large}, large}, opts)
	if u := unread.BlanketUnchecked(); len(u) != 2 || !strings.HasPrefix(unread.Summary(), "PASS, SAMPLER UNCHECKED") {
		t.Errorf("draws the kit cannot read: %d blanket tests unchecked (want 2), summary %q:\n%s", len(u), unread.Summary(), unread)
	}
	if rep := verify(drawsNoAtoms{noAtoms{large}, large}, strict); rep.Passed() || rep.Check(plugintest.CheckBlanket).Status != plugintest.Fail {
		t.Errorf("draws the kit cannot read, Strict: the blanket check did not fail:\n%s", rep)
	}
	skipped := opts
	skipped.Skip = append(skipped.Skip, plugintest.CheckBlanket)
	small := must(krr.New(krr.Options{Categories: labels(4), Rand: seeded(63)}))
	if rep := verify(small, skipped); !strings.HasPrefix(rep.Summary(), "PASS, BLANKET DRAWS UNCHECKED") {
		t.Errorf("blanket check skipped: summary %q", rep.Summary())
	}
	skipped.Strict = true
	if rep := verify(small, skipped); rep.Passed() {
		t.Errorf("blanket check skipped under Strict: passed:\n%s", rep)
	}
}
