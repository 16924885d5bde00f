package collector

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// The guarantee over the horizon (docs/time.md sections 1, 2 and 5). A
// user sends at most one report per metric (separate travel) or one
// message (joint, parallel) per period, and each is shuffled in one batch
// of its period. The collector's view of the user over a window of periods
// is dominated by the composition of, for each period and pool, the
// single-report shuffled mechanism of the batch holding the user's report,
// at that batch's size (adaptive composition of dominating pairs, Zhu,
// Dong, Wang 2022). Which batch of a period holds it is not known, so each
// period and pool counts at its smallest batch; and to keep the
// composition fast, every period of a pool in the window counts at the
// pool's smallest batch of the window, rounded down to two significant
// digits. Both only lower n, which is sound: the true single-report
// profile does not grow with n (a batch with one more randomized report,
// reshuffled, is a post-processing of the smaller one), and the
// accountant's bound at the smaller n is an upper bound of the true
// profile there.
//
// Parallel travel. A user's message of a period carries one metric, and
// the batch holding it was accounted (guarantee.go) at the weaker of the
// plan's weights and the batch's own mix of metrics
// (plan.ParallelMechanism with the batch's valid reports per metric), at
// its size. Which batch holds the message is not known, so each period's
// round is bounded by one pair that dominates every mechanism it can be:
// accountant.WorstOf of the plan's weights and of every distinct mix of
// the window's batches of the pool, at the window's smallest batch
// (rounded down as above). WorstOf's bound dominates each of its parts
// (accountant/worst.go); a mix's mechanism at the smallest batch dominates
// the same mix at its own batch's size (the argument above: its weights
// are fixed, a batch one report larger is a post-processing); and which
// batch, hence which mix, a round meets depends only on others' data and
// the shuffler's batching, never on the user's, so the composition of the
// window's rounds at WorstOf dominates the view (adaptive composition as
// above). The mixes are those stored: a parallel batch stores one row per
// metric with its valid reports (ingest.go), which grouped by batch id are
// the counts its own guarantee was computed from. Mixes with the same
// proportions are the same mechanism (the weights are counts/total, and
// equal rationals divide to the same float64), so they are kept once
// (mixKey). A window with more than maxHorizonMixes distinct mixes bounds
// them together instead (parallelBound), one accountant.ParallelFloor per
// set of metrics present: the parallel composition of those metrics at
// every weights at least a floor, the smallest weight of each metric over
// those mixes rounded down to a multiple of 1/floorGrid, dominates each of
// them (accountant/worst.go, points 6-8; a lower floor only gives up more
// blanket, so the rounding is sound). It gives up, as blanket, the
// fraction 1 - sum of the floor (small when the mixes are close), costs as
// much for any number of batches, and windows whose floors round alike
// share one composition.
//
// Tree protocols (accountant/longitudinal.go, proof point 3). When a
// user's state history differs only inside a window, the reports that
// differ are at most two per tree the window meets (one for one-period
// trees), sent from the window's first period to the end of the last tree
// it meets, after the window included. Trees are aligned on the period
// index (period.Start / period.Length): tree number = index / tree. So for
// a tree protocol's (epoch, pool) the window counts the periods with data
// of the pool whose index lies from the index of the window's first period
// to the last index of the last tree the window meets (those after the
// window count for that pool only: no other pool's later reports depend on
// the window's data), the trees they lie in, and their smallest batch;
// accountant.LongitudinalPart composes the node pairs of those trees, at
// most one per such period, among the level-mates that smallest batch
// holds.
//
// Fake reports (accountant/declare/fakes.go). With an epoch's
// max_fake_fraction f > 0, a batch of n holds at least n - floor(f n)
// honest reports, the fakes are known to the adversary, and the batch is a
// post-processing of its honest sub-batch; the honest floor does not
// decrease with n. So each (epoch, pool) counts at the honest floor of its
// smallest batch (rounded down first, as above: both roundings only lower
// the count), under its own epoch's f. With parallel travel a batch's mix
// is replaced by the least honest share of each metric
// (accounting.HonestShares), a floor that accountant.ParallelFloor bounds
// (kept as such a floor key, merged with the others by their smallest
// weights as above); a batch in which some metric present may have no
// honest message but the user's (localMix) has no such floor, and then
// every round of its (epoch, pool) in the window counts as every metric's
// randomizer alone, at one report (accountant.WorstOf at n = 1: the
// user's message unshuffled, which every batch's view is a
// post-processing of).
//
// The guarantee stated is the largest eps, at the plan's target delta,
// over every window of Horizon consecutive periods with data (the weakest
// window), from the accountant's composition (accountant.NewComposition,
// an upper bound).

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
	// Reports is the number of periods times pools with data composed for
	// that window: its own, and for a tree protocol those after it, to the
	// end of the last tree it meets, that can hold a report its data
	// changes (of which LongitudinalPart composes at most two per tree).
	Reports int `json:"reports"`
	// Target is the plan's (eps, delta) over H periods.
	TargetEps   float64 `json:"target_eps"`
	TargetDelta float64 `json:"target_delta"`
	// MaxFakeFraction is the current plan's max_fake_fraction: every
	// batch counts at its honest floor, under its own epoch's fraction
	// (omitted when 0).
	MaxFakeFraction float64 `json:"max_fake_fraction,omitempty"`
	// Note says what the guarantee covers or why Eps is unknown.
	Note string `json:"note,omitempty"`
	// Floor is the guarantee of the floor alone over the horizon, when
	// the plan has a floor or a batch holds the shuffler's blanket draws
	// (floor.go); omitted otherwise.
	Floor *HorizonFloor `json:"floor,omitempty"`
}

