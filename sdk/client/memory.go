package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// MemoryOutbox is an Outbox in memory. It is NOT durable: whatever it holds
// is lost when the process exits. It exists for tests and simulations (the
// fleet example runs 100,000 providers on it); apps use the SQLite outbox.
type MemoryOutbox struct {
	mu      sync.Mutex
	envs    []memEntry // in insertion order; acknowledged ones removed lazily
	ids     map[report.ID]int
	removed int
	ledger  map[memLedgerKey]*LedgerEntry
	// charged lists the ledger entries of each envelope (for Ack).
	charged map[report.ID][]*LedgerEntry
	values  map[memValueKey]Value
	draws   map[memDrawKey]Draw
	closed  map[periodKey]bool
	states  map[memStateKey]MetricState
	carried map[string]Value
	// reqs are the token requests by id; reqPools the request of each
	// pool key asked; tokens what is stored per pool key. They are made
	// at the first write: the fleet example runs 100,000 outboxes without
	// admission.
	reqs     map[int64]TokenRequest
	lastReq  int64
	reqPools map[string]int64
	tokens   map[string]PoolToken
	shut     bool
}

type memStateKey struct {
	metric, plan, digest string
}

type memEntry struct {
	env   report.Envelope
	day   string
	local bool
	gone  bool
	sent  bool // Sending marked it
}

type memLedgerKey struct {
	period report.Period
	metric string
}

type memValueKey struct {
	metric, plan string
	period       report.Period
}

type memDrawKey struct {
	plan   string
	period report.Period
}

var _ Outbox = (*MemoryOutbox)(nil)

// NewMemoryOutbox returns an empty, non-durable outbox.
func NewMemoryOutbox() *MemoryOutbox {
	return &MemoryOutbox{
		ids:     map[report.ID]int{},
		ledger:  map[memLedgerKey]*LedgerEntry{},
		charged: map[report.ID][]*LedgerEntry{},
		values:  map[memValueKey]Value{},
		draws:   map[memDrawKey]Draw{},
		closed:  map[periodKey]bool{},
		states:  map[memStateKey]MetricState{},
		carried: map[string]Value{},
	}
}

func (o *MemoryOutbox) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.shut {
		return fmt.Errorf("client: memory outbox: %w", ErrShutdown)
	}
	return nil
}

// Stage implements Outbox.
func (o *MemoryOutbox) Stage(ctx context.Context, v Value) (Value, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return Value{}, err
	}
	if o.closed[periodKey{v.Pool, v.Period}] || o.closed[periodKey{v.Metric, v.Period}] {
		return Value{}, fmt.Errorf("%w: %s (%s) in period %s", ErrPeriodClosed, v.Metric, v.Pool, v.Period)
	}
	k := memValueKey{v.Metric, v.Plan, v.Period}
	cur, ok := o.values[k]
	if !ok {
		cur = v
		cur.Sum, cur.Category, cur.Count, cur.Rev = 0, "", 0, 0
	}
	cur = cur.merge(v)
	o.values[k] = cur
	return cur, nil
}

// Staged implements Outbox.
func (o *MemoryOutbox) Staged(ctx context.Context) ([]Value, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]Value, 0, len(o.values))
	for _, v := range o.values {
		out = append(out, v)
	}
	sortValues(out)
	return out, nil
}

// Draw implements Outbox.
func (o *MemoryOutbox) Draw(ctx context.Context, d Draw) (Draw, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return Draw{}, err
	}
	if o.closed[periodKey{d.Pool, d.Period}] || o.closed[periodKey{d.Metric, d.Period}] {
		return Draw{}, fmt.Errorf("%w: %s (%s) in period %s", ErrPeriodClosed, d.Metric, d.Pool, d.Period)
	}
	k := memDrawKey{d.Plan, d.Period}
	if cur, ok := o.draws[k]; ok {
		return cur, nil
	}
	o.draws[k] = d
	return d, nil
}

