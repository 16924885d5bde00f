package summation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

const benchBatch = 4096

var (
	sinkReports [][]byte
	sinkStat    *sdk.Statistic
	sinkEst     *sdk.Estimate
)

func BenchmarkRandomize(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024} {
		for _, src := range []string{"crypto", "chacha8"} {
			b.Run(fmt.Sprintf("k=%d/src=%s", k, src), func(b *testing.B) {
				opts := summation.Options{Lo: 0, Hi: 1, K: k}
				if src == "chacha8" {
					opts.Rand = seeded(1)
				}
				r := mustNew(b, opts)
				in := make([]float64, benchBatch)
				for i := range in {
					in[i] = float64(i) / benchBatch
				}
				for b.Loop() {
					sinkReports, _ = r.Randomize(ctx, 4, sdk.Inputs{Reals: in})
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
			})
		}
	}
}

func BenchmarkAccumulate(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, summation.Options{Lo: 0, Hi: 1, K: k})
			idx := make([]int, benchBatch)
			for i := range idx {
				idx[i] = i % (k + 1)
			}
			reports := ldp.EncodeIndices(idx, k+1)
			for b.Loop() {
				sinkStat, _ = r.Accumulate(ctx, 4, reports)
			}
			b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, summation.Options{Lo: 0, Hi: 1, K: k})
			idx := make([]int, 10*k)
			for i := range idx {
				idx[i] = i % (k + 1)
			}
			stat, err := r.Accumulate(ctx, 4, ldp.EncodeIndices(idx, k+1))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				sinkEst, _ = r.Estimate(ctx, stat)
			}
		})
	}
}
