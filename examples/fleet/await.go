package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/collector/shuffler"
)

// awaitBatches polls the collector until it has estimated every report the
// fleet sent, day by day. The shuffler never releases a batch below n_min,
// and while a day's grace lasts it keeps the last n_min reports of each of
// its pools. So when fewer than n_min reports of a pool and day are
// missing, that pool never reached n_min (any batch in flight holds at
// least n_min, and so does a pool that released one): the fleet then
// sends just enough fresh instances, active on that day only, to bring it
// there. With separate travel each metric is its own pool and one instance
// covers every metric that needs topping up; with joint or parallel travel
// the plan's messages share one pool per day, each instance sends one
// message and records every metric. Once no pool needs topping up, the
// fleet closes the simulated days on the shuffler (as their deadlines
// would, days later), which releases every pool whole.
func (f *fleet) awaitBatches(ctx context.Context) error {
	last := time.Now()
	lastTotal := int64(-1)
	days := f.cfg.days
	closed := false
	for {
		done := true
		var total int64
		need := make([][numRoles]int64, days)
		missingMessages := make([]int64, days)
		for r, m := range f.metrics {
			d, err := f.detail(ctx, m.Name, false)
			if err != nil {
				return err
			}
			total += d.total()
			got := d.byDay(f.first, f.period, days)
			for day := range days {
				var have int64
				if p := got[day]; p != nil {
					have = p.N + p.Malformed
				}
				f.mu.Lock()
				sent := f.truth[r][day].n
				f.mu.Unlock()
				missing := sent - have
				if f.plan.Pooled() && missing > 0 {
					done = false
					if f.plan.Travel == "joint" {
						missingMessages[day] = max(missingMessages[day], missing) // every message carries every metric
					} else {
						missingMessages[day] += missing // a message carries one metric
					}
					continue
				}
				switch {
				case missing < 0:
					return fmt.Errorf("metric %q, day %d: the collector holds %d reports, the fleet sent %d", m.Name, day, have, sent)
				case missing == 0:
				case missing < int64(f.plan.NMin) && !closed:
					done = false
					need[day][r] = int64(f.plan.NMin) - missing
					fmt.Fprintf(f.out, "%s, day %d: %d reports wait in the shuffler's pool (below n_min = %d); topping up with %d reports\n", m.Name, day, missing, f.plan.NMin, need[day][r])
				default:
					done = false // a batch is on its way
				}
			}
		}
		if done {
			return nil
		}
		var jobs []job
		for day := range days {
			if closed {
				// The days are closed: what is missing is a pool the
				// close released and the collector has yet to take in.
				// A top-up now would be refused as late.
				break
			}
			if mm := missingMessages[day]; mm > 0 && mm < int64(f.plan.NMin) {
				top := int64(f.plan.NMin) - mm
				fmt.Fprintf(f.out, "%s, day %d: %d messages wait in the shuffler's pool (below n_min = %d); topping up with %d messages\n", f.plan.Pool(""), day, mm, f.plan.NMin, top)
				for r := range need[day] {
					need[day][r] = top
				}
			}
			var top int64
			for _, n := range need[day] {
				top = max(top, n)
			}
			for i := range top {
				j := job{only: day}
				for r := range j.roles {
					j.roles[r] = i < need[day][r]
				}
				jobs = append(jobs, j)
			}
		}
		if len(jobs) > 0 {
			if err := f.simulate(ctx, jobs); err != nil {
				return err
			}
			fmt.Fprintf(f.out, "topped up with %d more instances\n", len(jobs))
			continue
		}
		if !closed {
			if err := f.closeDays(ctx); err != nil {
				return err
			}
			closed = true
		}
		if total != lastTotal {
			last, lastTotal = time.Now(), total
		} else if time.Since(last) > 60*time.Second {
			return fmt.Errorf("no progress for a minute: the collector holds %d reports", total)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the batches: %w", ctx.Err())
		case <-time.After(f.cfg.poll):
		}
	}
}

// closeDays closes the simulated days on the shuffler (POST
// /v1/pools/close on its operator listener, through the end of the last
// day): their pools go out whole, their late reports are refused.
func (f *fleet) closeDays(ctx context.Context) error { return f.closeDaysN(ctx, f.cfg.days) }

// closeDaysN closes the days days from f.first on the shuffler.
func (f *fleet) closeDaysN(ctx context.Context, days int) error {
	base := f.cfg.admin
	if base == "" {
		base = f.cfg.endpoint
	}
	through := f.first.Add(time.Duration(days) * f.period).UTC().Format(time.RFC3339)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/pools/close?through="+url.QueryEscape(through), nil)
	if err != nil {
		return err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return fmt.Errorf("closing the simulated days: %w", err)
	}
	defer resp.Body.Close()
	var out shuffler.ClosedPeriods
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("closing the simulated days: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("closing the simulated days: %w", err)
	}
	fmt.Fprintf(f.out, "closed %d simulated days on the shuffler (their pools go out whole, as at their deadline)\n", len(out.Closed))
	return nil
}
