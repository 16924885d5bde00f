package client

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Outbox is the device's store of what a Provider has not sent yet: the
// values staged for open reporting periods, the metric each period of
// parallel travel drew, the periods already closed, the sealed reports
// waiting for upload, and the privacy ledger; and, for state metrics
// (close_state.go), their randomizers' states and the values they carry
// forward. The default is the durable
// SQLite outbox in Config.DataDir (OpenSQLiteOutbox); MemoryOutbox is the
// non-durable one for tests and simulations. Implementations must be safe
// for concurrent use, and every method that changes the outbox must be
// atomic: after a nil return the change is as durable as the outbox, after
// an error nothing changed.
type Outbox interface {
	// Stage merges v into the value staged for (v.Metric, v.Plan,
	// v.Period) and returns the value now staged: a categorical value
	// replaces the staged Category, a real value adds to the staged Sum
	// (saturating at ±math.MaxFloat64, so that the total stays finite),
	// and every Stage adds v.Count to the staged Count: the number of
	// Records v merges (1 when v.Count <= 0), so that staging v is
	// staging its Records one by one, the last category last.
	// A new or changed value gets a new Rev. When v.Period is closed
	// (ClosePeriod) for v.Pool or for v.Metric, Stage stages nothing and
	// returns an error wrapping ErrPeriodClosed.
	Stage(ctx context.Context, v Value) (Value, error)
	// Staged returns the staged values ordered by period start, pool,
	// metric and plan.
	Staged(ctx context.Context) ([]Value, error)
	// Draw stages d unless a draw of the same Plan and Period is staged,
	// and returns the draw now staged: the first draw of a period stands,
	// whichever process on the outbox made it. When d.Period is closed
	// for d.Pool or for d.Metric it stages nothing and returns an error
	// wrapping ErrPeriodClosed.
	Draw(ctx context.Context, d Draw) (Draw, error)
	// Draws returns the staged draws ordered by period start, pool and plan.
	Draws(ctx context.Context) ([]Draw, error)
	// ClosePeriod closes (c.Pool, c.Period) in one atomic step: it removes
	// the period's staged values and draws, records the period as closed
	// for c.Pool (for good: Stage and Draw refuse it from then on), and,
	// when c.Envelope is set, stores the envelope, charges c.Charges to
	// the ledger (UploadPending, or UploadLocal with c.Local; the entries
	// are linked to the envelope's id for Ack) and records the period as
	// closed for each charged metric too (so that no other pool, under
	// another plan's travel or another process's, reports the metric
	// again in the period). c.Unstage and c.Undraw must be exactly the
	// values and draws staged for (c.Pool, c.Period), each unchanged
	// (same Rev): otherwise nothing changes and the error wraps
	// ErrStalePeriod (another Record or process changed the period since
	// it was read). Closing with an envelope a period already closed for
	// c.Pool or a charged metric stores nothing and returns an error
	// wrapping ErrPeriodClosed; closing without one is allowed (it only
	// removes what c names). Storing an envelope id already stored is an
	// error.
	ClosePeriod(ctx context.Context, c PeriodClose) error
	// Pending returns up to limit stored envelopes that are to be uploaded
	// (not Local) and not yet acknowledged, oldest first, each with the
	// token stored for its pool key, if any (Envelope.Token).
	Pending(ctx context.Context, limit int) ([]report.Envelope, error)
	// Sending marks stored envelopes as sent, before an upload of them,
	// and reports for each of ids whether it was marked so already: an
	// earlier upload that did not settle it (its answer was lost or was
	// not a 202, the app crashed) may have reached the shuffler, which
	// may hold it although it refuses it when sent again (a retry after
	// its period's deadline is refused as late). Unknown ids count as
	// sent.
	Sending(ctx context.Context, ids []report.ID) (sentBefore []bool, err error)
	// Ack removes uploaded envelopes from the outbox, marks the tokens of
	// their pool keys spent (PoolToken.Spent) and sets the upload state of
	// their ledger entries (those still UploadPending) to s:
	// UploadAcknowledged, UploadRefused (which also removes the entries'
	// charge: Reports and Eps0 go to 0, the eps0 to RefusedEps0),
	// UploadNoToken (which removes the charge: Reports and Eps0 go to 0),
	// UploadDropped or UploadUnknown. Unknown ids are ignored.
	Ack(ctx context.Context, ids []report.ID, s UploadState) error
	// DropLocal removes local envelopes of periods that started on days
	// before day ("2006-01-02", UTC) and returns how many it removed. The
	// ledger keeps counting them.
	DropLocal(ctx context.Context, day string) (int, error)
	// Ledger returns the ledger ordered by period start, then metric.
	Ledger(ctx context.Context) ([]LedgerEntry, error)
	// States returns the stored states of the state metrics'
	// randomizers (PeriodClose.Step), one per metric, plan and randomizer
	// configuration, ordered by metric, plan and digest.
	States(ctx context.Context) ([]MetricState, error)
	// Carried returns the values the state metrics carry forward
	// (PeriodClose.Carry), one per metric, ordered by metric: each with
	// the Metric, the Period it was the value of, the Kind and the
	// Category (or Sum); its other fields are zero.
	Carried(ctx context.Context) ([]Value, error)

	// Admission tokens (admission.go): the requests for tokens stored
	// before they are sent, and per pool key the token, or what became of
	// it.

	// AddTokenRequest stores r before it is sent and returns its id (r.ID
	// is ignored). It stores nothing and fails when a pool key of r is in
	// a stored request already.
	AddTokenRequest(ctx context.Context, r TokenRequest) (int64, error)
	// TokenRequests returns the stored requests, oldest first.
	TokenRequests(ctx context.Context) ([]TokenRequest, error)
	// SettleTokenRequest removes the request of id and stores, in the same
	// step, the issuer's answer to it: a PoolToken per pool key answered,
	// each replacing what is stored for its pool key. When no request of
	// id is stored (another process on the outbox settled it) it stores
	// nothing and returns nil.
	SettleTokenRequest(ctx context.Context, id int64, answer []PoolToken) error
	// PoolTokens returns what is stored per pool key, ordered by pool
	// key.
	PoolTokens(ctx context.Context) ([]PoolToken, error)
	// DiscardToken removes what is stored for poolKey.
	DiscardToken(ctx context.Context, poolKey string) error
	// ForgetTokens removes the requests and pool keys whose Deadline is
	// at or before now (Unix seconds) and returns how many it removed.
	ForgetTokens(ctx context.Context, now int64) (int, error)
	// PendingWithToken is Pending restricted to the envelopes whose pool
	// key (Envelope.Metric) has a token stored, each with its token
	// (Envelope.Token), so that envelopes waiting for a token do not hold
	// back the others.
	PendingWithToken(ctx context.Context, limit int) ([]report.Envelope, error)
	// Tokenless returns the envelopes Pending would return whose pool key
	// has no token stored, oldest first.
	Tokenless(ctx context.Context) ([]TokenlessEnvelope, error)
	// Close releases the outbox.
	Close() error
}

