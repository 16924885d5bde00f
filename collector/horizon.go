package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/report"
)

// The guarantee over the horizon (spec time.md sections 1-2). A user sends
// at most one report per metric (separate travel) or one message (joint)
// per period, and each is shuffled in one batch of its period. The
// collector's view of the user over a window of periods is dominated by
// the composition of, for each period and pool, the single-report shuffled
// mechanism of the batch holding the user's report, at that batch's size
// (adaptive composition of dominating pairs, Zhu, Dong, Wang 2022). Which
// batch of a period holds it is not known, so each period and pool counts
// at its smallest batch; and to keep the composition fast, every period of
// a pool in the window counts at the pool's smallest batch of the window,
// rounded down to two significant digits. Both only lower n, which is
// sound: the true single-report profile does not grow with n (a batch with
// one more randomized report, reshuffled, is a post-processing of the
// smaller one), and the accountant's bound at the smaller n is an upper
// bound of the true profile there.
//
// Reports stored without a period (from an SDK before periods) were not
// held to one per period and cannot be placed in a window: when any is
// stored the guarantee is stated as unknown. The guarantee stated is the
// largest eps, at the plan's target delta, over every window of Horizon
// consecutive periods with data (the weakest window), from the accountant's
// composition (accountant.NewComposition, an upper bound).
//
// Parallel travel is not covered: its batches' mechanisms differ by their
// actual mix of metrics, and one pair that dominates them all is not
// computed here; its horizon guarantee is reported as unknown.

// HorizonGuarantee is the per-user guarantee over the plan's horizon at the
// stored batch sizes, across every metric of the plan (the target's
// meaning).
type HorizonGuarantee struct {
	// Periods is the horizon H: the guarantee holds for every window of H
	// consecutive periods of the current plan (aligned to its period
	// boundaries; a period of an earlier plan counts in every window it
	// overlaps).
	Periods int `json:"periods"`
	// Period is the length of a period (a Go duration).
	Period string `json:"period"`
	// Eps and Delta: every user's reports in the weakest window of H
	// periods are (Eps, Delta)-DP. Eps is null when it is not known (see
	// Note).
	Eps   *float64 `json:"eps"`
	Delta float64  `json:"delta"`
	// Window is the weakest window.
	Window *report.PeriodSpan `json:"window,omitempty"`
	// Reports is the number of a user's reports composed in that window
	// (periods times pools with data).
	Reports int `json:"reports"`
	// Target is the plan's (eps, delta) over H periods.
	TargetEps   float64 `json:"target_eps"`
	TargetDelta float64 `json:"target_delta"`
	// Note says what the guarantee covers or why Eps is unknown.
	Note string `json:"note,omitempty"`
}

// horizonPart is one (period, pool) of the window: its epoch's plan, the
// pool and its smallest batch.
type horizonPart struct {
	period report.Period
	epoch  string
	pool   string
	n      int64
}

// horizonCacheSize bounds the compositions memoised.
const horizonCacheSize = 256

// horizonCache memoises compositions by their parts.
type horizonCache struct {
	mu sync.Mutex
	m  map[string]float64
}

func (h *horizonCache) get(k string) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[k]
	return v, ok
}

func (h *horizonCache) put(k string, v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= horizonCacheSize {
		h.m = map[string]float64{} // bounded: start over
	}
	h.m[k] = v
}

// horizonGuarantee computes the HorizonGuarantee of the current plan from
// the stored batches of every period (rows: the periodic statistics of
// one metric, used to tell whether there is periodic data at all).
func (c *Collector) horizonGuarantee(ctx context.Context, rows []statRow) (*HorizonGuarantee, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	p := c.plan
	h := &HorizonGuarantee{Periods: p.HorizonPeriods(), Period: p.PeriodLength().String(), Delta: p.Target.Delta,
		TargetEps: p.Target.Eps, TargetDelta: p.Target.Delta}
	if p.Travel == string(accountant.TravelParallel) {
		h.Note = "not computed for parallel travel: its batches' mechanisms depend on their mix of metrics"
		return h, nil
	}
	legacy, err := c.st.unperiodedReports(ctx)
	if err != nil {
		return nil, err
	}
	if legacy > 0 {
		// Their senders were not held to one report per period, and when
		// they were sent is not stored: no window can account for them.
		h.Note = fmt.Sprintf("unknown: %d stored reports carry no reporting period (sealed by an SDK from before periods), so no window can account for them", legacy)
		return h, nil
	}
	rowsByMetric, err := c.st.periodParts(ctx)
	if err != nil {
		return nil, err
	}
	// One part per period, epoch and pool: the metrics of a pooled plan
	// share their pool, at its smallest batch.
	var parts []horizonPart
	at := map[horizonPart]int{}
	for _, q := range rowsByMetric {
		pl, err := c.epochPlan(ctx, q.epoch)
		if err != nil {
			return nil, err
		}
		if pl == nil {
			h.Note = fmt.Sprintf("unknown: the plan of epoch %s is not stored", q.epoch)
			return h, nil
		}
		n := q.n
		q.pool, q.n = pl.Pool(q.pool), 0
		if i, ok := at[q]; ok {
			parts[i].n = min(parts[i].n, n)
			continue
		}
		at[q] = len(parts)
		q.n = n
		parts = append(parts, q)
	}
	if len(parts) == 0 {
		return nil, nil
	}
	windows := horizonWindows(parts, int64(p.PeriodLength()/time.Second), int64(h.Periods))
	var worst float64
	found := false
	for _, w := range windows {
		eps, err := c.composeParts(ctx, w.in, p.Target.Delta)
		if errors.Is(err, errNoMechanism) {
			h.Note = err.Error()
			return h, nil
		}
		if err != nil {
			return nil, err
		}
		if !found || eps > worst {
			worst, found = eps, true
			h.Window = &report.PeriodSpan{Start: time.Unix(w.start, 0).UTC(), End: time.Unix(min(w.end, maxJSONTime), 0).UTC()}
			h.Reports = len(w.in)
		}
	}
	h.Eps = &worst
	h.Note = "every user's reports of every metric in the weakest window of the horizon, each metric's at its smallest batch in the window (an upper bound)"
	return h, nil
}

