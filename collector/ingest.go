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
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk"
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

type collectorCounters struct {
	batches, duplicates, bad, refused atomic.Int64
	// held counts the batches ingested with some of their valid reports
	// held (fewer than n_min of an epoch).
	held atomic.Int64
	// unauthorized and failed count POST /v1/batches answered 401 and 500.
	unauthorized, failed atomic.Int64
	// reports holds a *reportCounts per pool of the batches ingested
	// (a metric with separate travel, the plan's pool otherwise): Stats
	// sums them, blanket_collector_reports_total shows them per pool.
	reports sync.Map
}

// reportCounts are the valid and malformed reports of one pool's
// batches, and the valid ones held at ingest (in no estimate then).
type reportCounts struct{ valid, malformed, held atomic.Int64 }

// addReports counts the valid and malformed reports of a batch of pool.
func (c *collectorCounters) addReports(pool string, valid, malformed int64) {
	v, ok := c.reports.Load(pool)
	if !ok {
		v, _ = c.reports.LoadOrStore(pool, new(reportCounts))
	}
	rc := v.(*reportCounts)
	rc.valid.Add(valid)
	rc.malformed.Add(malformed)
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

// IngestResult is the JSON body of a 200 answer to POST /v1/batches.
type IngestResult struct {
	// Batch is the batch id (hex).
	Batch string `json:"batch"`
	// Metric is the batch's metric.
	Metric string `json:"metric"`
	// Epoch is the plan epoch the batch was counted in.
	Epoch string `json:"epoch"`
	// Period is the reporting period of the batch's reports; absent for
	// reports sealed before periods existed.
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
	// Parts counts the valid reports of each metric of a pooled batch
	// (joint or parallel travel), where N counts messages. Absent for a
	// batch of one metric.
	Parts map[string]int64 `json:"parts,omitempty"`
	// Earlier counts, per earlier epoch, the valid reports (or messages)
	// of the batch sealed under that epoch's plan by apps that had not
	// fetched the current one: they count in that epoch. N includes them.
	Earlier map[string]int64 `json:"earlier,omitempty"`
	// Eps and Delta are the central guarantee of the batch's valid
	// reports of the current epoch; null when none is known.
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
// that is sound). Errors wrap
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
	b, err := report.DecodeBatch(body)
	if err != nil {
		c.c.bad.Add(1)
		return IngestResult{}, fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	res = IngestResult{Batch: b.ID.String(), Metric: b.Metric, Epoch: c.epoch, Reports: len(b.Sealed)}
	// A batch of a tagged pool (report.PoolKey) holds reports of that
	// epoch only; an untagged one is opened under the current epoch, then
	// the earlier ones. A period tag (report.PeriodPoolKey) makes it a
	// batch of that reporting period: its reports are bound to it.
	pool, tag, period, err := report.ParsePoolKey(b.Metric)
	if err != nil {
		c.c.bad.Add(1)
		return res, fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	res.Period = report.NewPeriodSpan(period)
	if tag == "" && !period.IsZero() {
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: a period tag without an epoch tag", ErrBatchRefused)
	}
	var epochs []*epochState
	if tag != "" {
		e, err := c.epochByID(ctx, tag)
		switch {
		case errors.Is(err, errUnknownEpoch):
			// Nothing in it can open here: every report is malformed.
			// Acknowledging it (once) keeps a shuffler from retrying a
			// batch no configuration change would deliver.
			return c.ingestUnopenable(ctx, b, pool, tag, period, res, err)
		case err != nil:
			return res, err
		}
		if !period.IsZero() && period.Length != int64(e.plan.PeriodLength()/time.Second) {
			// Its reports are bound to a period the epoch's SDKs never
			// seal for: none can open. Acknowledged once, as above.
			return c.ingestUnopenable(ctx, b, pool, tag, period, res,
				fmt.Errorf("period %s is not one of epoch %s's periods of %v", period, e.epoch, e.plan.PeriodLength()))
		}
		epochs, res.Epoch = []*epochState{e}, e.epoch
	} else {
		// The epochs that have the pool, current first.
		for _, e := range append([]*epochState{c.cur}, c.older...) {
			if _, _, ok := e.binding(pool, period); ok {
				epochs = append(epochs, e)
			}
		}
	}
	var ok bool
	if len(epochs) > 0 {
		_, _, ok = epochs[0].binding(pool, period)
	}
	switch {
	case !ok:
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: %q is not a pool of the plan (pools: %q)", ErrBatchRefused, pool, c.plan.Pools())
	case b.Suite != report.SuiteX25519ChaCha:
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: suite %d is not supported", ErrBatchRefused, b.Suite)
	case len(b.Sealed) < c.plan.NMin:
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: %d reports, fewer than n_min = %d", ErrBatchRefused, len(b.Sealed), c.plan.NMin)
	}
	if dup, err := c.st.hasBatch(ctx, b.ID); err != nil {
		return res, err
	} else if dup {
		c.c.duplicates.Add(1)
		res.Duplicate = true
		return res, nil
	}
	// Open every report under the current epoch's binding, and those
	// that do not open under the earlier epochs' in turn (apps that have
	// not fetched the current plan yet). Each epoch's reports count in
	// that epoch, with the guarantee of that epoch's plan at their own
	// number: the other reports of the batch are independent of them, so
	// leaving them out of the count is sound.
	rest := b.Sealed
	b.Sealed = nil
	var groups []batchGroup
	first := epochs[0]
	res.Epoch = first.epoch
	for _, e := range epochs {
		binding, reportBytes, ok := e.binding(pool, period)
		if !ok || (len(rest) == 0 && e != first) {
			continue
		}
		var plain [][]byte
		plain, rest = c.openAll(binding, reportBytes, rest)
		if len(plain) == 0 && e != first {
			continue
		}
		eParts, n, err := c.accumulate(ctx, e, pool, plain)
		if err != nil {
			return res, err
		}
		var counts []int64 // the batch's mix, with parallel travel
		if e.pool != nil && e.pool.travel == string(accountant.TravelParallel) {
			counts = make([]int64, len(e.plan.Metrics))
			for _, p := range eParts {
				counts[e.plan.MetricIndex(p.rec.metric)] = p.rec.n
			}
		}
		g, ok := c.guarantee(ctx, e, pool, n, counts)
		if !ok {
			if err := ctx.Err(); err != nil {
				// Not a missing guarantee: the sender is gone. Store nothing.
				return res, err
			}
		}
		for i := range eParts {
			r := &eParts[i].rec
			r.id, r.epoch, r.messages, r.period = b.ID, e.epoch, n, period
			if ok {
				r.eps, r.delta = &g.eps, &g.delta
			}
		}
		groups = append(groups, newGroup(e, pool, period, n, eParts))
		res.N += n
		if e == first {
			if ok {
				res.Eps, res.Delta = &g.eps, &g.delta
			}
		} else {
			if res.Earlier == nil {
				res.Earlier = map[string]int64{}
			}
			res.Earlier[e.epoch] = n
		}
		if e.pool != nil {
			if res.Parts == nil {
				res.Parts = map[string]int64{}
			}
			for _, p := range eParts {
				res.Parts[p.rec.metric] += p.rec.n
			}
		}
	}
	res.Malformed = int64(res.Reports) - res.N
	if len(groups) == 0 || groups[0].epoch != first.epoch {
		// No valid report in the batch's epoch: a row of the pool keeps
		// the batch from being ingested twice.
		rec := batchRecord{id: b.ID, metric: pool, epoch: first.epoch, malformed: int64(res.Reports) - res.N, period: period}
		groups = append([]batchGroup{newGroup(first, pool, period, 0, []metricBatch{{rec: rec}})}, groups...)
	}
	if first.pool == nil {
		// The metric's current row (and statistic) count as malformed
		// every report no epoch counted: unopenable, of the wrong length,
		// or refused by the plugin.
		elsewhere := int64(0)
		for _, g := range groups[1:] {
			for _, p := range g.parts {
				elsewhere += p.rec.n + p.rec.malformed
			}
		}
		cur := &groups[0].parts[0]
		cur.rec.malformed = int64(res.Reports) - cur.rec.n - elsewhere
		if cur.stat != nil {
			cur.stat.Malformed = cur.rec.malformed
		}
	}
	held, dup, err := c.commit(ctx, b.ID, groups, &res)
	if err != nil || dup {
		return res, err
	}
	c.c.addReports(pool, res.N, res.Malformed)
	if res.Held > 0 {
		c.c.held.Add(1)
		c.c.addHeld(pool, res.Held)
		c.log.Warn("batch with fewer than n_min valid reports: stored, its reports held out of every estimate until more of their pool, epoch and period bring them to n_min",
			"batch", res.Batch, "metric", b.Metric, "n", res.N, "held", res.Held, "malformed", res.Malformed, "held_epochs", held)
	}
	c.log.Info("batch ingested", "batch", res.Batch, "metric", b.Metric, "n", res.N, "malformed", res.Malformed, "held", res.Held, "eps", fmtOptional(res.Eps), "earlier_epochs", len(res.Earlier))
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

// commit stores batch id's groups and counts the batch. For a batch
// already stored it counts a duplicate and turns *res into the duplicate's
// result (nothing counted again). Otherwise it sets res.Held and returns
// the epochs of the groups held.
func (c *Collector) commit(ctx context.Context, id report.ID, groups []batchGroup, res *IngestResult) (held []string, duplicate bool, err error) {
	dup, isHeld, err := c.st.commitBatch(ctx, id, groups)
	if err != nil {
		return nil, false, fmt.Errorf("collector: storing batch %s: %w", id, err)
	}
	if dup {
		c.c.duplicates.Add(1)
		*res = IngestResult{Batch: res.Batch, Metric: res.Metric, Epoch: res.Epoch, Reports: res.Reports, Duplicate: true}
		return nil, true, nil
	}
	c.c.batches.Add(1)
	for i, g := range groups {
		if isHeld[i] {
			res.Held += g.messages
			held = append(held, g.epoch)
		}
	}
	return held, false, nil
}

// ingestUnopenable records batch b, tagged with an epoch whose reports
// cannot open here (why), as all malformed, once.
func (c *Collector) ingestUnopenable(ctx context.Context, b report.Batch, pool, tag string, period report.Period, res IngestResult, why error) (IngestResult, error) {
	res.Epoch, res.Malformed = tag, int64(len(b.Sealed))
	rec := batchRecord{id: b.ID, metric: pool, epoch: tag, malformed: res.Malformed, period: period}
	// No valid report: a group that holds and publishes nothing.
	g := batchGroup{pool: pool, epoch: tag, period: period, names: []string{pool}, parts: []metricBatch{{rec: rec}}}
	if _, dup, err := c.commit(ctx, b.ID, []batchGroup{g}, &res); err != nil || dup {
		return res, err
	}
	// The pool of a batch of an unknown epoch may be anything its sender
	// wrote: one label for all pools of no current plan.
	label := "other"
	if slices.Contains(c.plan.Pools(), pool) {
		label = pool
	}
	c.c.addReports(label, 0, res.Malformed)
	c.log.Warn("batch of an epoch whose reports cannot open here: all counted malformed", "batch", res.Batch, "metric", b.Metric, "reports", len(b.Sealed), "why", why)
	return res, nil
}

// accumulate accumulates the opened reports of pool in epoch e: a
// metric's reports, or pooled messages. It returns the metrics' rows and
// statistics, and the number of valid reports or messages.
func (c *Collector) accumulate(ctx context.Context, e *epochState, pool string, plain [][]byte) ([]metricBatch, int64, error) {
	if e.pool != nil {
		return c.accumulatePool(ctx, e.pool, plain)
	}
	ms := e.metrics[pool]
	stat, err := ms.r.Accumulate(ctx, ms.m.Eps0, plain)
	if err != nil {
		return nil, 0, fmt.Errorf("collector: metric %q: accumulating: %w", ms.m.Name, err)
	}
	if err := checkAccumulated(stat, ms, len(plain)); err != nil {
		return nil, 0, err
	}
	return []metricBatch{{rec: batchRecord{metric: pool, n: stat.N, malformed: stat.Malformed}, stat: stat}}, stat.N, nil
}

// accumulatePool splits pooled messages into their parts and accumulates
// them per metric. It returns the metrics' contributions (those with at
// least one report) and the number of valid messages: those that decode,
// carry what the travel mode says, and none of whose parts a plugin
// dropped. (A message with a dropped part still went through the
// shuffle, so not counting it understates the batch: the guarantee can
// only come out weaker.)
func (c *Collector) accumulatePool(ctx context.Context, ps *poolState, plain [][]byte) ([]metricBatch, int64, error) {
	per := make([][][]byte, len(ps.metrics))
	valid := int64(0)
	for _, pt := range plain {
		msg, err := report.DecodeMessage(pt)
		if err != nil || !ps.valid(msg) {
			continue
		}
		valid++
		for _, p := range msg {
			per[p.Metric] = append(per[p.Metric], p.Report)
		}
	}
	var out []metricBatch
	for i, ms := range ps.metrics {
		if len(per[i]) == 0 {
			continue
		}
		stat, err := ms.r.Accumulate(ctx, ms.m.Eps0, per[i])
		if err != nil {
			return nil, 0, fmt.Errorf("collector: metric %q: accumulating: %w", ms.m.Name, err)
		}
		if err := checkAccumulated(stat, ms, len(per[i])); err != nil {
			return nil, 0, err
		}
		valid -= stat.Malformed
		out = append(out, metricBatch{rec: batchRecord{metric: ms.m.Name, n: stat.N, malformed: stat.Malformed}, stat: stat})
	}
	return out, max(valid, 0), nil
}

// valid reports whether a decoded message carries what the pool's travel
// mode says: every metric once, in plan order (joint), or exactly one
// metric (parallel), each part of its plugin's report length.
func (ps *poolState) valid(msg []report.Part) bool {
	switch accountant.Travel(ps.travel) {
	case accountant.TravelJoint:
		if len(msg) != len(ps.metrics) {
			return false
		}
		for i, p := range msg {
			if p.Metric != i {
				return false
			}
		}
	case accountant.TravelParallel:
		if len(msg) != 1 || msg[0].Metric >= len(ps.metrics) {
			return false
		}
	default:
		return false
	}
	for _, p := range msg {
		if rb := ps.metrics[p.Metric].desc.ReportBytes; rb > 0 && len(p.Report) != rb {
			return false
		}
	}
	return true
}

func fmtOptional(v *float64) any {
	if v == nil {
		return "unknown"
	}
	return *v
}

// checkAccumulated checks a plugin's statistic for a batch of n reports:
// it must be of the metric's plugin, configuration and eps0 and count each
// report once. A plugin that lies is an error, not data.
func checkAccumulated(s *sdk.Statistic, ms *metricState, n int) error {
	ref := &sdk.Statistic{Plugin: ms.desc.Name, Digest: ms.desc.Digest, Eps0: ms.m.Eps0}
	if s == nil {
		return fmt.Errorf("collector: metric %q: plugin returned no statistic", ms.m.Name)
	}
	ref.Counts = make([]int64, len(s.Counts))
	if err := ref.Compatible(s); err != nil {
		return fmt.Errorf("collector: metric %q: plugin statistic: %w", ms.m.Name, err)
	}
	if s.N < 0 || s.Malformed < 0 || s.N+s.Malformed != int64(n) {
		return fmt.Errorf("collector: metric %q: plugin counted N = %d and Malformed = %d for %d reports", ms.m.Name, s.N, s.Malformed, n)
	}
	return nil
}

// openAll opens the sealed reports of a batch with binding, in parallel.
// It returns the plaintexts of those that open and, when reportBytes > 0,
// have that length, and the sealed reports that do not open. Those that
// open with a wrong length are in neither.
func (c *Collector) openAll(binding report.Binding, reportBytes int, sealed [][]byte) (plain, unopened [][]byte) {
	out := make([][]byte, len(sealed))
	failed := make([]bool, len(sealed))
	workers := max(1, min(c.o.Workers, len(sealed)/64))
	var wg sync.WaitGroup
	chunk := (len(sealed) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min(len(sealed), (w+1)*chunk)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				pt, err := report.Open(c.key, binding, sealed[i])
				switch {
				case err != nil:
					failed[i] = true
				case reportBytes > 0 && len(pt) != reportBytes:
				default:
					out[i] = pt
				}
			}
		})
	}
	wg.Wait()
	plain = out[:0]
	for i, pt := range out {
		if pt != nil {
			plain = append(plain, pt)
		} else if failed[i] {
			unopened = append(unopened, sealed[i])
		}
	}
	return plain, unopened
}

// IngestStats are the collector's ingest counters since it was opened.
type IngestStats struct {
	// Batches counts batches ingested; Duplicates, batches acknowledged
	// again without counting; Bad, bodies that did not decode; Refused,
	// well-formed batches refused.
	Batches    int64 `json:"batches"`
	Duplicates int64 `json:"duplicates"`
	Bad        int64 `json:"bad"`
	Refused    int64 `json:"refused"`
	// Reports and Malformed count valid and dropped reports.
	Reports   int64 `json:"reports"`
	Malformed int64 `json:"malformed"`
	// Held counts the ingested batches with fewer than n_min valid
	// reports (of an epoch), HeldReports those reports: stored and counted
	// in Batches and Reports, held out of every estimate until later
	// batches of their pool, epoch and period bring them to n_min
	// (IngestResult.Held).
	Held        int64 `json:"held"`
	HeldReports int64 `json:"held_reports"`
}

// Stats returns the collector's ingest counters.
func (c *Collector) Stats() IngestStats {
	st := IngestStats{
		Batches: c.c.batches.Load(), Duplicates: c.c.duplicates.Load(), Bad: c.c.bad.Load(),
		Refused: c.c.refused.Load(), Held: c.c.held.Load(),
	}
	c.c.eachPool(func(_ string, rc *reportCounts) {
		st.Reports += rc.valid.Load()
		st.Malformed += rc.malformed.Load()
		st.HeldReports += rc.held.Load()
	})
	return st
}