// horizonPart is one (period, pool) with data: its epoch's plan, the pool
// and its smallest batch, the pool's tree when it is a tree protocol's,
// and with parallel travel the mixes of its batches.
type horizonPart struct {
	period report.Period
	epoch  string
	pool   string
	n      int64
	// draws is the fewest shuffler's blanket draws of its batches
	// (floor.go).
	draws int64
	// tree is the periods per tree of a tree protocol's pool, 0 for any
	// other pool.
	tree int
	// mixes are, with parallel travel, the distinct mixes of metrics of
	// the period's batches (mixKey), sorted.
	mixes []string
}

// poolKey is one (epoch, pool).
type poolKey struct{ epoch, pool string }

// poolLoad is what one (epoch, pool) charges a window (horizonWindows).
type poolLoad struct {
	// reports is the number of its periods with data charged: those in the
	// window, or for a tree protocol those that can hold a report the
	// window's data changes.
	reports int
	// n is their smallest batch, rounded down by roundDown2.
	n int64
	// draws is their fewest shuffler's blanket draws (floor.go).
	draws int64
	// trees is, for a tree protocol, the number of trees those periods lie
	// in; 0 for any other pool.
	trees int
	// mixes are, with parallel travel, the distinct mixes of their
	// batches, sorted; bound is what composeParts bounds them by
	// (parallelBound).
	mixes, bound []string
}

// covers reports whether a load's charge bounds b's: at least as many
// reports and trees at a batch no larger. With parallel travel the round
// must also dominate each of b's mixes (mixCover).
func (a poolLoad) covers(b poolLoad) bool {
	return a.reports >= b.reports && a.n <= b.n && a.trees >= b.trees && a.draws <= b.draws
}

// maxHorizonMixes is the number of distinct mixes of metrics of a
// parallel pool a window composes one by one (each adds as many candidate
// pairs to every profile point of the composition as the plan's weights
// do; a floor adds that many per metric); beyond it they are bounded
// together (parallelBound).
const maxHorizonMixes = 4