// Draws implements Outbox.
func (o *MemoryOutbox) Draws(ctx context.Context) ([]Draw, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]Draw, 0, len(o.draws))
	for _, d := range o.draws {
		out = append(out, d)
	}
	sortDraws(out)
	return out, nil
}

// ClosePeriod implements Outbox.
func (o *MemoryOutbox) ClosePeriod(ctx context.Context, c PeriodClose) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return err
	}
	pk := periodKey{c.Pool, c.Period}
	if c.Envelope != nil || c.Step != nil {
		for _, n := range closedNames(c) {
			if o.closed[periodKey{n, c.Period}] {
				return fmt.Errorf("%w: %s or a metric it carries in period %s", ErrPeriodClosed, c.Pool, c.Period)
			}
		}
	}
	if c.Envelope != nil {
		if _, dup := o.ids[c.Envelope.ID]; dup {
			return fmt.Errorf("client: memory outbox: report id %s already stored", c.Envelope.ID)
		}
	}
	var sk memStateKey
	if st := c.Step; st != nil {
		sk = memStateKey{st.Metric, st.Plan, st.Digest}
		var cur *MetricState
		if s, ok := o.states[sk]; ok {
			cur = &s
		}
		if err := checkStep(st, cur, c.Period); err != nil {
			return err
		}
	}
	// The values and draws named must be exactly those staged.
	nv := 0
	for _, v := range o.values {
		if v.Pool == c.Pool && v.Period == c.Period {
			nv++
		}
	}
	nd := 0
	for _, d := range o.draws {
		if d.Pool == c.Pool && d.Period == c.Period {
			nd++
		}
	}
	if nv != len(c.Unstage) || nd != len(c.Undraw) {
		return fmt.Errorf("%w: %s in period %s has %d values and %d draws staged, the closing names %d and %d", ErrStalePeriod, c.Pool, c.Period, nv, nd, len(c.Unstage), len(c.Undraw))
	}
	for _, v := range c.Unstage {
		cur, ok := o.values[memValueKey{v.Metric, v.Plan, v.Period}]
		if !ok || cur.Rev != v.Rev || cur.Pool != c.Pool || v.Period != c.Period {
			return fmt.Errorf("%w: value of %q in period %s", ErrStalePeriod, v.Metric, v.Period)
		}
	}
	for _, d := range c.Undraw {
		cur, ok := o.draws[memDrawKey{d.Plan, d.Period}]
		if !ok || cur != d || d.Pool != c.Pool || d.Period != c.Period {
			return fmt.Errorf("%w: draw of period %s", ErrStalePeriod, d.Period)
		}
	}
	for _, v := range c.Unstage {
		delete(o.values, memValueKey{v.Metric, v.Plan, v.Period})
	}
	for _, d := range c.Undraw {
		delete(o.draws, memDrawKey{d.Plan, d.Period})
	}
	o.closed[pk] = true
	if st := c.Step; st != nil {
		o.states[sk] = MetricState{Metric: st.Metric, Plan: st.Plan, Digest: st.Digest, Last: c.Period, State: slices.Clone(st.Next)}
		o.closed[periodKey{st.Metric, c.Period}] = true
	}
	if v := c.Carry; v != nil {
		if cur, ok := o.carried[v.Metric]; !ok || v.Period.Start >= cur.Period.Start {
			o.carried[v.Metric] = Value{Metric: v.Metric, Period: v.Period, Kind: v.Kind, Category: v.Category, Sum: v.Sum}
		}
	}
	if c.Envelope == nil {
		return nil
	}
	for _, ch := range c.Charges {
		o.closed[periodKey{ch.Metric, c.Period}] = true
		k := memLedgerKey{c.Period, ch.Metric}
		l := o.ledger[k]
		if l == nil {
			start := time.Unix(c.Period.Start, 0).UTC()
			l = &LedgerEntry{Start: start, End: time.Unix(c.Period.End(), 0).UTC(), Metric: ch.Metric, Epoch: c.Epoch, Upload: UploadPending}
			if c.Local {
				l.Upload = UploadLocal
			}
			o.ledger[k] = l
			o.charged[c.Envelope.ID] = append(o.charged[c.Envelope.ID], l)
		} else {
			if l.Epoch != "" {
				l.Epoch = c.Epoch
			}
			l.Upload = UploadUnknown // two reports: no one state
		}
		if c.Local {
			l.LocalReports++
		} else {
			l.Reports++
			l.Eps0 += ch.Eps0
		}
	}
	o.ids[c.Envelope.ID] = len(o.envs) + o.removed
	o.envs = append(o.envs, memEntry{env: *c.Envelope, day: periodDay(c.Period), local: c.Local})
	return nil
}

