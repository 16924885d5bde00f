package collector

// Batches of fewer than n_min valid reports.
//
// The shuffler releases batches of at least n_min sealed reports, but the
// collector counts only those that open and validate: junk that passes the
// shuffler's length check (a made-up sealed report, a report sealed to
// another key or epoch) makes a batch hold fewer than n_min real reports,
// and the plan's eps0 is calibrated for n_min. So the collector publishes
// no estimate from such a batch. Per epoch it counts in (a group), a
// batch whose valid reports are fewer than the epoch's n_min is stored
// (its rows in batches, flagged held, with the guarantee of its own size)
// and counted, but its statistic is kept apart (held_statistics) with the
// other held batches of its pool, epoch and period. A later batch of the
// same pool, epoch and period publishes them all with its own statistic,
// in one transaction, as soon as their valid reports reach n_min together
// (holdGroup); a batch of n_min valid reports or more publishes at once,
// taking the held ones with it.
//
// What that publication states, and why it is sound. Each batch was
// shuffled by the shuffler on its own; the collector received them apart,
// so against the collector a report of a held batch has only the
// amplification of its own batch's valid reports: its batch row carries
// the accountant's guarantee at that size, and the period's guarantee (the
// weakest batch, PeriodEstimate.Guarantee) and the horizon (the smallest
// batch of each period) are computed from the batch rows, held ones
// included. Nothing stronger is claimed against the collector. Against
// anyone who reads only the published estimates, the published statistic
// changes only by whole groups of at least n_min valid reports: the sum
// of their sufficient statistics, a function of the multiset of their
// reports alone. That multiset has the distribution of the output of one
// shuffler run on the union of the groups' reports (a shuffled batch
// reveals nothing beyond its multiset), which is what the accountant's
// bound for a batch of that size assumes; which batch a report came in,
// and whether it was held, depends on when it arrived and on the number
// of valid reports, never on an honest report's value. An estimate never
// moves by fewer than n_min reports, so a reader cannot subtract two
// estimates to isolate a small batch.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Ingest errors.
var (
	// ErrBadBatch reports batch bytes that do not decode (HTTP 400).
	ErrBadBatch = errors.New("collector: malformed batch")
	// ErrBatchRefused reports a well-formed batch the collector will not
	// ingest: a metric not in its plan, an unsupported suite, or fewer
	// than n_min reports (HTTP 422).
	ErrBatchRefused = errors.New("collector: batch refused")
)

// IngestResult is the JSON body of a 200 answer to POST /v1/batches.
type IngestResult struct {
	// Batch is the batch id (hex).
	Batch string `json:"batch"`
	// Metric is the batch's metric.
	Metric string `json:"metric"`
	// Epoch is the plan epoch the batch was counted in.
	Epoch string `json:"epoch"`
	// Period is the reporting period of the batch's reports (may be
	// absent for a duplicate).
	Period *report.PeriodSpan `json:"period,omitempty"`
	// Duplicate is true when the batch was already ingested; nothing was
	// counted again.
	Duplicate bool `json:"duplicate"`
	// Reports is the number of sealed reports in the batch.
	Reports int `json:"reports"`
	// N is the number of valid reports counted, Malformed the number
	// dropped (unopenable or undecodable). Zero for a duplicate.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	// Held is how many of the N are held out of every estimate: those of
	// an epoch of which the batch has fewer than n_min valid reports
	// (with the batches held before it of the same pool, epoch and
	// period). They are stored, and published with later batches of that
	// pool, epoch and period once they reach n_min together.
	Held int64 `json:"held,omitempty"`
	// Draws is how many of the batch's reports it says are the shuffler's
	// blanket draws (a plan's floor), in neither N nor Malformed (their
	// guarantee counts fewer when some reports failed to open: floor.go);
	// omitted when none.
	Draws int64 `json:"draws,omitempty"`
	// Parts counts the valid reports of each metric of a pooled batch
	// (joint or parallel travel), where N counts messages. Absent for a
	// batch of one metric.
	Parts map[string]int64 `json:"parts,omitempty"`
	// Eps and Delta are the central guarantee of the batch's valid
	// reports; null when none is known.
	Eps   *float64 `json:"eps"`
	Delta *float64 `json:"delta"`
}