// horizonWindow is a window of the horizon and the parts it overlaps.
type horizonWindow struct {
	start, end int64
	in         []horizonPart
}

// horizonWindows returns the windows of h periods of length l seconds
// (aligned to the current plan's periods: starts at multiples of l, in
// Unix seconds; h <= MaxRounds periods of at most a year stay below 2^45,
// no overflow) whose compositions bound every window's, skipping those
// another one dominates. parts are sorted by period start.
//
// Which windows suffice: a period is in a window [s, s+h*l) when it
// overlaps it (an earlier epoch may have longer or shorter periods). Take
// any window W and let e be the earliest end among its periods. The window
// starting at s' = floor((e-1)/l)*l still holds all of W's periods: s'
// >= W's start (both are multiples of l and W's start <= e-1), so every
// period starting before W's end starts before the end of s'; and every
// period of W ends at or after e > s'. So the windows starting at
// floor((end-1)/l)*l for each period's end cover every window, including
// those after an epoch of longer periods (a window starting at a period's
// start would miss them).
//
// Which can be skipped: a window is dominated when another holds, for
// every (epoch, pool) of it, at least as many periods at a smallest batch
// no larger (both as composeParts rounds them), spread over at least as
// long a span from the first to the last (a tree protocol's charge,
// accountant.LongitudinalPart, grows with the trees its span meets, and
// with its periods and its smallest batch as the others' do). Its composition is then
// a sub-composition of the other's with larger batches, whose true profile
// the other's bound dominates (an extra mechanism composed, or a larger
// batch, never lowers the privacy loss's profile; see the top of the
// file); so only undominated windows are composed.
func horizonWindows(parts []horizonPart, l, h int64) []horizonWindow {
	starts := map[int64]bool{}
	var order []int64
	for _, q := range parts {
		s := (q.period.End() - 1) / l * l
		if !starts[s] {
			starts[s] = true
			order = append(order, s)
		}
	}
	slices.Sort(order)
	type pk struct{ epoch, pool string }
	type load struct {
		rounds      int
		n           int64
		first, last int64 // period indices: a tree protocol's charge grows with the spread
	}
	var ws []horizonWindow
	var loads []map[pk]load
	for _, s := range order {
		w := horizonWindow{start: s, end: s + h*l}
		m := map[pk]load{}
		for _, q := range parts {
			if q.period.Start < w.end && q.period.End() > w.start {
				w.in = append(w.in, q)
				k := pk{q.epoch, q.pool}
				ld, ok := m[k]
				if !ok || q.n < ld.n {
					ld.n = q.n
				}
				i := q.period.Start / max(q.period.Length, 1)
				if !ok || i < ld.first {
					ld.first = i
				}
				if !ok || i > ld.last {
					ld.last = i
				}
				ld.rounds++
				m[k] = ld
			}
		}
		for k, ld := range m {
			ld.n = roundDown2(ld.n)
			m[k] = ld
		}
		ws = append(ws, w)
		loads = append(loads, m)
	}
	dominates := func(a, b map[pk]load) bool { // a dominates b
		for k, lb := range b {
			la, ok := a[k]
			if !ok || la.rounds < lb.rounds || la.n > lb.n || la.last-la.first < lb.last-lb.first {
				return false
			}
		}
		return true
	}
	var out []horizonWindow
	for i := range ws {
		skip := false
		for j := range ws {
			// Of two windows dominating each other (equal loads) the
			// earlier is kept.
			if j != i && dominates(loads[j], loads[i]) && (j < i || !dominates(loads[i], loads[j])) {
				skip = true
				break
			}
		}
		if !skip {
			out = append(out, ws[i])
		}
	}
	return out
}

// maxJSONTime is the last Unix second of year 9999, the largest time
// encoding/json writes.
const maxJSONTime = 253402300799

// errNoMechanism reports a part whose plan or mechanism is unavailable.
var errNoMechanism = errors.New("collector: horizon guarantee unknown")

