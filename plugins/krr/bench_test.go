package krr_test

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

func BenchmarkRandomize(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000} {
		labels := ldptest.Labels(k)
		ldptest.BenchRandomizeSources(b, fmt.Sprintf("k=%d", k), func(b *testing.B, src ldp.Source) sdk.Randomizer {
			return mustNew(b, krr.Options{Categories: labels, Rand: src})
		}, 2, sdk.Inputs{Categories: ldptest.Cycle(labels, ldptest.BenchBatch)})
	}
}

func BenchmarkAccumulate(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, krr.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(1)})
			idx := make([]int, ldptest.BenchBatch)
			for i := range idx {
				idx[i] = i % k
			}
			ldptest.BenchAccumulate(b, r, 2, ldp.EncodeIndices(idx, k))
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, krr.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(1)})
			in := sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(k), 10*k)}
			ldptest.BenchEstimate(b, r, ldptest.Statistic(b, r, 2, in))
		})
	}
}
