//go:build audit

package olh

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// TestConformanceAtSizeDeep runs the conformance kit at a shipped size, where
// OLH declares atoms at every default eps0: the sampler must be checked
// through Atoms (no frequency test skipped), the chi-square tests of the
// pair and of both triples at their declared inputs and the blanket tests
// must pass, and so must the privacy audit (1,000 buckets; TestConformance
// runs the whole kit at 99 in make test). The checks that do not involve
// atoms are left to TestConformance.
func TestConformanceAtSizeDeep(t *testing.T) {
	r := mustNew(t, Options{Categories: labels(1000), Rand: seeded(5)})
	rep, err := plugintest.Verify(context.Background(), r, plugintest.Options{Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}})
	if err != nil {
		t.Fatal(err)
	}
	atoms := rep.AtomTests()
	// Per default eps0 (3; g = 3, 7 and 149, all below d): the pair at x
	// and x', each triple at x, x' and x3, the pair's blanket at two other
	// inputs.
	if !rep.Passed() || len(rep.Unchecked()) != 0 || atoms != 3*10 ||
		rep.Check(plugintest.CheckFrequencies).Status != plugintest.Pass || rep.Check(plugintest.CheckPrivacy).Status != plugintest.Pass {
		t.Errorf("%d atom tests (want 30), unchecked %q:\n%s", atoms, rep.Unchecked(), rep)
	}
	if testing.Verbose() {
		t.Logf("%s", rep)
	}
}

// TestConformanceMediumDeep runs the whole kit at 20 buckets, between
// TestConformance's small and large configurations.
func TestConformanceMediumDeep(t *testing.T) {
	r := mustNew(t, Options{Categories: labels(20), Rand: seeded(3)})
	plugintest.Run(t, r, plugintest.Options{Output: r.Output, Strict: true})
}
