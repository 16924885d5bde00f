package ldptest

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// BenchBatch is the number of inputs or reports in a benchmark batch.
const BenchBatch = 4096

// Sink receives the results of the benchmarked calls so the compiler
// keeps them.
var Sink struct {
	Reports [][]byte
	Stat    *sdk.Statistic
	Est     *sdk.Estimate
}

// BenchRandomizeSources runs BenchRandomize in two sub-benchmarks,
// name/src=crypto and name/src=chacha8: newR builds the randomizer with
// the given source, nil for crypto/rand and Seeded(1) for ChaCha8.
func BenchRandomizeSources(b *testing.B, name string, newR func(b *testing.B, src ldp.Source) sdk.Randomizer, eps0 float64, in sdk.Inputs) {
	for _, src := range []string{"crypto", "chacha8"} {
		b.Run(name+"/src="+src, func(b *testing.B) {
			var s ldp.Source
			if src == "chacha8" {
				s = Seeded(1)
			}
			BenchRandomize(b, newR(b, s), eps0, in)
		})
	}
}

// BenchRandomize measures r.Randomize of the batch in at eps0 and reports
// the throughput in reports/s.
func BenchRandomize(b *testing.B, r sdk.Randomizer, eps0 float64, in sdk.Inputs) {
	ctx := context.Background()
	for b.Loop() {
		Sink.Reports, _ = r.Randomize(ctx, eps0, in)
	}
	b.ReportMetric(float64(b.N)*float64(in.Len())/b.Elapsed().Seconds(), "reports/s")
}

// BenchAccumulate measures r.Accumulate of reports at eps0 and reports the
// throughput in reports/s.
func BenchAccumulate(b *testing.B, r sdk.Randomizer, eps0 float64, reports [][]byte) {
	ctx := context.Background()
	for b.Loop() {
		Sink.Stat, _ = r.Accumulate(ctx, eps0, reports)
	}
	b.ReportMetric(float64(b.N)*float64(len(reports))/b.Elapsed().Seconds(), "reports/s")
}

// BenchEstimate measures r.Estimate of stat.
func BenchEstimate(b *testing.B, r sdk.Randomizer, stat *sdk.Statistic) {
	ctx := context.Background()
	for b.Loop() {
		Sink.Est, _ = r.Estimate(ctx, stat)
	}
}