// Pending implements Outbox.
func (o *MemoryOutbox) Pending(ctx context.Context, limit int) ([]report.Envelope, error) {
	return o.pending(ctx, limit, false)
}

// pending returns up to limit envelopes to send, oldest first, each with
// the token stored for its pool key; with needToken only those that have
// one.
func (o *MemoryOutbox) pending(ctx context.Context, limit int, needToken bool) ([]report.Envelope, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	var out []report.Envelope
	for _, m := range o.envs {
		if len(out) >= limit {
			break
		}
		if !m.gone && !m.local && (!needToken || o.tokens[m.env.Metric].Token != nil) {
			out = append(out, o.withToken(m.env))
		}
	}
	return out, nil
}

// withToken returns e with the token stored for its pool key, if any.
func (o *MemoryOutbox) withToken(e report.Envelope) report.Envelope {
	e.Token = slices.Clone(o.tokens[e.Metric].Token)
	return e
}

// Sending implements Outbox.
func (o *MemoryOutbox) Sending(ctx context.Context, ids []report.ID) ([]bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	for k, id := range ids {
		i, ok := o.ids[id]
		if !ok {
			out[k] = true
			continue
		}
		m := &o.envs[i-o.removed]
		out[k], m.sent = m.sent, true
	}
	return out, nil
}

// Ack implements Outbox.
func (o *MemoryOutbox) Ack(ctx context.Context, ids []report.ID, s UploadState) error {
	switch s {
	case UploadAcknowledged, UploadRefused, UploadNoToken, UploadDropped, UploadUnknown:
	default:
		return fmt.Errorf("client: memory outbox: Ack with upload state %q, want acknowledged, refused, no_token, dropped or unknown", s)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return err
	}
	for _, id := range ids {
		if i, ok := o.ids[id]; ok {
			m := &o.envs[i-o.removed]
			m.gone = true
			delete(o.ids, id)
			if t, ok := o.tokens[m.env.Metric]; ok && t.Token != nil {
				t.Token = nil
				o.tokens[m.env.Metric] = t
			}
		}
		for _, l := range o.charged[id] {
			if l.Upload != UploadPending {
				continue
			}
			l.Upload = s
			switch s {
			case UploadRefused:
				l.RefusedEps0, l.Eps0, l.Reports = l.Eps0, 0, 0
			case UploadNoToken:
				l.Eps0, l.Reports = 0, 0
			}
		}
		delete(o.charged, id)
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
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	for i := range o.envs {
		m := &o.envs[i]
		if !m.gone && m.local && m.day < day {
			m.gone = true
			delete(o.ids, m.env.ID)
			delete(o.charged, m.env.ID)
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
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]LedgerEntry, 0, len(o.ledger))
	for _, l := range o.ledger {
		out = append(out, *l)
	}
	sortLedger(out)
	return out, nil
}

// States implements Outbox.
func (o *MemoryOutbox) States(ctx context.Context) ([]MetricState, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]MetricState, 0, len(o.states))
	for _, s := range o.states {
		s.State = slices.Clone(s.State)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b MetricState) int {
		return cmp.Or(cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Plan, b.Plan), cmp.Compare(a.Digest, b.Digest))
	})
	return out, nil
}

// Carried implements Outbox.
func (o *MemoryOutbox) Carried(ctx context.Context) ([]Value, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]Value, 0, len(o.carried))
	for _, v := range o.carried {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Value) int { return cmp.Compare(a.Metric, b.Metric) })
	return out, nil
}

