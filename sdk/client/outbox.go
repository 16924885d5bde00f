package client

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/blanket-dp/blanket/sdk/report"
)

// Outbox is the device's store of sealed reports waiting for upload and of
// the privacy ledger. The default is the durable SQLite outbox in
// Config.DataDir (OpenSQLiteOutbox); MemoryOutbox is the non-durable one for
// tests and simulations. Implementations must be safe for concurrent use.
type Outbox interface {
	// Add stores e and charges it to the ledger (day, metric) in one atomic
	// step: after a nil return both are durable, after an error neither
	// happened. When maxPerDay > 0 and the ledger already counts maxPerDay
	// reports (uploadable and local together) of e's metric on e's day, Add
	// stores nothing and returns an error wrapping ErrDailyLimit. Adding an
	// envelope id already stored is an error.
	Add(ctx context.Context, e Entry, maxPerDay int) error
	// Pending returns up to limit stored envelopes that are to be uploaded
	// (not Local) and not yet acknowledged, oldest first.
	Pending(ctx context.Context, limit int) ([]report.Envelope, error)
	// Ack removes acknowledged envelopes; unknown ids are ignored.
	Ack(ctx context.Context, ids []report.ID) error
	// DropLocal removes local envelopes of days before day ("2006-01-02")
	// and returns how many it removed. The ledger keeps counting them.
	DropLocal(ctx context.Context, day string) (int, error)
	// Ledger returns the ledger ordered by day, then metric.
	Ledger(ctx context.Context) ([]LedgerEntry, error)
	// Stage keeps s until an Add unstages it, replacing any staged entry
	// of the same Metric, and returns the entry now staged; after a nil
	// return it is as durable as an Add. With once set, an entry of the
	// same Metric and Plan already staged is kept and returned instead:
	// concurrent processes on one outbox agree on it. It holds the state
	// of a pooled travel mode's round: a metric's randomized report
	// waiting for the others (joint travel), or the metric a round drew
	// (parallel travel).
	Stage(ctx context.Context, s Staged, once bool) (Staged, error)
	// Staged returns the staged entries ordered by metric.
	Staged(ctx context.Context) ([]Staged, error)
	// Close releases the outbox.
	Close() error
}

// Entry is one sealed report to store.
type Entry struct {
	// Envelope is the sealed report with its random id.
	Envelope report.Envelope
	// Day is the UTC day of the report, "2006-01-02".
	Day string
	// Eps0 is the local budget the report was randomized at.
	Eps0 float64
	// Local marks a report recorded in ModeLocal: kept, never uploaded.
	Local bool
	// Charges are the ledger entries of a message carrying several
	// metrics (joint travel) or a metric other than its envelope's
	// (parallel travel): each metric is charged one report at its eps0,
	// and MaxReportsPerDay applies to each. When empty, the envelope's
	// metric is charged Eps0.
	Charges []Charge
	// Unstage are the staged entries (Outbox.Stage) the report consumes,
	// removed in the same atomic step: the round it completes is over.
	// When one of them is no longer staged exactly as given (another
	// process consumed or replaced it), Add stores nothing and returns an
	// error wrapping ErrStaleRound.
	Unstage []Staged
}

// Charge is one metric's share of a report in the ledger.
type Charge struct {
	// Metric is the metric name.
	Metric string
	// Eps0 is the local budget the metric's part was randomized at.
	Eps0 float64
}

// charges returns what e charges to the ledger.
func (e *Entry) charges() []Charge {
	if len(e.Charges) > 0 {
		return e.Charges
	}
	return []Charge{{Metric: e.Envelope.Metric, Eps0: e.Eps0}}
}

// Staged is an entry of the round being assembled (see Outbox.Stage).
type Staged struct {
	// Metric is the metric name, or "" for the draw of a parallel round.
	Metric string
	// Plan identifies the round: the digest of the plan it was staged
	// under (and, for a parallel draw, the day); an entry of another plan
	// is stale.
	Plan string
	// Report is the metric's randomized (unsealed) report, or the name of
	// the metric a parallel round drew.
	Report []byte
}

// same reports whether a and b are the same staged entry.
func (a Staged) same(b Staged) bool {
	return a.Metric == b.Metric && a.Plan == b.Plan && bytes.Equal(a.Report, b.Report)
}

// LedgerEntry is the privacy spent on one metric on one day.
type LedgerEntry struct {
	// Day is the UTC day, "2006-01-02".
	Day string
	// Metric is the metric name.
	Metric string
	// Reports counts the reports committed for upload.
	Reports int64
	// Eps0 is the sum of their local budgets: the local privacy loss of the
	// day's reports of this metric by basic composition.
	Eps0 float64
	// LocalReports counts the reports kept on the device (ModeLocal); they
	// are not uploaded and not charged.
	LocalReports int64
}

type ledgerKey struct{ day, metric string }

// MemoryOutbox is an Outbox in memory. It is NOT durable: whatever it holds
// is lost when the process exits. It exists for tests and simulations (the
// fleet example runs 100,000 providers on it); apps use the SQLite outbox.
type MemoryOutbox struct {
	mu      sync.Mutex
	envs    []memEntry // in insertion order; acknowledged ones removed lazily
	ids     map[report.ID]int
	ledger  map[ledgerKey]*LedgerEntry
	removed int
	staged  map[string]Staged
	closed  bool
}

