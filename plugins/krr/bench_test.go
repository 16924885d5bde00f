package krr_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
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
	for _, k := range []int{16, 1024, 10_000} {
		for _, src := range []string{"crypto", "chacha8"} {
			b.Run(fmt.Sprintf("k=%d/src=%s", k, src), func(b *testing.B) {
				opts := krr.Options{Categories: labels(k)}
				if src == "chacha8" {
					opts.Rand = seeded(1)
				}
				r := mustNew(b, opts)
				in := make([]string, benchBatch)
				for i := range in {
					in[i] = opts.Categories[i%k]
				}
				for b.Loop() {
					sinkReports, _ = r.Randomize(ctx, 2, sdk.Inputs{Categories: in})
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
			})
		}
	}
}

func BenchmarkAccumulate(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, krr.Options{Categories: labels(k), Rand: seeded(1)})
			idx := make([]int, benchBatch)
			for i := range idx {
				idx[i] = i % k
			}
			reports := ldp.EncodeIndices(idx, k)
			for b.Loop() {
				sinkStat, _ = r.Accumulate(ctx, 2, reports)
			}
			b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, krr.Options{Categories: labels(k), Rand: seeded(1)})
			labs := labels(k)
			in := make([]string, 10*k)
			for i := range in {
				in[i] = labs[i%k]
			}
			reports, err := r.Randomize(ctx, 2, sdk.Inputs{Categories: in})
			if err != nil {
				b.Fatal(err)
			}
			stat, err := r.Accumulate(ctx, 2, reports)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				sinkEst, _ = r.Estimate(ctx, stat)
			}
		})
	}
}