// Value is a metric's value staged for a reporting period. It is kept in
// clear on the device until the period closes, then randomized, sealed and
// removed in one step (Outbox.ClosePeriod); it is never uploaded as such.
type Value struct {
	// Pool is what the contribution bound of the period is kept by: the
	// metric itself with separate travel, the plan's pool ("@joint",
	// "@parallel", plan.Plan.Pool) with pooled travel. A period closes
	// for a pool as a whole.
	Pool string
	// Period is the reporting period.
	Period report.Period
	// Metric is the metric name.
	Metric string
	// Plan is the digest of the plan the value was recorded under.
	Plan string
	// Kind is the metric's input kind: sdk.InputCategorical or
	// sdk.InputReal.
	Kind sdk.InputKind
	// Category is a categorical metric's value: the period's last.
	Category string
	// Sum is a real metric's value: the total of the period's values, not
	// clamped (clamping to the metric's range happens at closing).
	Sum float64
	// Count is the number of values staged into it (Records of the
	// period), set by the outbox; in a value passed to Stage, the number
	// of Records it merges. A metric of plan aggregate "mean"
	// reports Sum / Count, clamped at closing.
	Count int64
	// Rev identifies the staged value's version; the outbox sets it and
	// changes it with every Stage of the value.
	Rev int64
}