// floorGrid: a floor weight is rounded down to a multiple of 1/floorGrid
// (one below 1/floorGrid is kept as it is), so that windows whose
// smallest weights differ by less share their composition; it gives up at
// most (metrics)/floorGrid more of the blanket.
const floorGrid = 256

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
// the stored batches of every period (rows: the statistics of one
// metric, used to tell whether there is data at all; none when the
// horizon is skipped).
func (c *Collector) horizonGuarantee(ctx context.Context, rows []statRow) (*HorizonGuarantee, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	p := c.plan
	h := &HorizonGuarantee{Periods: p.HorizonPeriods(), Period: p.PeriodLength().String(), Delta: p.Target.Delta,
		TargetEps: p.Target.Eps, TargetDelta: p.Target.Delta, MaxFakeFraction: p.MaxFakeFraction}
	rowsByMetric, err := c.st.periodParts(ctx)
	if err != nil {
		return nil, err
	}
	parts, err := c.horizonParts(ctx, rowsByMetric)
	if errors.Is(err, errNoMechanism) {
		h.Note = err.Error()
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, nil
	}
	windows := horizonWindows(parts, int64(p.PeriodLength()/time.Second), int64(h.Periods))
	var worst float64
	var weakest *horizonWindow
	for i, w := range windows {
		eps, err := c.composeParts(ctx, w.loads, p.Target.Delta, false)
		if errors.Is(err, errNoMechanism) {
			h.Note = err.Error()
			return h, nil
		}
		if err != nil {
			return nil, err
		}
		if weakest == nil || eps > worst {
			worst, weakest = eps, &windows[i]
		}
	}
	h.Eps = &worst
	h.Window = &report.PeriodSpan{Start: time.Unix(weakest.start, 0).UTC(), End: time.Unix(min(weakest.end, maxJSONTime), 0).UTC()}
	h.Reports = len(weakest.in)
	fakes := false
	for k := range weakest.loads {
		if pl, err := c.epochPlan(ctx, k.epoch); err == nil && pl != nil && pl.MaxFakeFraction > 0 {
			fakes = true
		}
	}
	h.Note = horizonNote(weakest.loads, fakes)
	h.Floor, err = c.horizonFloor(ctx, parts, windows)
	return h, err
}

// horizonNote says what the composition of a window with loads covers;
// fakes says whether an epoch of the window has a max_fake_fraction.
func horizonNote(loads map[poolKey]poolLoad, fakes bool) string {
	note := "every user's reports of every metric in the weakest window of the horizon, each metric's at its smallest batch in the window (an upper bound)"
	var tree, parallel, together, local bool
	for _, ld := range loads {
		tree = tree || ld.trees > 0
		parallel = parallel || len(ld.mixes) > 0
		together = together || len(ld.mixes) > maxHorizonMixes
		local = local || slices.Contains(ld.mixes, localMix)
	}
	if fakes {
		note += "; each batch counted at its honest floor, n - floor(f n) for its plan's max_fake_fraction f"
	}
	if local {
		note += "; a parallel batch in which a metric may hold no honest message but the user's (its messages no more than the fakes allowed) leaves its pool's reports in the window unshuffled (local eps0)"
	}
	if tree {
		note += "; a state metric's (tree protocol) node reports that the window's states can change, after the window to the end of the last tree it meets included, at the smallest batch of those periods"
	}
	if parallel {
		note += "; with parallel travel each period's message at the weakest of the plan's weights and every mix of metrics of the window's batches"
		if together {
			note += fmt.Sprintf(" (more than %d distinct mixes: bounded together, at the smallest share of each metric)", maxHorizonMixes)
		}
	}
	return note
}

