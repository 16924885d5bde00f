package rappor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
)

const benchBatch = 4096

var (
	sinkReports [][]byte
	sinkStat    *sdk.Statistic
	sinkEst     *sdk.Estimate
)

func BenchmarkRandomize(b *testing.B) {
	ctx := context.Background()
	for _, d := range []int{16, 256, 4096} {
		for _, mode := range modes {
			for _, src := range []string{"crypto", "chacha8"} {
				b.Run(fmt.Sprintf("d=%d/%s/src=%s", d, mode, src), func(b *testing.B) {
					opts := rappor.Options{Categories: labels(d), Mode: mode}
					if src == "chacha8" {
						opts.Rand = seeded(1)
					}
					r := mustNew(b, opts)
					in := make([]string, benchBatch)
					for i := range in {
						in[i] = opts.Categories[i%d]
					}
					for b.Loop() {
						sinkReports, _ = r.Randomize(ctx, 2, sdk.Inputs{Categories: in})
					}
					b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
				})
			}
		}
	}
}

func BenchmarkAccumulate(b *testing.B) {
	ctx := context.Background()
	for _, d := range []int{16, 256, 4096} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			r := mustNew(b, rappor.Options{Categories: labels(d), Rand: seeded(1)})
			labs := labels(d)
			in := make([]string, benchBatch)
			for i := range in {
				in[i] = labs[i%d]
			}
			reports, err := r.Randomize(ctx, 2, sdk.Inputs{Categories: in})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				sinkStat, _ = r.Accumulate(ctx, 2, reports)
			}
			b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	ctx := context.Background()
	for _, d := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			r := mustNew(b, rappor.Options{Categories: labels(d), Rand: seeded(1)})
			labs := labels(d)
			in := make([]string, 100)
			for i := range in {
				in[i] = labs[i%d]
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