// Close implements Outbox. The contents are dropped.
func (o *MemoryOutbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.shut = true
	o.envs, o.ids, o.ledger, o.values, o.draws, o.closed = nil, nil, nil, nil, nil, nil
	o.charged = nil
	o.states, o.carried = nil, nil
	o.reqs, o.reqPools, o.tokens = nil, nil, nil
	return nil
}

// AddTokenRequest implements Outbox.
func (o *MemoryOutbox) AddTokenRequest(ctx context.Context, r TokenRequest) (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	for _, pool := range r.Pools {
		if _, ok := o.reqPools[pool]; ok {
			return 0, fmt.Errorf("client: memory outbox: pool key %q is in a stored token request already", pool)
		}
	}
	if o.reqs == nil {
		o.reqs, o.reqPools = map[int64]TokenRequest{}, map[string]int64{}
	}
	o.lastReq++
	r.ID, r.Pools, r.Pending = o.lastReq, slices.Clone(r.Pools), slices.Clone(r.Pending)
	o.reqs[r.ID] = r
	for _, pool := range r.Pools {
		o.reqPools[pool] = r.ID
	}
	return r.ID, nil
}

// TokenRequests implements Outbox.
func (o *MemoryOutbox) TokenRequests(ctx context.Context) ([]TokenRequest, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]TokenRequest, 0, len(o.reqs))
	for _, r := range o.reqs {
		r.Pools, r.Pending = slices.Clone(r.Pools), slices.Clone(r.Pending)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b TokenRequest) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// SettleTokenRequest implements Outbox.
func (o *MemoryOutbox) SettleTokenRequest(ctx context.Context, id int64, answer []PoolToken) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return err
	}
	r, ok := o.reqs[id]
	if !ok {
		return nil
	}
	o.removeRequest(r)
	if o.tokens == nil {
		o.tokens = map[string]PoolToken{}
	}
	for _, t := range answer {
		t.Token = slices.Clone(t.Token)
		o.tokens[t.PoolKey] = t
	}
	return nil
}

// removeRequest removes r.
func (o *MemoryOutbox) removeRequest(r TokenRequest) {
	delete(o.reqs, r.ID)
	for _, pool := range r.Pools {
		if o.reqPools[pool] == r.ID {
			delete(o.reqPools, pool)
		}
	}
}

// PoolTokens implements Outbox.
func (o *MemoryOutbox) PoolTokens(ctx context.Context) ([]PoolToken, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	out := make([]PoolToken, 0, len(o.tokens))
	for _, t := range o.tokens {
		t.Token = slices.Clone(t.Token)
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b PoolToken) int { return cmp.Compare(a.PoolKey, b.PoolKey) })
	return out, nil
}

// DiscardToken implements Outbox.
func (o *MemoryOutbox) DiscardToken(ctx context.Context, poolKey string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return err
	}
	delete(o.tokens, poolKey)
	return nil
}

// ForgetTokens implements Outbox.
func (o *MemoryOutbox) ForgetTokens(ctx context.Context, now int64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range o.reqs {
		if r.Deadline <= now {
			o.removeRequest(r)
			n++
		}
	}
	for k, t := range o.tokens {
		if t.Deadline <= now {
			delete(o.tokens, k)
			n++
		}
	}
	return n, nil
}

// PendingWithToken implements Outbox.
func (o *MemoryOutbox) PendingWithToken(ctx context.Context, limit int) ([]report.Envelope, error) {
	return o.pending(ctx, limit, true)
}

// Tokenless implements Outbox.
func (o *MemoryOutbox) Tokenless(ctx context.Context) ([]TokenlessEnvelope, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	var out []TokenlessEnvelope
	for _, m := range o.envs {
		if !m.gone && !m.local && o.tokens[m.env.Metric].Token == nil {
			out = append(out, TokenlessEnvelope{ID: m.env.ID, PoolKey: m.env.Metric, Sent: m.sent})
		}
	}
	return out, nil
}
