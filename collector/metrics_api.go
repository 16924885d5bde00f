package collector

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// MetricList is the JSON body of GET /v1/metrics.
type MetricList struct {
	// Epoch is the current plan epoch.
	Epoch string `json:"epoch"`
	// Metrics are the plan's metrics and any other metric with stored
	// data, by name.
	Metrics []MetricSummary `json:"metrics"`
	// Ingest are this process's ingest counters, since it started.
	Ingest IngestStats `json:"ingest"`
	// Stored is what the store every replica shares holds per period
	// (stored.go): the same on every replica.
	Stored Stored `json:"stored"`
	// Scope says against whom the stated guarantees hold.
	Scope Scope `json:"scope"`
}

// MetricSummary is one metric in GET /v1/metrics.
type MetricSummary struct {
	// Name and Plugin identify the metric.
	Name   string `json:"name"`
	Plugin string `json:"plugin"`
	// InPlan reports whether the metric is in the current plan.
	InPlan bool `json:"in_plan"`
	// Epochs are the epochs with data, oldest first.
	Epochs []string `json:"epochs"`
	// N and Malformed are the valid and dropped reports over all epochs.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	// Batches is the number of batches over all epochs.
	Batches int64 `json:"batches"`
	// Held is the valid reports of held batches (fewer than n_min valid
	// reports so far in their pool, epoch and period): stored, in no
	// estimate yet, nor in N.
	Held int64 `json:"held,omitempty"`
}

