package longitudinal

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// BenchmarkStep steps a batch of users through a whole tree of 64 periods,
// one Step call per period (what a simulation or a plugin process serving
// many users does), reporting the cost per user-period.
func BenchmarkStep(b *testing.B) {
	const H, users = 64, ldptest.BenchBatch
	r, err := New(Options{Tree: H, Changes: 2, Rand: seeded(1)})
	if err != nil {
		b.Fatal(err)
	}
	in := sdk.Inputs{Categories: make([]string, users)}
	for i := range in.Categories {
		in.Categories[i] = labels(i % 2)[0]
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		states := make([][]byte, users)
		for p := range int64(H) {
			_, next, err := r.Step(ctx, 2, p, states, in)
			if err != nil {
				b.Fatal(err)
			}
			states = next
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*H*users), "ns/user-period")
}

// BenchmarkAccumulate accumulates one period's reports of a tree of 64.
func BenchmarkAccumulate(b *testing.B) {
	r, err := New(Options{Tree: 64, Changes: 2, Rand: seeded(2)})
	if err != nil {
		b.Fatal(err)
	}
	in := sdk.Inputs{Categories: make([]string, ldptest.BenchBatch)}
	for i := range in.Categories {
		in.Categories[i] = "true"
	}
	// Period 63 is the tree's last: every level sends.
	reports, _, err := r.Step(ctx, 2, 63, make([][]byte, ldptest.BenchBatch), in)
	if err != nil {
		b.Fatal(err)
	}
	ldptest.BenchAccumulate(b, r, 2, reports)
}

// BenchmarkEstimate estimates from a tree's merged statistic.
func BenchmarkEstimate(b *testing.B) {
	for _, H := range []int{64, 4096} {
		b.Run(fmt.Sprintf("tree=%d", H), func(b *testing.B) {
			r, err := New(Options{Tree: H, Changes: 2, Rand: seeded(3)})
			if err != nil {
				b.Fatal(err)
			}
			in := sdk.Inputs{Categories: []string{"true", "false", "true"}}
			reports, _, err := r.Step(ctx, 2, int64(H-1), make([][]byte, 3), in)
			if err != nil {
				b.Fatal(err)
			}
			st, err := r.Accumulate(ctx, 2, reports)
			if err != nil {
				b.Fatal(err)
			}
			ldptest.BenchEstimate(b, r, st)
		})
	}
}
