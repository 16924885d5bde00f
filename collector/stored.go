package collector

import (
	"context"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// The cluster view. Replicas of the collector share one store (package
// doc, Replicas), and what it holds is the same whichever replica is
// asked: the batches ingested per reporting period, by any replica, since
// the store was created. GET /v1/metrics (MetricList.Stored), the
// dashboard and the gauges blanket_collector_stored_batches and
// blanket_collector_stored_reports read it, so that every replica shows
// the cluster's figures; the counters of IngestStats (and the
// blanket_collector_*_total counters) stay this process's, since it
// started.

// StoredPeriod is what the store holds of one reporting period.
type StoredPeriod struct {
	// Start and End are the period, [Start, End) in UTC.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Batches counts the batches ingested (by any replica); Held those
	// still held (fewer than n_min valid reports in their pool so far).
	Batches int64 `json:"batches"`
	Held    int64 `json:"held"`
	// Reports and Malformed count their valid and dropped reports,
	// summed over metrics: a message of joint or parallel travel counts
	// once per metric it carries.
	Reports   int64 `json:"reports"`
	Malformed int64 `json:"malformed"`
}

// Stored is what the store every replica shares holds, per period.
type Stored struct {
	// Periods are the periods with batches, oldest first.
	Periods []StoredPeriod `json:"periods"`
	// Batches, Reports and Malformed sum them over every period.
	Batches   int64 `json:"batches"`
	Reports   int64 `json:"reports"`
	Malformed int64 `json:"malformed"`
}

// storedRow is one period's row of store.periodTotals.
type storedRow struct {
	period                            report.Period
	batches, held, reports, malformed int64
}

// Stored returns what the shared store holds per period.
func (c *Collector) Stored(ctx context.Context) (Stored, error) {
	rows, err := c.st.periodTotals(ctx)
	if err != nil {
		return Stored{}, err
	}
	s := Stored{Periods: make([]StoredPeriod, 0, len(rows))}
	for _, r := range rows {
		s.Periods = append(s.Periods, StoredPeriod{
			Start: time.Unix(r.period.Start, 0).UTC(), End: time.Unix(r.period.End(), 0).UTC(),
			Batches: r.batches, Held: r.held, Reports: r.reports, Malformed: r.malformed,
		})
		s.Batches += r.batches
		s.Reports += r.reports
		s.Malformed += r.malformed
	}
	return s, nil
}

// recentStored returns the periods of s that end after the start of the
// current plan's horizon ending now: the ones the gauges show, so that
// their label values stay bounded (at most the horizon's periods and the
// current one, of each period length).
func (c *Collector) recentStored(s Stored) []StoredPeriod {
	since := c.o.Now().Add(-time.Duration(c.plan.HorizonPeriods()) * c.plan.PeriodLength())
	var out []StoredPeriod
	for _, p := range s.Periods {
		if p.End.After(since) {
			out = append(out, p)
		}
	}
	return out
}
