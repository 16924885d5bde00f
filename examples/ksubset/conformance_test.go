package ksubset_test

import (
	"testing"

	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// TestConformance runs the conformance kit on the plugin in process,
// Strict (its sampler checked at every eps0): on 6 buckets with s = 2,
// whose 15 outputs it declares as a matrix (every output's probability
// tested, and its atoms compared with the matrix through
// sdk.FormDeclarer), and on 100 buckets with the default s = 12, whose
// C(100, 12) ≈ 1e15 outputs it declares by atoms (the atoms' masses and
// the blanket tested through sdk.AtomMapper). blanket plugin verify runs
// the same kit through the plugin binary (TestDocsWalkthrough).
func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts ksubset.Options
	}{
		{"k=6 s=2 matrix", ksubset.Options{Categories: ldptest.Labels(5), Other: "other", S: 2}},
		{"k=100 s=12 atoms", ksubset.Options{Categories: ldptest.Labels(100)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plugintest.Run(t, mustNew(t, tt.opts), plugintest.Options{Strict: true})
		})
	}
}
