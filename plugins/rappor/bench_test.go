package rappor_test

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

func BenchmarkRandomize(b *testing.B) {
	for _, d := range []int{16, 256, 4096} {
		labels := ldptest.Labels(d)
		for _, mode := range modes {
			ldptest.BenchRandomizeSources(b, fmt.Sprintf("d=%d/%s", d, mode), func(b *testing.B, src ldp.Source) sdk.Randomizer {
				return mustNew(b, rappor.Options{Categories: labels, Mode: mode, Rand: src})
			}, 2, sdk.Inputs{Categories: ldptest.Cycle(labels, ldptest.BenchBatch)})
		}
	}
}

func BenchmarkAccumulate(b *testing.B) {
	for _, d := range []int{16, 256, 4096} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			r := mustNew(b, rappor.Options{Categories: ldptest.Labels(d), Rand: ldptest.Seeded(1)})
			reports, err := r.Randomize(b.Context(), 2, sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(d), ldptest.BenchBatch)})
			if err != nil {
				b.Fatal(err)
			}
			ldptest.BenchAccumulate(b, r, 2, reports)
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	for _, d := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			r := mustNew(b, rappor.Options{Categories: ldptest.Labels(d), Rand: ldptest.Seeded(1)})
			in := sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(d), 100)}
			ldptest.BenchEstimate(b, r, ldptest.Statistic(b, r, 2, in))
		})
	}
}