func (c *Collector) handleMetrics(w http.ResponseWriter, r *http.Request) {
	rows, err := c.st.statistics(r.Context(), "")
	if err != nil {
		c.log.Error("listing metrics", "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "listing metrics failed")
		return
	}
	held, err := c.st.heldStatistics(r.Context(), "")
	if err != nil {
		c.log.Error("listing metrics", "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "listing metrics failed")
		return
	}
	byName := map[string]*MetricSummary{}
	for _, m := range c.plan.Metrics {
		byName[m.Name] = &MetricSummary{Name: m.Name, Plugin: m.Plugin, InPlan: true, Epochs: []string{}}
	}
	for _, row := range rows {
		s := byName[row.metric]
		if s == nil {
			s = &MetricSummary{Name: row.metric, Plugin: row.stat.Plugin, Epochs: []string{}}
			byName[row.metric] = s
		}
		s.Epochs = append(s.Epochs, row.epoch)
		s.N += row.stat.N
		s.Malformed += row.stat.Malformed
		s.Batches += row.batches
	}
	for _, row := range held {
		s := byName[row.metric]
		if s == nil {
			s = &MetricSummary{Name: row.metric, Plugin: row.stat.Plugin, Epochs: []string{}}
			byName[row.metric] = s
		}
		s.Held += row.stat.N
	}
	stored, err := c.Stored(r.Context())
	if err != nil {
		c.log.Error("listing metrics", "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "listing metrics failed")
		return
	}
	out := MetricList{Epoch: c.epoch, Metrics: []MetricSummary{}, Ingest: c.Stats(), Stored: stored, Scope: c.scope()}
	for _, s := range byName {
		out.Metrics = append(out.Metrics, *s)
	}
	sort.Slice(out.Metrics, func(i, j int) bool { return out.Metrics[i].Name < out.Metrics[j].Name })
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// MetricDetail is the JSON body of GET /v1/metrics/{name}.
type MetricDetail struct {
	// Name is the metric.
	Name string `json:"name"`
	// InPlan reports whether the metric is in the current plan.
	InPlan bool `json:"in_plan"`
	// Periods are the estimates of each reporting period (and plan
	// epoch) with data, by epoch then period, oldest first; filtered by
	// ?from= and ?to=.
	Periods []PeriodEstimate `json:"periods"`
	// Horizon is the guarantee per user over the plan's horizon at the
	// stored batch sizes (see HorizonGuarantee); null when there is no
	// periodic data or with ?horizon=0 (a composition may take seconds
	// when the batches changed: pollers skip it).
	Horizon *HorizonGuarantee `json:"horizon"`
	// Scope says against whom the stated guarantees hold.
	Scope Scope `json:"scope"`
}

// PeriodEstimate is a metric's estimate from the batches of one reporting
// period of one epoch.
type PeriodEstimate struct {
	// Start and End are the period, [Start, End) in UTC.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Epoch is the plan epoch; Current reports whether it is the current
	// one.
	Epoch   string `json:"epoch"`
	Current bool   `json:"current"`
	// Plugin, Version and Eps0 are the metric's randomizer in that epoch.
	Plugin  string  `json:"plugin"`
	Version string  `json:"version"`
	Eps0    float64 `json:"eps0"`
	// N and Malformed count the valid and dropped reports of the batches
	// in the estimate; Batches those batches. Draws counts the shuffler's
	// blanket draws among them (a plan's floor), not in N: the estimates
	// take their expected contribution out (omitted when none).
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	Draws     int64 `json:"draws,omitempty"`
	Batches   int64 `json:"batches"`
	// Held is the valid reports of the period's held batches (fewer than
	// n_min valid reports in all so far): in no estimate, nor in N, until
	// more of the period bring them to n_min. A period with held batches
	// only has no estimate (EstimateError says why).
	Held int64 `json:"held,omitempty"`
	// Confidence is the nominal coverage of the intervals.
	Confidence float64 `json:"confidence,omitempty"`
	// Estimates are the plugin's estimates: one per category, or sum and
	// mean. Null when no estimate can be made (EstimateError says why).
	Estimates     []ItemEstimate `json:"estimates"`
	EstimateError string         `json:"estimate_error,omitempty"`
	// MaxFakeFraction is the epoch's plan's max_fake_fraction: at most
	// that fraction of each batch's valid messages may be fake, and every
	// guarantee is computed for the batch's honest floor (omitted when 0).
	MaxFakeFraction float64 `json:"max_fake_fraction,omitempty"`
	// Guarantee is the weakest central guarantee among the batches: that
	// of the batch with the largest eps (the smallest one). Null when a
	// batch with valid reports has no known guarantee.
	Guarantee *BatchGuarantee `json:"guarantee"`
	// Floor is the weakest guarantee of the floor alone among the
	// batches, when the epoch's plan has a floor or a batch holds the
	// shuffler's blanket draws: each user's report among its batch's
	// draws, whatever the batch's other reports are (fakes included;
	// floor.go). Omitted otherwise.
	Floor *FloorGuarantee `json:"floor,omitempty"`
	// BatchList lists every batch, oldest first, held ones too.
	BatchList []BatchInfo `json:"batch_list"`
}

// ItemEstimate is one estimated quantity.
type ItemEstimate struct {
	// Label is the category, "sum" or "mean".
	Label string `json:"label"`
	// Value is the unbiased estimate, Variance its estimated variance, and
	// [Lo, Hi] the confidence interval.
	Value    float64 `json:"value"`
	Variance float64 `json:"variance"`
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
	// Post is the post-processed (feasible, biased) estimate and
	// [PostLo, PostHi] an interval around it.
	Post   float64 `json:"post"`
	PostLo float64 `json:"post_lo"`
	PostHi float64 `json:"post_hi"`
}

// BatchGuarantee is the central guarantee of one batch.
type BatchGuarantee struct {
	// Eps and Delta: the batch's reports are (Eps, Delta)-DP.
	Eps   float64 `json:"eps"`
	Delta float64 `json:"delta"`
	// N is the batch's number of valid reports of the metric.
	N int64 `json:"n"`
	// Messages is the number of shuffled messages the guarantee is
	// computed for: N with separate travel; with joint or parallel travel
	// the valid messages of the batch, which carry every metric (joint) or
	// one each (parallel).
	Messages int64 `json:"messages"`
	// Honest is, under a max_fake_fraction f (PeriodEstimate), the
	// honest floor of Messages, Messages - floor(f Messages), which the
	// guarantee counts in place of Messages (omitted when f is 0). As
	// with Messages, a tree protocol's level-mates are inferred at the
	// honest floor of the smaller of Messages and n_min, and a parallel
	// batch in which a metric may hold no honest message but the user's
	// has the local guarantee (one report).
	Honest int64 `json:"honest,omitempty"`
	// Draws is the shuffler's blanket draws the guarantee counts besides
	// the apps' reports (a plan's floor; omitted when none).
	Draws int64 `json:"draws,omitempty"`
	// Batch is the batch id.
	Batch string `json:"batch"`
}

// FloorGuarantee is the guarantee of a floor alone: a user's report among
// the shuffler's blanket draws of its batch, nothing else counted
// (accountant.FloorEpsilon with one honest report). It holds whatever the
// batch's other reports are.
type FloorGuarantee struct {
	// Eps and Delta: each user's report is (Eps, Delta)-DP. Eps is null
	// when it is not known.
	Eps   *float64 `json:"eps"`
	Delta float64  `json:"delta"`
	// Draws is the fewest draws of the period's batches, the count Eps is
	// for; with none, Eps is the local guarantee of one report.
	Draws int64 `json:"draws"`
	// Batch is the id of a batch with that many draws.
	Batch string `json:"batch"`
}

// BatchInfo is one ingested batch.
type BatchInfo struct {
	// ID is the batch id (hex).
	ID string `json:"id"`
	// N and Malformed count the metric's valid and dropped reports.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	// Messages is the number of shuffled messages its guarantee is for
	// (see BatchGuarantee), and Honest their honest floor under a
	// max_fake_fraction (omitted when it is 0).
	Messages int64 `json:"messages"`
	Honest   int64 `json:"honest,omitempty"`
	// Draws is the shuffler's blanket draws its guarantee counts (a plan's
	// floor; omitted when none).
	Draws int64 `json:"draws,omitempty"`
	// Eps and Delta are its central guarantee; null when unknown.
	Eps   *float64 `json:"eps"`
	Delta *float64 `json:"delta"`
	// Held is set while the batch is held out of the estimate (it and
	// the other held batches of its period hold fewer than n_min valid
	// reports).
	Held bool `json:"held,omitempty"`
}

func (c *Collector) handleMetric(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { c.m.estimateSeconds.Observe(time.Since(start).Seconds()) }()
	name := r.PathValue("name")
	if name == "" {
		httpserver.WriteError(w, http.StatusNotFound, "no metric name")
		return
	}
	ctx := r.Context()
	rows, err := c.st.statistics(ctx, name)
	if err != nil {
		c.log.Error("reading statistics", "metric", name, "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "reading statistics failed")
		return
	}
	inPlan := c.plan.Metric(name) != nil
	if len(rows) == 0 && !inPlan {
		httpserver.WriteError(w, http.StatusNotFound, "no metric %q", name)
		return
	}
	from, to, err := timeFilter(r)
	if err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "%v", err)
		return
	}
	held, err := c.st.heldStatistics(ctx, name)
	if err != nil {
		c.log.Error("reading statistics", "metric", name, "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "reading statistics failed")
		return
	}
	out := MetricDetail{Name: name, InPlan: inPlan, Periods: []PeriodEstimate{}, Scope: c.scope()}
	for _, row := range rows {
		if !periodIn(row.period, from, to) {
			continue
		}
		e, err := c.periodEstimate(ctx, row, rows)
		if err != nil {
			c.log.Error("estimating", "metric", name, "epoch", row.epoch, "period", row.period, "error", err)
			httpserver.WriteError(w, http.StatusInternalServerError, "estimating %s failed", name)
			return
		}
		out.Periods = append(out.Periods, e)
	}
	if err := c.addHeld(ctx, &out, held, from, to); err != nil {
		c.log.Error("held batches", "metric", name, "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "reading the held batches of %s failed", name)
		return
	}
	if r.URL.Query().Get("horizon") == "0" {
		rows = nil // skipped on request: it may take seconds
	}
	if out.Horizon, err = c.horizonGuarantee(ctx, rows); err != nil {
		c.log.Error("horizon guarantee", "metric", name, "error", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "the horizon guarantee of %s failed", name)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// periodEstimate estimates one metric in one epoch and period from its
// statistic; for a randomizer whose estimates span several periods
// (sdk.Description.Span, a stateful tree protocol) from the merged
// statistics of the periods of the span up to this one (rows: all the
// metric's statistics).
func (c *Collector) periodEstimate(ctx context.Context, row statRow, rows []statRow) (PeriodEstimate, error) {
	e := PeriodEstimate{
		Start: periodStart(row.period), End: periodEnd(row.period),
		Epoch: row.epoch, Current: row.epoch == c.epoch, Plugin: row.stat.Plugin, Eps0: row.stat.Eps0,
		N: row.stat.N - row.stat.Draws, Draws: row.stat.Draws, Malformed: row.stat.Malformed, Batches: row.batches, BatchList: []BatchInfo{},
	}
	p, err := c.epochPlan(ctx, row.epoch)
	if err != nil {
		return e, err
	}
	m := p.Metric(row.metric)
	if m == nil {
		return e, fmt.Errorf("collector: metric %q is not in the plan of epoch %s", row.metric, row.epoch)
	}
	e.Version = m.Version
	r, err := c.o.Open(ctx, m.Plugin, m.Config())
	if err != nil {
		return e, err
	}
	stat, err := c.spanStatistic(ctx, r, row, rows)
	if err != nil {
		return e, err
	}
	var est *sdk.Estimate
	if stat == nil {
		err = fmt.Errorf("%w: no valid report in this period: the span's estimate belongs to an earlier one", sdk.ErrBadStatistic)
	} else {
		est, err = estimate(ctx, r, stat)
	}
	switch {
	case errors.Is(err, sdk.ErrBadStatistic):
		e.EstimateError = err.Error()
	case err != nil:
		return e, err
	default:
		e.Confidence = est.Confidence
		e.Estimates = make([]ItemEstimate, len(est.Items))
		for i, it := range est.Items {
			e.Estimates[i] = ItemEstimate{it.Label, it.Value, it.Variance, it.Lo, it.Hi, it.Post, it.PostLo, it.PostHi}
		}
		// JSON has no NaN or infinity: a plugin's non-finite estimate
		// would otherwise leave an empty 200 answer.
		if label, v, ok := nonFinite(e.Estimates); ok {
			e.Estimates, e.Confidence = nil, 0
			e.EstimateError = fmt.Sprintf("the plugin's estimate of %q is not a finite number (%v)", label, v)
		}
	}
	batches, err := c.st.batchList(ctx, row.metric, row.epoch, row.period)
	if err != nil {
		return e, err
	}
	// Held batches included: against the collector, which received them,
	// their reports have their own batch's guarantee (ingest.go).
	e.BatchList, e.Guarantee = batchInfos(batches)
	e.Floor = c.periodFloor(ctx, p, row, batches)
	withHonest(p, &e)
	return e, nil
}

// withHonest adds to e the assumption its guarantees are computed under
// when its epoch's plan p has a max_fake_fraction: the fraction, and each
// batch's honest floor (the count the accountant was given).
func withHonest(p *plan.Plan, e *PeriodEstimate) {
	if p == nil || p.MaxFakeFraction == 0 {
		return
	}
	e.MaxFakeFraction = p.MaxFakeFraction
	honest := func(messages int64) int64 { return int64(p.HonestReports(int(max(messages, 0)))) }
	for i := range e.BatchList {
		e.BatchList[i].Honest = honest(e.BatchList[i].Messages)
	}
	if e.Guarantee != nil {
		e.Guarantee.Honest = honest(e.Guarantee.Messages)
	}
}

// addHeld adds the held batches (held: their merged statistics, by
// epoch and period) to out's periods: their count to a period with an
// estimate, or a period of its own, without estimate, for one with held
// batches only. Periods stay in the order of epochs, then periods.
func (c *Collector) addHeld(ctx context.Context, out *MetricDetail, held []statRow, from, to time.Time) error {
	type key struct {
		epoch string
		start int64
	}
	at := map[key]int{}
	for i, e := range out.Periods {
		at[key{e.Epoch, e.Start.Unix()}] = i
	}
	added := false
	for _, row := range held {
		if !periodIn(row.period, from, to) {
			continue
		}
		if i, ok := at[key{row.epoch, row.period.Start}]; ok {
			out.Periods[i].Held = row.stat.N
			continue
		}
		e := PeriodEstimate{
			Start: periodStart(row.period), End: periodEnd(row.period),
			Epoch: row.epoch, Current: row.epoch == c.epoch, Plugin: row.stat.Plugin, Eps0: row.stat.Eps0,
			Held: row.stat.N, BatchList: []BatchInfo{},
			EstimateError: fmt.Sprintf("no estimate yet: the period's batches hold %d valid reports, fewer than n_min; they wait for more of the period", row.stat.N),
		}
		p, err := c.epochPlan(ctx, row.epoch)
		if err == nil && p != nil {
			if m := p.Metric(row.metric); m != nil {
				e.Version = m.Version
			}
		}
		batches, err := c.st.batchList(ctx, row.metric, row.epoch, row.period)
		if err != nil {
			return err
		}
		e.BatchList, e.Guarantee = batchInfos(batches)
		withHonest(p, &e)
		out.Periods = append(out.Periods, e)
		added = true
	}
	if added {
		// By epoch in the order published (one not published first, as
		// the statistics are listed), then period.
		stored, err := c.st.plans(ctx, "")
		if err != nil {
			return err
		}
		order := map[string]int{}
		for i, e := range stored {
			order[e.epoch] = len(stored) - i // newest first
		}
		slices.SortStableFunc(out.Periods, func(a, b PeriodEstimate) int {
			return cmp.Or(cmp.Compare(order[a.Epoch], order[b.Epoch]), a.Start.Compare(b.Start))
		})
	}
	return nil
}

// periodStart and periodEnd return the bounds of period p in UTC.
func periodStart(p report.Period) time.Time { return time.Unix(p.Start, 0).UTC() }
func periodEnd(p report.Period) time.Time   { return time.Unix(p.End(), 0).UTC() }

// batchInfos returns the batch list of a period and its weakest
// guarantee: that of the batch with the largest eps, nil when a batch
// with valid reports has none.
func batchInfos(batches []batchRecord) ([]BatchInfo, *BatchGuarantee) {
	list := []BatchInfo{}
	var weakest *BatchGuarantee
	unknown := false
	for _, b := range batches {
		list = append(list, BatchInfo{ID: hex.EncodeToString(b.id[:]), N: b.n, Malformed: b.malformed, Messages: b.messages, Draws: b.draws, Eps: b.eps, Delta: b.delta, Held: b.held})
		switch {
		case b.eps == nil || b.delta == nil:
			// A batch with valid reports and no guarantee makes the
			// weakest one unknown: no smaller eps is claimed.
			unknown = unknown || b.n > 0
		case weakest == nil || *b.eps > weakest.Eps:
			weakest = &BatchGuarantee{Eps: *b.eps, Delta: *b.delta, N: b.n, Messages: b.messages, Draws: b.draws, Batch: hex.EncodeToString(b.id[:])}
		}
	}
	if unknown {
		weakest = nil
	}
	return list, weakest
}

// spanStatistic returns the statistic row's estimate comes from: row's own,
// or for a randomizer with Span > 1 the merge of the statistics of the same
// metric, epoch and period length whose period index lies in
// [floor(i/Span)*Span, i], i row's index. It returns nil when a spanning
// estimate cannot be for row's period (row has no valid report: the
// estimate would be for an earlier period of the span).
func (c *Collector) spanStatistic(ctx context.Context, r sdk.Randomizer, row statRow, rows []statRow) (*sdk.Statistic, error) {
	d, err := r.Describe(ctx)
	if err != nil {
		return nil, err
	}
	if d.Span <= 1 {
		return row.stat, nil
	}
	if row.stat.N == 0 {
		return nil, nil
	}
	i := row.period.Start / row.period.Length
	first := i - i%d.Span
	merged := *row.stat
	merged.Counts = append([]int64(nil), row.stat.Counts...)
	for _, o := range rows {
		if o.metric != row.metric || o.epoch != row.epoch || o.period.Length != row.period.Length || o.period == row.period {
			continue
		}
		if j := o.period.Start / o.period.Length; j >= first && j < i {
			if err := merged.Merge(o.stat); err != nil {
				return nil, fmt.Errorf("collector: merging the span of %s: %w", row.metric, err)
			}
		}
	}
	return &merged, nil
}

// nonFinite returns the label and value of the first NaN or infinite
// number among items, and whether there is one.
func nonFinite(items []ItemEstimate) (string, float64, bool) {
	for _, it := range items {
		for _, v := range []float64{it.Value, it.Variance, it.Lo, it.Hi, it.Post, it.PostLo, it.PostHi} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return it.Label, v, true
			}
		}
	}
	return "", 0, false
}