type memEntry struct {
	env   report.Envelope
	day   string
	local bool
	gone  bool
}

var _ Outbox = (*MemoryOutbox)(nil)

// NewMemoryOutbox returns an empty, non-durable outbox.
func NewMemoryOutbox() *MemoryOutbox {
	return &MemoryOutbox{ids: map[report.ID]int{}, ledger: map[ledgerKey]*LedgerEntry{}, staged: map[string]Staged{}}
}

func (o *MemoryOutbox) check() error {
	if o.closed {
		return fmt.Errorf("client: memory outbox: %w", ErrShutdown)
	}
	return nil
}

// Add implements Outbox.
func (o *MemoryOutbox) Add(ctx context.Context, e Entry, maxPerDay int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return err
	}
	if _, dup := o.ids[e.Envelope.ID]; dup {
		return fmt.Errorf("client: memory outbox: report id %s already stored", e.Envelope.ID)
	}
	for _, st := range e.Unstage {
		if cur, ok := o.staged[st.Metric]; !ok || !cur.same(st) {
			return fmt.Errorf("%w: metric %q", ErrStaleRound, st.Metric)
		}
	}
	charges := e.charges()
	for _, c := range charges {
		l := o.ledger[ledgerKey{e.Day, c.Metric}]
		if maxPerDay > 0 && l != nil && l.Reports+l.LocalReports >= int64(maxPerDay) {
			return fmt.Errorf("%w: metric %q has %d reports on %s, limit %d", ErrDailyLimit, c.Metric, l.Reports+l.LocalReports, e.Day, maxPerDay)
		}
	}
	for _, c := range charges {
		k := ledgerKey{e.Day, c.Metric}
		l := o.ledger[k]
		if l == nil {
			l = &LedgerEntry{Day: e.Day, Metric: c.Metric}
			o.ledger[k] = l
		}
		if e.Local {
			l.LocalReports++
		} else {
			l.Reports++
			l.Eps0 += c.Eps0
		}
	}
	for _, st := range e.Unstage {
		delete(o.staged, st.Metric)
	}
	o.ids[e.Envelope.ID] = len(o.envs) + o.removed
	o.envs = append(o.envs, memEntry{env: e.Envelope, day: e.Day, local: e.Local})
	return nil
}

// Pending implements Outbox.
func (o *MemoryOutbox) Pending(ctx context.Context, limit int) ([]report.Envelope, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return nil, err
	}
	var out []report.Envelope
	for _, m := range o.envs {
		if len(out) >= limit {
			break
		}
		if !m.gone && !m.local {
			out = append(out, m.env)
		}
	}
	return out, nil
}

// Ack implements Outbox.
func (o *MemoryOutbox) Ack(ctx context.Context, ids []report.ID) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return err
	}
	for _, id := range ids {
		if i, ok := o.ids[id]; ok {
			o.envs[i-o.removed].gone = true
			delete(o.ids, id)
		}
	}
	o.compact()
	return nil
}

// compact drops the acknowledged prefix so memory stays bounded by what is
// pending.
func (o *MemoryOutbox) compact() {
	n := 0
	for n < len(o.envs) && o.envs[n].gone {
		n++
	}
	if n == 0 {
		return
	}
	o.envs = slices.Delete(o.envs, 0, n)
	o.removed += n
}

// DropLocal implements Outbox.
func (o *MemoryOutbox) DropLocal(ctx context.Context, day string) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return 0, err
	}
	n := 0
	for i := range o.envs {
		m := &o.envs[i]
		if !m.gone && m.local && m.day < day {
			m.gone = true
			delete(o.ids, m.env.ID)
			n++
		}
	}
	o.compact()
	return n, nil
}

// Ledger implements Outbox.
func (o *MemoryOutbox) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return nil, err
	}
	out := make([]LedgerEntry, 0, len(o.ledger))
	for _, l := range o.ledger {
		out = append(out, *l)
	}
	sortLedger(out)
	return out, nil
}

// Stage implements Outbox.
func (o *MemoryOutbox) Stage(ctx context.Context, st Staged, once bool) (Staged, error) {
	if err := ctx.Err(); err != nil {
		return Staged{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return Staged{}, err
	}
	if cur, ok := o.staged[st.Metric]; ok && once && cur.Plan == st.Plan {
		st = cur
	} else {
		st.Report = slices.Clone(st.Report)
		o.staged[st.Metric] = st
	}
	st.Report = slices.Clone(st.Report)
	return st, nil
}

// Staged implements Outbox.
func (o *MemoryOutbox) Staged(ctx context.Context) ([]Staged, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(); err != nil {
		return nil, err
	}
	out := make([]Staged, 0, len(o.staged))
	for _, st := range o.staged {
		st.Report = slices.Clone(st.Report)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Staged) int { return cmp.Compare(a.Metric, b.Metric) })
	return out, nil
}

// Close implements Outbox. The contents are dropped.
func (o *MemoryOutbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.envs, o.ids, o.ledger, o.staged = nil, nil, nil, nil
	return nil
}

func sortLedger(l []LedgerEntry) {
	slices.SortFunc(l, func(a, b LedgerEntry) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Metric, b.Metric))
	})
}
