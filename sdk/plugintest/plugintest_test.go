package plugintest_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

func seeded(seed uint64) ldp.Source {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

func labels(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

func must[R any](r R, err error) R {
	if err != nil {
		panic(err)
	}
	return r
}

// TestBuiltins runs the kit on every built-in randomizer: a small
// configuration (seeded, declared as a matrix, so that the frequency check
// runs) and a default one from FromConfig (crypto randomness, declared by
// atoms). Each run fails falsely with probability at most 1e-6.
func TestBuiltins(t *testing.T) {
	// Google's Laplace sampler and RAPPOR's 100-bit reports are the
	// costliest under make test's -race: laplace/default and
	// rappor/default run here with a quarter of the default frequency
	// draws (the frequency and atoms checks still see 5000 reports per
	// input) and a twentieth of the estimator's;
	// TestBuiltinsLaplaceDeep and TestBuiltinsRapporDeep (make audit) run
	// the defaults.
	light := plugintest.Options{Samples: 5000, Batches: 50, BatchSize: 200}
	tests := []struct {
		name string
		r    sdk.Randomizer
		opts plugintest.Options
	}{
		{"krr/small", must(krr.New(krr.Options{Categories: labels(3), Other: "other", Rand: seeded(1)})), plugintest.Options{}},
		{"krr/default", must(krr.FromConfig(sdk.Config{Categories: labels(100)})), plugintest.Options{}},
		{"hadamard/small", must(hadamard.New(hadamard.Options{Categories: labels(4), Other: "other", Rand: seeded(2)})), plugintest.Options{}},
		{"hadamard/default", must(hadamard.FromConfig(sdk.Config{Categories: labels(100), Other: "other"})), plugintest.Options{}},
		{"rappor/small", must(rappor.New(rappor.Options{Categories: labels(5), Other: "other", Mode: rappor.Symmetric, Rand: seeded(3)})), plugintest.Options{}},
		{"rappor/small-oue", must(rappor.New(rappor.Options{Categories: labels(4), Rand: seeded(4)})), plugintest.Options{}},
		{"rappor/default", must(rappor.FromConfig(sdk.Config{Categories: labels(100)})), light},
		{"summation/small", must(summation.New(summation.Options{Lo: -1, Hi: 3, K: 3, Rand: seeded(5)})), plugintest.Options{}},
		{"summation/default", must(summation.FromConfig(sdk.Config{Lo: 0, Hi: 1000, Params: map[string]string{"k": "100"}})), plugintest.Options{}},
		{"laplace/default", must(laplace.FromConfig(sdk.Config{Lo: -5, Hi: 60})), light},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every built-in has its sampler checked at every size it
			// ships: Strict fails a run that leaves it unchecked.
			tt.opts.Strict = true
			plugintest.Run(t, tt.r, tt.opts)
		})
	}
}