// merge returns the staged value cur after staging v into it.
func (cur Value) merge(v Value) Value {
	if v.Kind == sdk.InputReal {
		cur.Sum = saturatingAdd(cur.Sum, v.Sum)
	} else {
		cur.Category = v.Category
	}
	n := max(v.Count, 1)
	if cur.Count <= math.MaxInt64-n {
		cur.Count += n
	} else {
		cur.Count = math.MaxInt64
	}
	cur.Rev++
	return cur
}

// saturatingAdd returns a + b, or ±math.MaxFloat64 where it overflows.
func saturatingAdd(a, b float64) float64 {
	return max(-math.MaxFloat64, min(math.MaxFloat64, a+b))
}

// Draw is the metric a period of parallel travel drew: the only metric
// whose value the period reports.
type Draw struct {
	// Pool is the plan's pool ("@parallel").
	Pool string
	// Period is the reporting period.
	Period report.Period
	// Plan is the digest of the plan the draw was made under.
	Plan string
	// Metric is the metric drawn.
	Metric string
}

// PeriodClose is the closing of one reporting period of one pool (see
// Outbox.ClosePeriod).
type PeriodClose struct {
	// Pool and Period name what closes.
	Pool   string
	Period report.Period
	// Envelope is the sealed report or message of the period, or nil when
	// the period closes without one (it expired, a joint message missed a
	// value, its values were recorded under an earlier plan).
	Envelope *report.Envelope
	// Local marks an envelope of ModeLocal: kept, never uploaded.
	Local bool
	// Epoch is the epoch of the plan the envelope was sealed under, kept
	// in the ledger.
	Epoch string
	// Charges are the ledger entries of the envelope: one report at its
	// eps0 for each metric it carries. Ignored without an envelope.
	Charges []Charge
	// Unstage and Undraw are the period's staged values and draws, as
	// read: all of them, unchanged, or ClosePeriod fails with
	// ErrStalePeriod.
	Unstage []Value
	Undraw  []Draw
	// Step, when set, is the step of a state metric's randomizer state to
	// the period (close_state.go), committed with the rest: the state
	// Step.Next is stored for (Step.Metric, Step.Plan, Step.Digest) with
	// the period as its last, and the period closes for Step.Metric too,
	// with or without an envelope, so that the step is never redone. The
	// stored state must still be Step.Prev, else nothing changes and the
	// error wraps ErrStalePeriod; a period closed for c.Pool or
	// Step.Metric already, or not after Step.Prev's last period, stores
	// nothing and the error wraps ErrPeriodClosed.
	Step *StateStep
	// Carry, when set, is the value a state metric carries forward from
	// the period (its Metric, Period, Kind, Category and Sum; see
	// Outbox.Carried): it replaces the metric's carried value unless that
	// one is of a later period.
	Carry *Value
}

// MetricState is the stored state of a state metric's randomizer
// (sdk.Stateful) in one protocol run: one plan (a new plan is a new run)
// and one randomizer configuration.
type MetricState struct {
	// Metric is the metric name.
	Metric string
	// Plan is the digest of the plan of the run.
	Plan string
	// Digest is the randomizer's configuration digest
	// (sdk.Description.Digest).
	Digest string
	// Last is the last period stepped.
	Last report.Period
	// State is the randomizer's state after that step, opaque and never
	// empty.
	State []byte
}

// StateStep is the step of a state metric's randomizer state that a
// period's closing commits (PeriodClose.Step).
type StateStep struct {
	// Metric, Plan and Digest name the run, as in MetricState.
	Metric, Plan, Digest string
	// Prev is the stored state the step started from, as read, or nil
	// for the run's first step.
	Prev *MetricState
	// Next is the state after the step. Required, not empty.
	Next []byte
}

// checkStep returns an error unless step st of period p may commit on
// the stored state cur (nil: none): cur must be st.Prev (ErrStalePeriod)
// and p after its last period (ErrPeriodClosed).
func checkStep(st *StateStep, cur *MetricState, p report.Period) error {
	if len(st.Next) == 0 {
		return fmt.Errorf("client: step of %q in period %s has an empty state", st.Metric, p)
	}
	switch {
	case cur == nil && st.Prev == nil:
		return nil
	case cur == nil || st.Prev == nil || cur.Last != st.Prev.Last:
		return fmt.Errorf("%w: the state of %q changed since it was read", ErrStalePeriod, st.Metric)
	case p.Start < cur.Last.End():
		return fmt.Errorf("%w: %q was stepped to period %s already, period %s is not after it", ErrPeriodClosed, st.Metric, cur.Last, p)
	}
	return nil
}