// horizonParts merges the stored rows (periodParts: one per period, epoch
// and metric or pool) into one part per period, epoch and pool (the
// metrics of a pooled plan share their pool, at its smallest batch), with
// the pool's tree when it is a tree protocol's and, with parallel travel,
// the mixes of the period's batches. An error wrapping errNoMechanism
// says why the guarantee is unknown.
func (c *Collector) horizonParts(ctx context.Context, rows []horizonPart) ([]horizonPart, error) {
	type partKey struct {
		period      report.Period
		epoch, pool string
	}
	var parts []horizonPart
	at := map[partKey]int{}
	trees := map[poolKey]int{}
	for _, q := range rows {
		pl, err := c.epochPlan(ctx, q.epoch)
		if err != nil {
			return nil, err
		}
		if pl == nil {
			return nil, fmt.Errorf("%w: the plan of epoch %s is not stored", errNoMechanism, q.epoch)
		}
		q.pool = pl.Pool(q.pool)
		k := partKey{q.period, q.epoch, q.pool}
		if i, ok := at[k]; ok {
			parts[i].n = min(parts[i].n, q.n)
			parts[i].draws = min(parts[i].draws, q.draws)
			continue
		}
		pk := poolKey{q.epoch, q.pool}
		tree, ok := trees[pk]
		if !ok && !pl.Pooled() { // a tree protocol travels separately (accountant.AllocatePlan)
			mech, _, _, err := accounting.BatchMechanism(ctx, pl, c.o.Open, q.pool)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", errNoMechanism, err)
			}
			if tree, err = accountant.LongitudinalTree(mech); err != nil {
				return nil, fmt.Errorf("%w: %v", errNoMechanism, err)
			}
			trees[pk] = tree
		}
		q.tree = tree
		if pl.Travel == string(accountant.TravelParallel) {
			if q.mixes, err = c.periodMixes(ctx, pl, q.epoch, q.period); err != nil {
				return nil, err
			}
		}
		at[k] = len(parts)
		parts = append(parts, q)
	}
	return parts, nil
}

// horizonWindow is a window of the horizon, the parts it charges and its
// load per (epoch, pool).
type horizonWindow struct {
	start, end int64
	in         []horizonPart
	loads      map[poolKey]poolLoad
}