// composeParts returns the eps at delta of the composition of parts
// (memoised): each (epoch, pool) of the window counts as many rounds as it
// has periods, all at its smallest batch of the window rounded down to two
// significant digits. A smaller batch only weakens the bound, so this
// dominates the composition at each period's own size, and the accountant
// composes a few homogeneous parts in a fraction of the time of as many
// different parts as periods (the API answers within seconds).
func (c *Collector) composeParts(ctx context.Context, parts []horizonPart, delta float64) (float64, error) {
	type key struct {
		epoch, pool string
		n           int64
	}
	type pk struct{ epoch, pool string }
	smallest := map[pk]int64{}
	for _, q := range parts {
		k := pk{q.epoch, q.pool}
		if n, ok := smallest[k]; !ok || q.n < n {
			smallest[k] = q.n
		}
	}
	rounds := map[key]int{}
	first, last := map[key]int64{}, map[key]int64{} // period indices
	for _, q := range parts {
		k := key{q.epoch, q.pool, roundDown2(smallest[pk{q.epoch, q.pool}])}
		rounds[k]++
		i := q.period.Start / max(q.period.Length, 1)
		if f, ok := first[k]; !ok || i < f {
			first[k] = i
		}
		last[k] = max(last[k], i)
	}
	keys := make([]key, 0, len(rounds))
	for k := range rounds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.epoch != b.epoch {
			return a.epoch < b.epoch
		}
		if a.pool != b.pool {
			return a.pool < b.pool
		}
		return a.n < b.n
	})
	var sig strings.Builder
	fmt.Fprintf(&sig, "%g", delta)
	for _, k := range keys {
		fmt.Fprintf(&sig, "|%s/%s/%d*%d~%d", k.epoch, k.pool, k.n, rounds[k], last[k]-first[k]+1)
	}
	if v, ok := c.horizon.get(sig.String()); ok {
		return v, nil
	}
	var ps []accountant.Part
	var long []int // indices into ps of tree protocols, with their keys
	var longKeys []key
	for _, k := range keys {
		pl, err := c.epochPlan(ctx, k.epoch)
		if err != nil || pl == nil {
			return 0, fmt.Errorf("%w: the plan of epoch %s is not stored", errNoMechanism, k.epoch)
		}
		if pl.Travel == string(accountant.TravelParallel) {
			return 0, fmt.Errorf("%w: epoch %s has parallel travel", errNoMechanism, k.epoch)
		}
		name := k.pool
		if pl.Pooled() {
			name = pl.Metrics[0].Name // a pool's mechanism is the whole plan's
		}
		mech, eps0, _, err := pl.BatchMechanism(ctx, c.o.Open, name)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
		}
		isLong, err := accountant.IsLongitudinal(mech)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
		}
		if isLong {
			long, longKeys = append(long, len(ps)), append(longKeys, k)
		}
		ps = append(ps, accountant.Part{Mech: mech, Eps0: eps0, N: int(k.n), Rounds: rounds[k]})
	}
	// A tree protocol's reports are not independent across periods: its
	// part is the protocol's own (accountant.LongitudinalPart) over the
	// horizon's window, each paying its level-count tail out of delta.
	var tails float64
	for i, at := range long {
		k := longKeys[i]
		budget := 0.05 * delta / float64(len(long))
		// The window meets the trees of the periods from its first to
		// its last with data.
		span := int(last[k] - first[k] + 1)
		p, tail, err := accountant.LongitudinalPart(ps[at].Mech, ps[at].Eps0, int(k.n), span, rounds[k], budget)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
		}
		ps[at], tails = p, tails+tail
	}
	comp, err := accountant.NewComposition(ps...)
	if err != nil {
		return 0, err
	}
	r, err := comp.Epsilon(delta - tails)
	if err != nil {
		return 0, err
	}
	c.horizon.put(sig.String(), r.Upper)
	return r.Upper, nil
}

// roundDown2 rounds n >= 1 down to two significant digits (29871 ->
// 29000, 99 -> 99).
func roundDown2(n int64) int64 {
	p := int64(1)
	for n/p >= 100 {
		p *= 10
	}
	return n / p * p
}

// timeFilter parses ?from= and ?to= (RFC 3339; either may be absent).
func timeFilter(r *http.Request) (from, to time.Time, err error) {
	parse := func(name string) (time.Time, error) {
		v := r.URL.Query().Get(name)
		if v == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s = %q: want an RFC 3339 time such as 2026-11-23T00:00:00Z", name, v)
		}
		return t, nil
	}
	if from, err = parse("from"); err != nil {
		return
	}
	if to, err = parse("to"); err != nil {
		return
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		err = fmt.Errorf("from = %s is not before to = %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return
}

// periodIn reports whether period p overlaps [from, to) (a zero bound is
// open); the zero period (no time) is in only when neither bound is set.
func periodIn(p report.Period, from, to time.Time) bool {
	if p.IsZero() {
		return from.IsZero() && to.IsZero()
	}
	start, end := time.Unix(p.Start, 0), time.Unix(p.End(), 0)
	return (from.IsZero() || end.After(from)) && (to.IsZero() || start.Before(to))
}
