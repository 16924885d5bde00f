package client

import (
	"context"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
)

// LedgerEntry is the privacy spent on one metric in one reporting period.
type LedgerEntry struct {
	// Start and End are the period, [Start, End) in UTC.
	Start, End time.Time
	// Metric is the metric name.
	Metric string
	// Epoch is the epoch of the plan the period's report was sealed
	// under; "" for entries migrated from the per-day ledger of an
	// earlier version.
	Epoch string
	// Reports counts the reports of the metric committed for upload in
	// the period: 0 or 1 (a joint message counts one for each metric it
	// carries). An entry migrated from the per-day ledger of an earlier
	// version, which had no such bound, may count more.
	Reports int64
	// Eps0 is the sum of their local budgets: the metric's local privacy
	// loss in the period (basic composition where Reports > 1).
	Eps0 float64
	// LocalReports counts the reports kept on the device (ModeLocal); they
	// are not uploaded and not charged.
	LocalReports int64
}

// LedgerWindow sums the ledger over the plan's horizon: the
// plan.Plan.HorizonPeriods periods ending with the current one, the window
// the plan's target covers. It puts side by side two different bounds on
// the privacy loss of the reports sent in the window: the local loss,
// which holds even against a collector that sees who sent each report,
// and the plan's central guarantee, which holds given the shuffler's
// batches of at least n_min.
type LedgerWindow struct {
	// Start and End are the window, [Start, End) in UTC; End is the end of
	// the current period.
	Start, End time.Time
	// Periods is the number of periods in the window: the plan's horizon.
	Periods int
	// PeriodsWithReports counts the periods of the window in which at
	// least one report was committed for upload.
	PeriodsWithReports int
	// Reports counts the reports committed for upload in the window, over
	// every metric (a joint message counts one for each metric).
	Reports int64
	// LocalEps0 is the local privacy loss of those reports by basic
	// composition: the sum of their eps0. It is a pure (delta = 0) bound
	// that does not rely on the shuffler.
	LocalEps0 float64
	// OtherEpochReports counts the reports of the window sealed under
	// another plan than the current one (or migrated from an earlier
	// version's ledger). Central does not cover them: reports of several
	// plans compose, each under its own plan.
	OtherEpochReports int64
	// Central is the current plan's calibrated central guarantee (its
	// Guarantee): per user, across every metric, over any window of
	// Periods periods, every report shuffled in a batch of at least n_min
	// of its period. It is the plan's promise for a user who sends at most
	// what the plan allows, which the Provider enforces, not a measurement
	// of this device's reports.
	Central plan.Guarantee
}

// Ledger returns the local privacy ledger: per reporting period and
// metric, the reports committed and the sum of their eps0, oldest period
// first. It is empty in ModeOff.
func (p *Provider) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	if p == nil || p.outbox == nil {
		return nil, nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown {
		return nil, ErrShutdown
	}
	return p.outbox.Ledger(ctx)
}

// LedgerWindow returns the ledger summed over the plan's horizon ending
// with the current period. Ledger entries of periods of another length
// (an earlier plan's) count when they overlap the window. In ModeOff, and
// for a nil Provider, it returns the zero LedgerWindow.
func (p *Provider) LedgerWindow(ctx context.Context) (LedgerWindow, error) {
	if p == nil || p.outbox == nil {
		return LedgerWindow{}, nil
	}
	v := p.currentPlan()
	entries, err := p.Ledger(ctx)
	if err != nil {
		return LedgerWindow{}, err
	}
	return ledgerWindow(v, entries, p.now()), nil
}

// ledgerWindow sums entries over plan v's horizon ending with the period
// holding now.
func ledgerWindow(v *verifiedPlan, entries []LedgerEntry, now time.Time) LedgerWindow {
	pl := v.plan
	h := pl.HorizonPeriods()
	cur := pl.PeriodOf(now)
	w := LedgerWindow{
		Start:   pl.PeriodStart(cur - int64(h) + 1),
		End:     pl.PeriodStart(cur + 1),
		Periods: h,
	}
	if pl.Guarantee != nil {
		w.Central = *pl.Guarantee
	}
	type span struct{ start, end time.Time }
	withReports := map[span]bool{}
	for _, e := range entries {
		if e.Reports == 0 || !e.Start.Before(w.End) || !e.End.After(w.Start) {
			continue
		}
		withReports[span{e.Start, e.End}] = true
		w.Reports += e.Reports
		w.LocalEps0 += e.Eps0
		if e.Epoch != v.epoch {
			w.OtherEpochReports += e.Reports
		}
	}
	w.PeriodsWithReports = len(withReports)
	return w
}