// TokenRequest is a request for admission tokens, stored in the outbox
// before it is sent (Outbox.AddTokenRequest), so that after a crash or a
// failed POST the same request is sent again: the issuer answers a
// blinded element it evaluated before with the same evaluation, and
// refuses another for a pool key it granted.
type TokenRequest struct {
	// ID identifies the stored request; the outbox sets it.
	ID int64
	// Pools are the pool keys asked (report.PeriodPoolKey), in the
	// request's order.
	Pools []string
	// Pending is the request's state (admission.Pending.MarshalBinary):
	// the inputs and blinds. It is secret: it links the tokens to the
	// request, which names the instance.
	Pending []byte
	// Deadline is the Unix second from which the request is forgotten
	// (Outbox.ForgetTokens): the latest deadline of its pool keys.
	Deadline int64
}

// PoolToken is what the outbox holds for one pool key once the issuer
// answered for it: a token, a token spent (its envelope left the
// outbox), or the issuer's refusal.
type PoolToken struct {
	// PoolKey is the pool key (report.PeriodPoolKey).
	PoolKey string
	// Token is the token's binary form (admission.Token.MarshalBinary),
	// nil once spent or when refused.
	Token []byte
	// Refused is the issuer's refusal code (admission.RefusedPool, ...),
	// "" unless refused; Reason is its explanation.
	Refused, Reason string
	// Deadline is the Unix second from which it is forgotten
	// (Outbox.ForgetTokens): the end of the pool key's period plus the
	// grace, after which the shuffler takes no envelope of it.
	Deadline int64
	// Retry, for a refusal, is the Unix second from which the pool key
	// may be asked again (a period the issuer does not grant yet); 0:
	// never.
	Retry int64
}

// Spent reports whether t is a token spent: neither a token nor a
// refusal.
func (t PoolToken) Spent() bool { return t.Token == nil && t.Refused == "" }

// TokenlessEnvelope is an envelope to upload whose pool key has no token
// stored (Outbox.Tokenless).
type TokenlessEnvelope struct {
	// ID is the envelope's id.
	ID report.ID
	// PoolKey is the envelope's pool key (report.Envelope.Metric).
	PoolKey string
	// Sent reports whether an upload carried it (Outbox.Sending).
	Sent bool
}

// Charge is one metric's share of a report in the ledger.
type Charge struct {
	// Metric is the metric name.
	Metric string
	// Eps0 is the local budget the metric's report was randomized at.
	Eps0 float64
}

// periodDay returns the UTC day a period starts on, "2006-01-02": the day
// of its envelope for Config.LocalRetention.
func periodDay(p report.Period) string {
	return time.Unix(p.Start, 0).UTC().Format(time.DateOnly)
}

// closedNames returns what closing c with an envelope or a step closes
// the period for: its pool, every metric the envelope carries and the
// metric stepped.
func closedNames(c PeriodClose) []string {
	names := []string{c.Pool}
	if c.Envelope != nil {
		for _, ch := range c.Charges {
			names = append(names, ch.Metric)
		}
	}
	if c.Step != nil {
		names = append(names, c.Step.Metric)
	}
	return names
}

// periodKey identifies a reporting period of a pool (or, in the closed
// periods, of a pool or a metric).
type periodKey struct {
	pool   string
	period report.Period
}

func comparePeriod(a, b report.Period) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Length, b.Length))
}

func sortValues(vs []Value) {
	slices.SortFunc(vs, func(a, b Value) int {
		return cmp.Or(comparePeriod(a.Period, b.Period), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Plan, b.Plan))
	})
}

func sortDraws(ds []Draw) {
	slices.SortFunc(ds, func(a, b Draw) int {
		return cmp.Or(comparePeriod(a.Period, b.Period), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Plan, b.Plan))
	})
}

func sortLedger(l []LedgerEntry) {
	slices.SortFunc(l, func(a, b LedgerEntry) int {
		return cmp.Or(a.Start.Compare(b.Start), a.End.Compare(b.End), cmp.Compare(a.Metric, b.Metric))
	})
}