func (c *Collector) authorized(r *http.Request) bool {
	if c.o.Token == "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	want := []byte("Bearer " + c.o.Token)
	return subtle.ConstantTimeCompare(got, want) == 1
}

func (c *Collector) handleBatches(w http.ResponseWriter, r *http.Request) {
	if !c.authorized(r) {
		c.c.unauthorized.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="blanket collector"`)
		httpserver.WriteError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	body, status, err := httpserver.ReadBody(w, r, c.o.MaxBatchBytes)
	if err != nil {
		c.c.bad.Add(1)
		httpserver.WriteError(w, status, "%v", err)
		return
	}
	res, err := c.Ingest(r.Context(), body)
	switch {
	case err == nil:
		httpserver.WriteJSON(w, http.StatusOK, res)
	case errors.Is(err, ErrBadBatch):
		httpserver.WriteError(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, ErrBatchRefused):
		httpserver.WriteError(w, http.StatusUnprocessableEntity, "%v", err)
	case r.Context().Err() != nil:
		// The sender is gone; nothing was committed.
	default:
		c.c.failed.Add(1)
		c.log.Error("ingesting batch", "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "ingesting batch failed; retry")
	}
}

// Ingest decodes a batch (report.EncodeBatch bytes), opens its reports,
// accumulates the valid ones and stores the statistic with the batch's
// central guarantee, in one transaction. A batch id already ingested is
// acknowledged with Duplicate set and not counted again. Reports that do
// not open with the metric's binding or do not decode are counted in
// Malformed and dropped; the rest of the batch is kept. When fewer than
// n_min of them are valid (per epoch) the batch is stored and counted but
// held out of every estimate until later batches of its pool, epoch and
// period bring its reports to n_min (Held; the top of ingest.go says why
// that is sound). A batch's Metric is its pool key (report.PeriodPoolKey):
// one whose key lacks the epoch or period tag is refused. Errors wrap
// ErrBadBatch or ErrBatchRefused for the sender's mistakes; any other
// error means nothing was stored and the batch may be retried.
//
// With joint or parallel travel a batch is of the plan's one pool
// (plan.Plan.Pool): each report is a sealed message (report.EncodeMessage)
// carrying every metric (joint) or one (parallel). A message that does not
// carry what its travel mode says is malformed as a whole; the valid ones
// feed every metric's statistic, and the batch's guarantee is the
// accountant's for the plan's mechanism at the number of valid messages.
func (c *Collector) Ingest(ctx context.Context, body []byte) (res IngestResult, err error) {
	start := time.Now()
	defer func() {
		if err == nil {
			c.m.ingestSeconds.Observe(time.Since(start).Seconds())
		}
	}()
	// The stages: resolve the batch's epoch, admit it, open and
	// accumulate its reports, reconcile the counts, commit.
	in, err := c.resolve(ctx, body)
	switch {
	case err != nil:
		return in.res, err
	case in.unopenable != nil:
		return c.ingestUnopenable(ctx, in.b, in.pool, in.tag, in.period, in.res, in.unopenable)
	}
	if err := c.admit(ctx, in); err != nil || in.res.Duplicate {
		return in.res, err
	}
	if err := c.openAndAccumulate(ctx, in); err != nil {
		return in.res, err
	}
	in.reconcile()
	return c.commitIngestion(ctx, in)
}

// ingestion is one batch on its way through Ingest's stages.
type ingestion struct {
	b report.Batch
	// pool, tag and period are the batch's pool key
	// (report.ParsePoolKey): its pool, epoch tag and reporting period.
	pool, tag string
	period    report.Period
	// unopenable, when set, says why no report of the batch can open
	// here (resolve): it is acknowledged once, all malformed.
	unopenable error
	// epoch is the epoch of the batch's tag, whose plan its reports
	// open under (resolve), and key the report key of its period.
	epoch *epochState
	key   *ringKey
	// group is the batch's rows and statistics (openAndAccumulate).
	group batchGroup
	res   IngestResult
}

// resolve decodes a batch and finds the epoch its reports open under:
// that of its pool key's epoch tag (report.PeriodPoolKey), whose reports
// are bound to the key's reporting period. A key without an epoch or a
// period tag is refused: no per-period guarantee could cover its reports.
// A batch of an epoch this collector did not publish, of a period its
// epoch's apps never seal for, or of a period whose report key was
// deleted (keys.go) has no report that can open here (unopenable). The
// batch's reports open under the key of its period (keyFor).
func (c *Collector) resolve(ctx context.Context, body []byte) (*ingestion, error) {
	in := &ingestion{}
	b, err := report.DecodeBatch(body)
	if err != nil {
		c.c.bad.Add(1)
		return in, fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	in.b = b
	in.res = IngestResult{Batch: b.ID.String(), Metric: b.Metric, Epoch: c.epoch, Reports: len(b.Sealed)}
	in.pool, in.tag, in.period, err = report.ParsePoolKey(b.Metric)
	switch {
	case errors.Is(err, report.ErrNoPeriod):
		c.c.refused.Add(1)
		return in, fmt.Errorf("%w: pool key %q has no reporting period tag (<pool>#<epoch>#<start>+<length>)", ErrBatchRefused, b.Metric)
	case err != nil:
		c.c.bad.Add(1)
		return in, fmt.Errorf("%w: %v", ErrBadBatch, err)
	case in.tag == "":
		c.c.refused.Add(1)
		return in, fmt.Errorf("%w: a period tag without an epoch tag", ErrBatchRefused)
	}
	in.res.Period = report.NewPeriodSpan(in.period)
	e, err := c.epochByID(ctx, in.tag)
	switch {
	case errors.Is(err, errUnknownEpoch):
		// Nothing in it can open here: every report is malformed.
		// Acknowledging it (once) keeps a shuffler from retrying a
		// batch no configuration change would deliver.
		in.unopenable = err
		return in, nil
	case err != nil:
		return in, err
	}
	if in.period.Length != int64(e.plan.PeriodLength()/time.Second) {
		// Its reports are bound to a period the epoch's SDKs never seal
		// for: none can open. Acknowledged once, as above.
		in.unopenable = fmt.Errorf("period %s is not one of epoch %s's periods of %v", in.period, e.epoch, e.plan.PeriodLength())
		return in, nil
	}
	in.epoch, in.res.Epoch = e, e.epoch
	k, err := c.keyFor(ctx, in.period)
	switch {
	case errors.Is(err, ErrKeyDeleted), errors.Is(err, errNoKey):
		in.unopenable = err
	case err != nil:
		return in, err
	}
	in.key = k
	return in, nil
}

// admit refuses a batch the collector does not take (a pool not of its
// epoch, an unsupported suite, fewer than n_min sealed reports:
// ErrBatchRefused) and acknowledges one already ingested (res.Duplicate)
// without counting it again.
func (c *Collector) admit(ctx context.Context, in *ingestion) error {
	_, _, ok := in.epoch.binding(in.pool, in.period)
	switch {
	case !ok:
		c.c.refused.Add(1)
		return fmt.Errorf("%w: %q is not a pool of the plan (pools: %q)", ErrBatchRefused, in.pool, c.plan.Pools())
	case in.b.Suite != report.SuiteX25519ChaCha:
		c.c.refused.Add(1)
		return fmt.Errorf("%w: suite %d is not supported", ErrBatchRefused, in.b.Suite)
	case in.b.Draws > 0 && in.b.Draws != in.epoch.plan.Floor:
		// A shuffler adds its epoch's plan's floor to every batch, or
		// nothing when drawing failed (floor.go): any other count is a
		// shuffler of another plan, or a broken one.
		c.c.refused.Add(1)
		return fmt.Errorf("%w: the batch holds %d blanket draws, but the floor of its epoch %s's plan is %d: a shuffler adds that many or none", ErrBatchRefused, in.b.Draws, in.epoch.epoch, in.epoch.plan.Floor)
	case in.b.Draws > 0 && len(in.b.Sealed)-in.b.Draws < c.plan.NMin:
		c.c.refused.Add(1)
		return fmt.Errorf("%w: %d reports of which %d are the shuffler's blanket draws, fewer than n_min = %d of apps", ErrBatchRefused, len(in.b.Sealed), in.b.Draws, c.plan.NMin)
	case len(in.b.Sealed) < c.plan.NMin:
		c.c.refused.Add(1)
		return fmt.Errorf("%w: %d reports, fewer than n_min = %d", ErrBatchRefused, len(in.b.Sealed), c.plan.NMin)
	}
	dup, err := c.st.hasBatch(ctx, in.b.ID)
	if err != nil {
		return err
	}
	if dup {
		c.c.duplicates.Add(1)
		in.res.Duplicate = true
	}
	return nil
}

// openAndAccumulate opens every report under the epoch's binding and
// accumulates the valid ones with its plugins into a group with the
// guarantee of the epoch's plan at the number of its valid reports: the
// other reports of the batch are independent of them, so leaving them out
// of the count is sound.
func (c *Collector) openAndAccumulate(ctx context.Context, in *ingestion) error {
	e := in.epoch
	binding, reportBytes, _ := e.binding(in.pool, in.period)
	plain := c.openAll(in.key.priv, binding, reportBytes, in.b.Sealed)
	parts, n, err := c.accumulate(ctx, e, in.pool, plain)
	if err != nil {
		return err
	}
	var counts []int64 // the batch's mix, with parallel travel
	if e.pool != nil && e.pool.travel == string(accountant.TravelParallel) {
		counts = make([]int64, len(e.plan.Metrics))
		for _, p := range parts {
			counts[e.plan.MetricIndex(p.rec.metric)] = p.rec.n
		}
	}
	draws, err := in.takeDraws(parts, n)
	if err != nil {
		c.c.refused.Add(1)
		return err
	}
	n -= in.res.Draws
	g, ok := c.guarantee(ctx, e, in.pool, n, counts, draws)
	if !ok {
		if err := ctx.Err(); err != nil {
			// Not a missing guarantee: the sender is gone. Store nothing.
			return err
		}
	}
	for i := range parts {
		r := &parts[i].rec
		r.id, r.epoch, r.messages, r.period = in.b.ID, e.epoch, n, in.period
		if ok {
			r.eps, r.delta = &g.eps, &g.delta
		}
	}
	in.group = newGroup(e, in.pool, in.period, n, parts)
	in.res.N = n
	if ok {
		in.res.Eps, in.res.Delta = &g.eps, &g.delta
	}
	if e.pool != nil {
		in.res.Parts = map[string]int64{}
		for _, p := range parts {
			in.res.Parts[p.rec.metric] += p.rec.n
		}
	}
	return nil
}

// reconcile makes the batch's counts account for every report: the
// malformed ones are those counted neither valid nor draws. With one
// metric per batch (separate travel) its one row and statistic (accumulate makes one even
// with no valid report, which keeps the batch from being ingested twice)
// count as malformed every report not counted: unopenable, of the wrong
// length, or refused by the plugin.
func (in *ingestion) reconcile() {
	in.res.Malformed = int64(in.res.Reports) - in.res.N - in.res.Draws
	if in.epoch.pool != nil {
		return
	}
	cur := &in.group.parts[0]
	cur.rec.malformed = in.res.Malformed
	if cur.stat != nil {
		cur.stat.Malformed = cur.rec.malformed
	}
}

// commitIngestion stores the batch's group in one transaction and counts
// it: its reports, and the held ones (fewer than n_min valid).
func (c *Collector) commitIngestion(ctx context.Context, in *ingestion) (IngestResult, error) {
	dup, err := c.commit(ctx, in.b.ID, in.group, &in.res)
	if err != nil || dup {
		return in.res, err
	}
	res := in.res
	c.c.addReports(in.pool, res.N, res.Malformed, res.Draws)
	if res.Held > 0 {
		c.c.held.Add(1)
		c.c.addHeld(in.pool, res.Held)
		c.log.Warn("batch with fewer than n_min valid reports: stored, its reports held out of every estimate until more of their pool, epoch and period bring them to n_min",
			"batch", res.Batch, "metric", in.b.Metric, "n", res.N, "held", res.Held, "malformed", res.Malformed, "epoch", res.Epoch)
	}
	c.log.Info("batch ingested", "batch", res.Batch, "metric", in.b.Metric, "n", res.N, "malformed", res.Malformed, "held", res.Held, "draws", res.Draws, "eps", fmtOptional(res.Eps))
	return res, nil
}

// newGroup returns the group of a batch's parts of pool in epoch e, with
// n valid reports (messages).
func newGroup(e *epochState, pool string, period report.Period, n int64, parts []metricBatch) batchGroup {
	names := []string{pool}
	if e.pool != nil {
		for _, ms := range e.pool.metrics {
			names = append(names, ms.m.Name)
		}
	}
	return batchGroup{pool: pool, epoch: e.epoch, period: period, messages: n, nMin: int64(e.plan.NMin), names: names, parts: parts}
}

// commit stores batch id's group and counts the batch. For a batch
// already stored it counts a duplicate and turns *res into the
// duplicate's result (nothing counted again). Otherwise it sets res.Held
// when the group is held.
func (c *Collector) commit(ctx context.Context, id report.ID, g batchGroup, res *IngestResult) (duplicate bool, err error) {
	dup, held, err := c.st.commitBatch(ctx, id, g)
	if err != nil {
		return false, fmt.Errorf("collector: storing batch %s: %w", id, err)
	}
	if dup {
		c.c.duplicates.Add(1)
		*res = IngestResult{Batch: res.Batch, Metric: res.Metric, Epoch: res.Epoch, Reports: res.Reports, Duplicate: true}
		return true, nil
	}
	c.c.batches.Add(1)
	if held {
		res.Held += g.messages
	}
	return false, nil
}

// ingestUnopenable records batch b, whose reports cannot open here (why:
// an unknown epoch, a period of another length, a deleted key), as all
// malformed, once.
func (c *Collector) ingestUnopenable(ctx context.Context, b report.Batch, pool, tag string, period report.Period, res IngestResult, why error) (IngestResult, error) {
	res.Epoch, res.Malformed = tag, int64(len(b.Sealed))
	rec := batchRecord{id: b.ID, metric: pool, epoch: tag, malformed: res.Malformed, period: period}
	// No valid report: a group that holds and publishes nothing.
	g := batchGroup{pool: pool, epoch: tag, period: period, names: []string{pool}, parts: []metricBatch{{rec: rec}}}
	if dup, err := c.commit(ctx, b.ID, g, &res); err != nil || dup {
		return res, err
	}
	// The pool of a batch of an unknown epoch may be anything its sender
	// wrote: one label for all pools of no current plan.
	label := "other"
	if slices.Contains(c.plan.Pools(), pool) {
		label = pool
	}
	c.c.addReports(label, 0, res.Malformed, 0)
	if errors.Is(why, ErrKeyDeleted) {
		c.c.keyDeleted.Add(res.Malformed)
		c.log.Warn("batch of a period whose report key was deleted: its reports cannot be opened any more and are counted malformed (it came later than the plans' grace and the key slack allow)",
			"batch", res.Batch, "metric", b.Metric, "reports", len(b.Sealed), "why", why)
		return res, nil
	}
	c.log.Warn("batch of an epoch whose reports cannot open here: all counted malformed", "batch", res.Batch, "metric", b.Metric, "reports", len(b.Sealed), "why", why)
	return res, nil
}

func fmtOptional(v *float64) any {
	if v == nil {
		return "unknown"
	}
	return *v
}
