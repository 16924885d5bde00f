package summation_test

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// levels returns n reports cycling through the k+1 levels.
func levels(k, n int) [][]byte {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i % (k + 1)
	}
	return ldp.EncodeIndices(idx, k+1)
}

func BenchmarkRandomize(b *testing.B) {
	in := make([]float64, ldptest.BenchBatch)
	for i := range in {
		in[i] = float64(i) / ldptest.BenchBatch
	}
	for _, k := range []int{16, 1024} {
		ldptest.BenchRandomizeSources(b, fmt.Sprintf("k=%d", k), func(b *testing.B, src ldp.Source) sdk.Randomizer {
			return mustNew(b, summation.Options{Lo: 0, Hi: 1, K: k, Rand: src})
		}, 4, sdk.Inputs{Reals: in})
	}
}

func BenchmarkAccumulate(b *testing.B) {
	for _, k := range []int{16, 1024} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, summation.Options{Lo: 0, Hi: 1, K: k})
			ldptest.BenchAccumulate(b, r, 4, levels(k, ldptest.BenchBatch))
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, summation.Options{Lo: 0, Hi: 1, K: k})
			stat, err := r.Accumulate(b.Context(), 4, levels(k, 10*k))
			if err != nil {
				b.Fatal(err)
			}
			ldptest.BenchEstimate(b, r, stat)
		})
	}
}
