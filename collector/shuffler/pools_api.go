package shuffler

import (
	"context"
	"net/http"
	"time"

	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk/report"
)

// PoolsStatus is the JSON body of GET /v1/pools: how full each of the
// shuffler's pools is against n_min. It holds counts only, nothing about
// any sender: no address, no arrival time, no id.
type PoolsStatus struct {
	// NMin is the smallest batch the shuffler releases.
	NMin int `json:"n_min"`
	// Settle is how long a pool of the plan's period, while the period
	// is open, waits for no report to join it before it is released down
	// to NMin (Options.Settle), in seconds.
	Settle float64 `json:"settle_seconds"`
	// Pools are the pools holding reports, by pool, epoch and period.
	Pools []PoolFill `json:"pools"`
	// Outgoing is the number of released batches not yet acknowledged by
	// the collector.
	Outgoing int64 `json:"outgoing"`
	// Released counts batches and reports released since the shuffler
	// started.
	BatchesReleased int64 `json:"batches_released"`
	ReportsReleased int64 `json:"reports_released"`
}

// PoolFill is one pool's fill.
type PoolFill struct {
	// Pool is the plan's pool: a metric's name with separate travel, the
	// plan's one pool with joint or parallel travel.
	Pool string `json:"pool"`
	// Epoch is the plan epoch the reports were sealed under.
	Epoch string `json:"epoch"`
	// Period is the reporting period of the reports.
	Period *report.PeriodSpan `json:"period"`
	// Reports is the number of reports waiting.
	Reports int64 `json:"reports"`
}

// Pools returns the shuffler's pool fill.
func (s *Shuffler) Pools(ctx context.Context) (PoolsStatus, error) {
	st := PoolsStatus{
		NMin: s.o.Plan.NMin, Settle: s.settleFor(s.o.Plan.PeriodLength()).Seconds(),
		BatchesReleased: s.c.batchesReleased.Load(), ReportsReleased: s.c.reportsReleased.Load(),
	}
	var err error
	if st.Pools, err = s.poolFills(ctx); err != nil {
		return st, err
	}
	st.Outgoing, err = s.st.outgoingCount(ctx)
	return st, err
}

// poolFills returns the reports waiting per pool key (summed over
// suites), the key parsed into pool, epoch and period.
func (s *Shuffler) poolFills(ctx context.Context) ([]PoolFill, error) {
	sizes, err := s.st.poolSizes(ctx)
	if err != nil {
		return nil, err
	}
	fills := []PoolFill{}
	byKey := map[string]int{}
	for _, p := range sizes {
		if i, ok := byKey[p.metric]; ok {
			fills[i].Reports += p.n
			continue
		}
		pool, epoch, period, err := report.ParsePoolKey(p.metric)
		if err != nil {
			// Not a key accepts takes: reported under its raw key.
			pool = p.metric
		}
		byKey[p.metric] = len(fills)
		fills = append(fills, PoolFill{Pool: pool, Epoch: epoch, Period: report.NewPeriodSpan(period), Reports: p.n})
	}
	return fills, nil
}

// poolsTimeout bounds the pool query of GET /v1/pools.
const poolsTimeout = 5 * time.Second

func (s *Shuffler) handlePools(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), poolsTimeout)
	defer cancel()
	st, err := s.Pools(ctx)
	if err != nil {
		s.log.Error("pool status", "error", err)
		httpserver.WriteError(w, http.StatusServiceUnavailable, "reading the pools failed: %v", err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, st)
}

// ClosedPeriods is the JSON body of a 200 answer to POST /v1/pools/close.
type ClosedPeriods struct {
	// Closed are the periods of pooled reports closed: their envelopes
	// are refused from now on and their pools released whole at the next
	// look. Every earlier period of the same length is closed too (a
	// period's closing is recorded as the latest end closed, per length),
	// including those with nothing pooled.
	Closed []report.PeriodSpan `json:"closed"`
}

// handleClose closes the periods of pooled reports ending at or before
// ?through= (RFC 3339; default now): ClosePeriods. A time after the
// shuffler's clock needs force=true (it closes periods not ended yet).
func (s *Shuffler) handleClose(w http.ResponseWriter, r *http.Request) {
	through := s.o.Now()
	if v := r.URL.Query().Get("through"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			httpserver.WriteError(w, http.StatusBadRequest, "through=%q: want an RFC 3339 time: %v", v, err)
			return
		}
		through = t
	}
	if now := s.o.Now(); through.After(now) && r.URL.Query().Get("force") != "true" {
		// A period not ended yet would refuse the rest of its own apps'
		// reports, for good: only on request.
		httpserver.WriteError(w, http.StatusBadRequest, "through=%s is after the shuffler's clock (%s): a period that has not ended would refuse its apps' later reports for good; add force=true to close it anyway", through.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		return
	}
	// Closing waits for the uploads of those periods in flight.
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	closed, err := s.ClosePeriods(ctx, through)
	out := ClosedPeriods{Closed: []report.PeriodSpan{}}
	for _, p := range closed {
		out.Closed = append(out.Closed, *report.NewPeriodSpan(p))
	}
	if err != nil {
		s.log.Error("closing periods", "error", err)
		httpserver.WriteError(w, http.StatusServiceUnavailable, "closing periods failed after %d: %v", len(closed), err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}
