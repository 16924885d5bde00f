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
	// under.
	Epoch string
	// Reports counts the reports of the metric committed for upload in
	// the period and not refused by the shuffler: 0 or 1 (a joint message
	// counts one for each metric it carries).
	Reports int64
	// Eps0 is the sum of their local budgets: the metric's local privacy
	// loss in the period (basic composition where Reports > 1).
	Eps0 float64
	// LocalReports counts the reports kept on the device (ModeLocal); they
	// are not uploaded and not charged.
	LocalReports int64
	// Upload says what became of the entry's report: kept on the device,
	// waiting for upload, acknowledged by the shuffler, refused by it,
	// dropped after a 400 or 413, or dropped unsent for want of an
	// admission token; see UploadUnknown for when it is not known.
	Upload UploadState
	// RefusedEps0 is the eps0 of the entry's report when the shuffler
	// refused it (Upload is UploadRefused): it is no longer in Eps0 nor
	// the report in Reports, since a report the shuffler never pooled
	// reaches no batch and the collector never opens it. It is kept for an
	// auditor who does not take the shuffler's word for the refusal (see
	// UploadRefused).
	RefusedEps0 float64
}

// UploadState is what became of a ledger entry's report (LedgerEntry.Upload).
type UploadState string

// The upload states.
const (
	// UploadUnknown is the state of a report the shuffler answered for
	// but that may or may not be in its pool: refused when sent again
	// after an upload without an answer (which may have stored it), or
	// one of an upload whose answer refused more reports than it named,
	// not named. It is charged. It is also the state of an entry
	// holding several reports.
	UploadUnknown UploadState = ""
	// UploadLocal is a report of ModeLocal: kept on the device, never
	// uploaded, not charged.
	UploadLocal UploadState = "local"
	// UploadPending is a report committed for upload and not yet
	// acknowledged. It is charged from the commit on: it may reach the
	// shuffler at any time (a crash after a POST and before its answer
	// is processed sends it again).
	UploadPending UploadState = "pending"
	// UploadAcknowledged is a report the shuffler acknowledged (a 202
	// counting it accepted, or a duplicate of one accepted before): it is
	// stored in the shuffler's pool of its period, to be released in a
	// batch of at least n_min. It is charged.
	UploadAcknowledged UploadState = "acknowledged"
	// UploadRefused is a report the shuffler refused by name in its 202
	// answer to the first upload that carried it (a period past its
	// grace, a pool or suite it does not take). Its charge is removed:
	// the shuffler refuses an envelope before storing it (or, late, in
	// the commit that would store it), and no earlier upload can have
	// stored it, so it is in no pool, no batch forwarded to the collector
	// holds it, and the collector, the only party holding the key it is
	// sealed to, never opens it; the shuffler, which does not hold that
	// key, sees sealed bytes. This takes the shuffler at its word, as its
	// batches of n_min do: a shuffler that said it refused a report and
	// forwarded it all the same would leak it at its eps0, which
	// RefusedEps0 keeps. A refusal of a report sent before without an
	// answer is UploadUnknown, charged.
	UploadRefused UploadState = "refused"
	// UploadDropped is a report dropped from the outbox because an upload
	// of it alone was answered 400 or 413 (Stats.Dropped). Its charge
	// stays: such an answer names no envelope, and may come from a proxy
	// on the way as well as from the shuffler.
	UploadDropped UploadState = "dropped"
	// UploadNoToken is a report dropped from the outbox at its period's
	// deadline without ever being uploaded, because no admission token of
	// its pool key could be obtained (Config.Credential; DropNoToken). Its
	// charge is removed: no upload carried it, so it never left the
	// device. (One an earlier upload without a token carried is
	// UploadUnknown, charged.)
	UploadNoToken UploadState = "no_token"
)

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
	// Reports counts the reports committed for upload in the window and
	// not refused by the shuffler, over every metric (a joint message
	// counts one for each metric).
	Reports int64
	// LocalEps0 is the local privacy loss of those reports by basic
	// composition: the sum of their eps0. It is a pure (delta = 0) bound
	// that does not rely on the shuffler's batches (it takes the
	// shuffler's word only for the reports it refused, which it does not
	// count: see UploadRefused).
	LocalEps0 float64
	// OtherEpochReports counts the reports of the window sealed under
	// another plan than the current one. Central does not cover them:
	// reports of several plans compose, each under its own plan.
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
// metric, the reports committed, the sum of their eps0 and what became of
// them (LedgerEntry.Upload), oldest period first. It is empty in ModeOff.
func (p *Provider) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	if p == nil || p.outbox == nil {
		return nil, nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown.Load() {
		return nil, ErrShutdown
	}
	return p.outbox.Ledger(ctx)
}

// LedgerWindow returns the ledger summed over the plan's horizon ending
// with the current period. Ledger entries of periods of another length
// (an earlier plan's) count when they overlap the window. In ModeOff,
// without a plan (ModeLocal with none cached), and for a nil Provider, it
// returns the zero LedgerWindow.
func (p *Provider) LedgerWindow(ctx context.Context) (LedgerWindow, error) {
	if p == nil || p.outbox == nil || p.currentPlan() == nil {
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
