package hadamard_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

const benchBatch = 4096

var (
	sinkReports [][]byte
	sinkStat    *sdk.Statistic
	sinkEst     *sdk.Estimate
	sinkInt     int64
)

func BenchmarkRandomize(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024, 10_000} {
		for _, src := range []string{"crypto", "chacha8"} {
			b.Run(fmt.Sprintf("k=%d/src=%s", k, src), func(b *testing.B) {
				opts := hadamard.Options{Categories: labels(k)}
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

func BenchmarkFWHT(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 14, 1 << 16} {
		b.Run(fmt.Sprintf("K=%d", n), func(b *testing.B) {
			a := make([]int64, n)
			for b.Loop() {
				hadamard.FWHT(a)
			}
			sinkInt = a[0]
		})
	}
}

func BenchmarkAccumulate(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, hadamard.Options{Categories: labels(k), Rand: seeded(1)})
			idx := make([]int, benchBatch)
			for i := range idx {
				idx[i] = i % r.Outputs()
			}
			reports := ldp.EncodeIndices(idx, r.Outputs())
			for b.Loop() {
				sinkStat, _ = r.Accumulate(ctx, 2, reports)
			}
			b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "reports/s")
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{16, 1024, 10_000, 1<<16 - 1} { // the last has K = 2^16
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, hadamard.Options{Categories: labels(k), Rand: seeded(1)})
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
