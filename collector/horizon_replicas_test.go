package collector

import (
	"context"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestHorizonSameOnEveryReplica: replicas of one store state the same
// horizon guarantee to the last bit, whatever each computed before (one
// stated the horizon at every batch, the other only at the end, after
// other batches' guarantees).
func TestHorizonSameOnEveryReplica(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			// Uncalibrated: the replica that publishes the plan calibrates
			// it, the other reads it back from the store.
			cs := openReplicas(t, kind, replicaCount(kind), func() *plan.Plan {
				p := testPlan(t, 10)
				for i := range p.Metrics {
					p.Metrics[i].Eps0, p.Metrics[i].Delta = 0, 0
				}
				p.Guarantee = nil
				return p
			})
			ins := ingesters(cs)
			c := cs[0]
			ep := c.Epoch()
			horizon := func(c *Collector) float64 {
				t.Helper()
				rows, err := c.st.statistics(ctx, metric)
				if err != nil {
					t.Fatal(err)
				}
				h, err := c.horizonGuarantee(ctx, rows)
				if err != nil || h == nil || h.Eps == nil {
					t.Fatalf("horizon %+v, %v", h, err)
				}
				return *h.Eps
			}
			for i, n := range []int{1300, 1100, 1700, 1200, 3000} {
				p := today
				if i%2 == 1 {
					p = report.Period{Start: today.Start - 86400, Length: 86400}
				}
				body := batchBody(report.PeriodPoolKey(metric, ep, p), sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(n, uint64(i)), uint64(i), p))
				if _, err := ins[i%2].Ingest(ctx, body); err != nil {
					t.Fatal(err)
				}
				horizon(ins[1]) // a history of its own
			}
			var want float64
			for i, c := range ins {
				got := horizon(c)
				if i == 0 {
					want = got
				} else if math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("replica %d states eps %.17g, replica 0 %.17g", i, got, want)
				}
			}
			t.Logf("%.17g", want)
		})
	}
}
