package collector

import (
	"context"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// TestStoredSameOnEveryReplica ingests batches on every replica (on
// SQLite, the one process twice): today two batches, one of them sent to
// both replicas (counted once) and one held (8 valid reports of n_min
// 10); a period 400 days ago, one batch. Every replica's Stored then
// says the same, the store's counts rather than its own process's, and
// its stored gauges show today's period but not the one out of the
// horizon.
func TestStoredSameOnEveryReplica(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			cs := openReplicas(t, kind, replicaCount(kind), func() *plan.Plan { return testPlan(t, 10) })
			ins := ingesters(cs)
			c := cs[0]
			ep := c.Epoch()
			old := report.Period{Start: today.Start - 400*86400, Length: 86400}
			body := func(p report.Period, n int, seed uint64) []byte {
				return batchBody(report.PeriodPoolKey(metric, ep, p), sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(n, seed), seed, p))
			}
			twice := body(today, 12, 1)
			heldSealed := sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(10, 2), 2, today)
			heldSealed[0] = heldSealed[0][:len(heldSealed[0])-1] // malformed
			heldSealed[1] = heldSealed[1][:len(heldSealed[1])-1]
			for i, b := range [][]byte{twice, twice, batchBody(report.PeriodPoolKey(metric, ep, today), heldSealed), body(old, 11, 3)} {
				if _, err := ins[i%2].Ingest(context.Background(), b); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			want := Stored{
				Periods: []StoredPeriod{
					{Start: time.Unix(old.Start, 0).UTC(), End: time.Unix(old.End(), 0).UTC(), Batches: 1, Reports: 11},
					{Start: time.Unix(today.Start, 0).UTC(), End: time.Unix(today.End(), 0).UTC(), Batches: 2, Held: 1, Reports: 20, Malformed: 2},
				},
				Batches: 3, Reports: 31, Malformed: 2,
			}
			for i, c := range cs {
				got, err := c.Stored(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !equalStored(got, want) {
					t.Errorf("replica %d: stored %+v, want %+v", i, got, want)
				}
				reg := prometheus.NewPedanticRegistry()
				reg.MustRegister(newCollectorMetrics(c))
				gauges := storedGauges(t, reg)
				at := time.Unix(today.Start, 0).UTC().Format(time.RFC3339)
				if len(gauges) != 3 || gauges["batches "+at] != 2 || gauges["valid "+at] != 20 || gauges["malformed "+at] != 2 {
					t.Errorf("replica %d: stored gauges %v, want today's alone: 2 batches, 20 valid, 2 malformed", i, gauges)
				}
			}
		})
	}
}

func equalStored(a, b Stored) bool {
	if len(a.Periods) != len(b.Periods) || a.Batches != b.Batches || a.Reports != b.Reports || a.Malformed != b.Malformed {
		return false
	}
	for i := range a.Periods {
		p, q := a.Periods[i], b.Periods[i]
		if !p.Start.Equal(q.Start) || !p.End.Equal(q.End) || p.Batches != q.Batches || p.Held != q.Held || p.Reports != q.Reports || p.Malformed != q.Malformed {
			return false
		}
	}
	return true
}

// storedGauges returns the stored gauges of reg by "batches PERIOD" and
// "RESULT PERIOD".
func storedGauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "blanket_collector_stored_batches":
				out["batches "+labels["period"]] = m.GetGauge().GetValue()
			case "blanket_collector_stored_reports":
				out[labels["result"]+" "+labels["period"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