// horizonWindows returns the windows of h periods of length l seconds
// (aligned to the current plan's periods: starts at multiples of l, in
// Unix seconds; h <= MaxRounds periods of at most a year stay below 2^45,
// no overflow) whose compositions bound every window's, skipping those
// another one dominates. parts are sorted by period start.
//
// What a window charges (chargedWindow): the parts that overlap it, and for
// a tree protocol's pool the parts from its first period's index to the
// end of the last tree it meets (see the top of the file).
//
// Which windows suffice. Take any window W that charges something, and
// let e be the earliest end among the parts it charges. The window V
// starting at s = floor((e-1)/l)*l charges at least as much. s is at least
// the start of W (both are multiples of l, and W starts at or before e-1,
// every part W charges ending after W's start), and V ends no earlier
// than W. A part overlapping W starts before the end of W, hence before
// the end of V, and ends at or after e > s: it overlaps V. A tree
// protocol's part charged by W has an index from the index a of W's first
// period to the end E of the last tree W meets; it ends after s, so its
// index is at least that of V's first period, and E is at most the end of
// the last tree V meets (V ends no earlier): V charges it. The trees W
// counts are those of its charged parts, which V counts too. So V charges
// a superset of the parts W charges, per (epoch, pool): as many reports or
// more, trees and mixes included, at a smallest batch no larger. The
// windows starting at floor((end-1)/l)*l for each part's end are thus
// enough, including those after an epoch of longer periods (a window
// starting at a period's start would miss them).
//
// Which can be skipped: a window is dominated when another's load covers
// its load for every (epoch, pool) of it (poolLoad.covers): at least as
// many reports and trees at a smallest batch no larger (both as
// composeParts rounds them), and with parallel travel a round that
// dominates each of its mixes. The other's composition is then a valid
// bound of this one's true view: composing more rounds never lowers the
// bound's profile, a smaller batch only weakens it, a round that
// dominates every mechanism a period's batch can be dominates that period
// (see the top of the file), and accountant.LongitudinalPart's bound holds
// for any trees and reports at least the window's and any batch at most
// its smallest (its proof counts at most that many rounds and takes a
// union bound over at most that many periods). So only undominated
// windows are composed.
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
	var ws []horizonWindow
	for _, s := range order {
		if w := chargedWindow(parts, s, s+h*l); len(w.in) > 0 {
			ws = append(ws, w)
		}
	}
	covers := make([]map[poolKey]mixCover, len(ws))
	for i, w := range ws {
		covers[i] = map[poolKey]mixCover{}
		for k, ld := range w.loads {
			if len(ld.mixes) > 0 {
				covers[i][k] = newMixCover(ld)
			}
		}
	}
	dominates := func(i, j int) bool { // window i dominates window j
		for k, lb := range ws[j].loads {
			la, ok := ws[i].loads[k]
			if !ok || !la.covers(lb) {
				return false
			}
			if len(lb.mixes) > 0 && !covers[i][k].covers(covers[j][k], lb.mixes) {
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
			if j != i && dominates(j, i) && (j < i || !dominates(i, j)) {
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

// charges reports whether the window [start, end) charges part q: q
// overlaps it, or q is a tree protocol's period with an index from the
// index of the window's first period to the last index of the last tree
// the window meets (period indices in q's own period length).
func charges(q horizonPart, start, end int64) bool {
	if q.period.Start < end && q.period.End() > start {
		return true
	}
	if q.tree == 0 || q.period.Length <= 0 {
		return false
	}
	l, t := q.period.Length, int64(q.tree)
	i := q.period.Start / l
	first, last := start/l, (end-1)/l
	return i >= first && i <= (last/t+1)*t-1
}

// chargedWindow returns the window [start, end) with the parts it charges
// (charges) and its load per (epoch, pool): their number, their smallest
// batch rounded down (roundDown2), the trees of a tree protocol's and the
// mixes of a parallel pool's.
func chargedWindow(parts []horizonPart, start, end int64) horizonWindow {
	w := horizonWindow{start: start, end: end, loads: map[poolKey]poolLoad{}}
	trees := map[poolKey]map[int64]bool{}
	mixes := map[poolKey]map[string]bool{}
	for _, q := range parts {
		if !charges(q, start, end) {
			continue
		}
		w.in = append(w.in, q)
		k := poolKey{q.epoch, q.pool}
		ld, ok := w.loads[k]
		if !ok || q.n < ld.n {
			ld.n = q.n
		}
		if !ok || q.draws < ld.draws {
			ld.draws = q.draws
		}
		ld.reports++
		if q.tree > 0 {
			if trees[k] == nil {
				trees[k] = map[int64]bool{}
			}
			trees[k][q.period.Start/q.period.Length/int64(q.tree)] = true
		}
		for _, m := range q.mixes {
			if mixes[k] == nil {
				mixes[k] = map[string]bool{}
			}
			mixes[k][m] = true
		}
		w.loads[k] = ld
	}
	for k, ld := range w.loads {
		ld.n = roundDown2(ld.n)
		ld.trees = len(trees[k])
		for m := range mixes[k] {
			ld.mixes = append(ld.mixes, m)
		}
		slices.Sort(ld.mixes)
		ld.bound = parallelBound(ld.mixes)
		w.loads[k] = ld
	}
	return w
}

// maxJSONTime is the last Unix second of year 9999, the largest time
// encoding/json writes.
const maxJSONTime = 253402300799

// errNoMechanism reports a part whose plan or mechanism is unavailable.
var errNoMechanism = errors.New("collector: horizon guarantee unknown")

// composeParts returns the eps at delta of the composition of a window's
// loads (chargedWindow; memoised): each (epoch, pool) counts as many rounds
// as it has reports, all at its smallest batch (rounded down to two
// significant digits: a smaller batch only weakens the bound, so this
// dominates the composition at each period's own size, and the accountant
// composes a few homogeneous parts in a fraction of the time of as many
// different parts as periods, so the API answers within seconds), at that
// batch's honest floor under the epoch's max_fake_fraction. A parallel
// pool's round is accountant.WorstOf the plan's weights and its mixes
// (parallelRound), at one report when a mix has no honest floor
// (localMix); a tree protocol's part is accountant.LongitudinalPart over
// its trees and reports.
//
// Each part counts its fewest shuffler's blanket draws too (a plan's
// floor: accountant.Part.Floor). With alone set it counts them and
// nothing else, the user's report among the draws (one honest report, the
// floor alone: floor.go); a pooled or tree protocol's part has no floor,
// and the floor alone of a window with one is unknown (errNoMechanism).
func (c *Collector) composeParts(ctx context.Context, loads map[poolKey]poolLoad, delta float64, alone bool) (float64, error) {
	keys := slices.SortedFunc(maps.Keys(loads), func(a, b poolKey) int {
		return cmp.Or(strings.Compare(a.epoch, b.epoch), strings.Compare(a.pool, b.pool))
	})
	var sig strings.Builder
	fmt.Fprintf(&sig, "%g/%t", delta, alone)
	for _, k := range keys {
		ld := loads[k]
		fmt.Fprintf(&sig, "|%s/%s/%d*%d^%d+%d", k.epoch, k.pool, ld.n, ld.reports, ld.trees, ld.draws)
		if len(ld.bound) > 0 {
			sum := sha256.Sum256([]byte(strings.Join(ld.bound, ";")))
			fmt.Fprintf(&sig, "#%d:%x", len(ld.bound), sum[:12])
		}
	}
	if v, ok := c.horizon.get(sig.String()); ok {
		return v, nil
	}
	var ps []accountant.Part
	type tree struct {
		at int // index into ps
		ld poolLoad
	}
	var long []tree
	for _, k := range keys {
		ld := loads[k]
		pl, err := c.epochPlan(ctx, k.epoch)
		if err != nil || pl == nil {
			return 0, fmt.Errorf("%w: the plan of epoch %s is not stored", errNoMechanism, k.epoch)
		}
		name := k.pool
		if pl.Pooled() {
			name = pl.Metrics[0].Name // a pool's mechanism is the whole plan's
		}
		mech, eps0, _, err := accounting.BatchMechanism(ctx, pl, c.o.Open, name)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
		}
		// The honest floor of the smallest batch, under the epoch's own
		// max_fake_fraction (the identity at 0).
		n := pl.HonestReports(int(ld.n))
		if alone {
			if pl.Pooled() || ld.trees > 0 {
				return 0, fmt.Errorf("%w: epoch %s pool %s has no floor of blanket draws (pooled travel or a tree protocol)", errNoMechanism, k.epoch, k.pool)
			}
			n = 1
		}
		if pl.Travel == string(accountant.TravelParallel) {
			var local bool
			if mech, local, err = c.parallelRound(ctx, pl, mech, ld.bound); err != nil {
				return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
			}
			if local {
				n = 1
			}
		}
		isLong, err := accountant.IsLongitudinal(mech)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
		}
		if isLong != (ld.trees > 0) {
			return 0, fmt.Errorf("%w: epoch %s pool %s: a tree protocol counted with %d trees", errNoMechanism, k.epoch, k.pool, ld.trees)
		}
		if isLong {
			long = append(long, tree{len(ps), ld})
		}
		ps = append(ps, accountant.Part{Mech: mech, Eps0: eps0, N: n, Rounds: ld.reports, Floor: int(ld.draws)})
	}
	// A tree protocol's reports are not independent across periods: its
	// part is the protocol's own (accountant.LongitudinalPart) over the
	// trees and periods the window's data can reach, each paying its
	// level-count tail out of delta.
	var tails float64
	for _, t := range long {
		budget := 0.05 * delta / float64(len(long))
		p, tail, err := accountant.LongitudinalPart(ps[t.at].Mech, ps[t.at].Eps0, ps[t.at].N, t.ld.trees, t.ld.reports, budget)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
		}
		ps[t.at], tails = p, tails+tail
	}
	comp, err := accountant.NewComposition(ps...)
	if errors.Is(err, accountant.ErrInvalidArgument) {
		// A part the accountant cannot compose (a floor of a mechanism
		// whose blanket no sampler draws): no guarantee, not a failure of
		// the whole answer.
		return 0, fmt.Errorf("%w: %v", errNoMechanism, err)
	}
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
// open).
func periodIn(p report.Period, from, to time.Time) bool {
	start, end := time.Unix(p.Start, 0), time.Unix(p.End(), 0)
	return (from.IsZero() || end.After(from)) && (to.IsZero() || start.Before(to))
}
