package collector

import (
	"sync"
	"sync/atomic"
)

// The collector's ingest counters: batches by outcome, and reports per
// pool (Stats, blanket_collector_* metrics).

type collectorCounters struct {
	batches, duplicates, bad, refused atomic.Int64
	// held counts the batches ingested with some of their valid reports
	// held (fewer than n_min of an epoch).
	held atomic.Int64
	// unauthorized and failed count POST /v1/batches answered 401 and 500.
	unauthorized, failed atomic.Int64
	// keyDeleted counts the reports of batches of a period whose report
	// key was deleted (in the malformed ones too).
	keyDeleted atomic.Int64
	// reports holds a *reportCounts per pool of the batches ingested
	// (a metric with separate travel, the plan's pool otherwise): Stats
	// sums them, blanket_collector_reports_total shows them per pool.
	reports sync.Map
}

// reportCounts are the valid and malformed reports of one pool's
// batches, the valid ones held at ingest (in no estimate then), and the
// shuffler's blanket draws (floor.go; in neither valid nor malformed).
type reportCounts struct{ valid, malformed, held, draws atomic.Int64 }

// addReports counts the valid and malformed reports and the blanket
// draws of a batch of pool.
func (c *collectorCounters) addReports(pool string, valid, malformed, draws int64) {
	v, ok := c.reports.Load(pool)
	if !ok {
		v, _ = c.reports.LoadOrStore(pool, new(reportCounts))
	}
	rc := v.(*reportCounts)
	rc.valid.Add(valid)
	rc.malformed.Add(malformed)
	rc.draws.Add(draws)
}

// addHeld counts n valid reports of a batch of pool held at ingest.
func (c *collectorCounters) addHeld(pool string, n int64) {
	v, ok := c.reports.Load(pool)
	if !ok {
		v, _ = c.reports.LoadOrStore(pool, new(reportCounts))
	}
	v.(*reportCounts).held.Add(n)
}

// eachPool calls f with every pool's report counts.
func (c *collectorCounters) eachPool(f func(pool string, rc *reportCounts)) {
	c.reports.Range(func(k, v any) bool {
		f(k.(string), v.(*reportCounts))
		return true
	})
}

// Stats returns the collector's ingest counters.
func (c *Collector) Stats() IngestStats {
	st := IngestStats{
		Batches: c.c.batches.Load(), Duplicates: c.c.duplicates.Load(), Bad: c.c.bad.Load(),
		Refused: c.c.refused.Load(), Held: c.c.held.Load(), KeyDeleted: c.c.keyDeleted.Load(),
	}
	c.c.eachPool(func(_ string, rc *reportCounts) {
		st.Reports += rc.valid.Load()
		st.Malformed += rc.malformed.Load()
		st.HeldReports += rc.held.Load()
		st.Draws += rc.draws.Load()
	})
	return st
}
