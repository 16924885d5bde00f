package collector

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// The mixes of metrics of parallel batches, as the horizon composes them
// (the proof is at the top of horizon.go): read per period, keyed by their
// proportions, and bounded one by one or, past a few, together
// (accountant.ParallelFloor). Under a max_fake_fraction a batch's mix is
// keyed by its least honest shares instead, a floor (floorKey), or by
// localMix when it has none (honestMixKey).

// mixCover is what the dominance of horizonWindows needs of a parallel
// pool's load, computed once per window: the mixes its bound keeps, or
// its floors by set of metrics present (supportOf); and, by set of
// metrics present, the smallest weight of each present metric over its
// mixes.
type mixCover struct {
	kept   map[string]bool
	floors map[string][]float64
	least  map[string][]float64
	// local is whether a mix (or the bound) is localMix; bad whether a
	// mix does not parse (it covers and is covered by nothing).
	local, bad bool
}

// newMixCover returns the mixCover of ld.
func newMixCover(ld poolLoad) mixCover {
	c := mixCover{kept: map[string]bool{}, least: map[string][]float64{}}
	for _, k := range ld.bound {
		if k == localMix {
			c.kept[k], c.local = true, true
			continue
		}
		_, floor, err := parseBound(k)
		if err != nil {
			continue // covers nothing
		}
		if floor == nil {
			c.kept[k] = true
			continue
		}
		if c.floors == nil {
			c.floors = map[string][]float64{}
		}
		c.floors[strings.Split(k, ":")[1]] = floor
	}
	for _, m := range ld.mixes {
		if m == localMix {
			c.local = true
			continue
		}
		w, err := mixWeights(m)
		if err != nil {
			c.bad = true
			continue // composeParts reports it
		}
		var present []float64
		for _, x := range w {
			if x > 0 {
				present = append(present, x)
			}
		}
		s := supportOf(w)
		if l, ok := c.least[s]; ok {
			for j := range l {
				l[j] = math.Min(l[j], present[j])
			}
		} else {
			c.least[s] = present
		}
	}
	return c
}

// covers reports whether a round bounded as c dominates a batch of each
// of mixes (summarised as d): each is one of the mixes c keeps, or its
// weights are at least c's floor for the same metrics
// (accountant.ParallelFloor; see the top of the file); localMix only by
// a round bounded as local too.
func (c mixCover) covers(d mixCover, mixes []string) bool {
	if d.bad || (d.local && !c.local) {
		return false
	}
	if c.floors == nil {
		for _, m := range mixes {
			if !c.kept[m] {
				return false
			}
		}
		return true
	}
	for s, least := range d.least {
		f, ok := c.floors[s]
		if !ok || len(f) != len(least) {
			return false
		}
		for j := range f {
			if f[j] > least[j] {
				return false
			}
		}
	}
	return len(d.least) > 0 || d.local || len(mixes) == 0
}

// periodMixes returns the distinct mixes of metrics (honestMixKey) of the
// batches of a parallel plan pl's epoch in period, sorted: each batch's
// valid reports per metric, as stored by ingest (one row per metric with
// reports), as its guarantee was computed from them.
func (c *Collector) periodMixes(ctx context.Context, pl *plan.Plan, epoch string, period report.Period) ([]string, error) {
	counts := map[report.ID][]int64{}
	var order []report.ID
	for i, m := range pl.Metrics {
		bs, err := c.st.batchList(ctx, m.Name, epoch, period)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			if b.n <= 0 {
				continue
			}
			cs := counts[b.id]
			if cs == nil {
				cs = make([]int64, len(pl.Metrics))
				counts[b.id] = cs
				order = append(order, b.id)
			}
			cs[i] = b.n
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, id := range order {
		k := honestMixKey(pl, counts[id])
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// mixKey returns a batch's mix, its valid reports per metric (in plan
// order), divided by their greatest common divisor and written
// comma-separated: batches with the same proportions share it, and
// parseMix reads it back as counts of the same proportions.
func mixKey(counts []int64) string {
	var g int64
	for _, c := range counts {
		for b := c; b != 0; {
			g, b = b, g%b
		}
	}
	var sb strings.Builder
	for i, c := range counts {
		if i > 0 {
			sb.WriteByte(',')
		}
		if g > 0 {
			c /= g
		}
		sb.WriteString(strconv.FormatInt(c, 10))
	}
	return sb.String()
}

// localMix is the mix key of a parallel batch in which a metric present
// may hold no honest message but one user's (accounting.HonestShares is
// not ok): no floor bounds it, and composeParts counts its (epoch, pool)'s
// rounds as every metric's randomizer alone, at one report.
const localMix = "local"

// honestMixKey returns the key of a parallel batch of pl with counts valid
// messages per metric: its mixKey when no message may be fake
// (max_fake_fraction 0, or a batch too small for one fake), else the
// floorKey of its least honest shares (accounting.HonestShares), or
// localMix when they have none.
func honestMixKey(pl *plan.Plan, counts []int64) string {
	least, fakes, ok := accounting.HonestShares(pl, counts)
	switch {
	case fakes == 0:
		return mixKey(counts)
	case !ok:
		return localMix
	}
	return floorKey(least)
}

// floorKey writes the floor weights w (one per metric, 0 for a metric
// absent) as an element of parallelBound, "floor:SUPPORT:W,W,...", each
// weight rounded down to a multiple of 1/floorGrid (one below 1/floorGrid
// is kept as it is: a floor is positive).
func floorKey(w []float64) string {
	var sb strings.Builder
	sb.WriteString("floor:" + supportOf(w) + ":")
	first := true
	for _, x := range w {
		if x == 0 {
			continue
		}
		if q := math.Floor(x*floorGrid) / floorGrid; q > 0 {
			x = q
		}
		if !first {
			sb.WriteByte(',')
		}
		first = false
		sb.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	}
	return sb.String()
}

// parseMix reads a mixKey back into counts.
func parseMix(k string) ([]int64, error) {
	fs := strings.Split(k, ",")
	out := make([]int64, len(fs))
	for i, f := range fs {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("collector: mix %q: not counts", k)
		}
		out[i] = v
	}
	return out, nil
}

// parallelRound returns the mechanism one period's message of a parallel
// plan pl is bounded by in a window whose batches' mixes are bounded by
// bound (parallelBound): accountant.WorstOf the plan's weights (planMech),
// each mix's plan.ParallelMechanism and each floor's
// accountant.ParallelFloor. With localMix in bound it is instead
// accountant.WorstOf every metric's randomizer alone, and local is true:
// the round is to be taken at one report (see the top of horizon.go).
func (c *Collector) parallelRound(ctx context.Context, pl *plan.Plan, planMech accountant.Mechanism, bound []string) (mech accountant.Mechanism, local bool, err error) {
	if slices.Contains(bound, localMix) {
		all, _, err := accounting.ParallelMechanism(ctx, pl, c.o.Open, nil)
		if err != nil {
			return nil, false, err
		}
		par, ok := all.(accountant.ParallelMech)
		if !ok {
			return nil, false, fmt.Errorf("collector: the parallel mechanism of plan %s is %s", pl.Epoch(), all)
		}
		return accountant.WorstOf(par.Parts...), true, nil
	}
	mechs := []accountant.Mechanism{planMech}
	for _, k := range bound {
		counts, floor, err := parseBound(k)
		if err != nil {
			return nil, false, err
		}
		if len(counts) != len(pl.Metrics) {
			return nil, false, fmt.Errorf("collector: mix %q of a plan of %d metrics", k, len(pl.Metrics))
		}
		m, _, err := accounting.ParallelMechanism(ctx, pl, c.o.Open, counts)
		if err != nil {
			return nil, false, err
		}
		if floor != nil {
			par, ok := m.(accountant.ParallelMech)
			if !ok || len(par.Parts) != len(floor) {
				return nil, false, fmt.Errorf("collector: the parallel mechanism of floor %q is %s", k, m)
			}
			m = accountant.ParallelFloor(floor, par.Parts...)
		}
		mechs = append(mechs, m)
	}
	return accountant.WorstOf(mechs...), false, nil
}

// parallelBound returns what composeParts bounds a round of a parallel
// pool by, besides the plan's weights, when a window's batches have the
// given distinct mixes (honestMixKey): the mixes themselves when there are
// at most maxHorizonMixes, else one floor per set of metrics present (its
// smallest weight of each, rounded down to a multiple of 1/floorGrid,
// floorKey), and localMix when a mix is, sorted. A mix's weights are its
// proportions or, for a floor key, its floor: every honest mix they stand
// for has weights at least those, hence at least their smallest.
func parallelBound(mixes []string) []string {
	if len(mixes) <= maxHorizonMixes {
		return mixes
	}
	floors := map[string][]float64{}
	local := false
	for _, k := range mixes {
		if k == localMix {
			local = true
			continue
		}
		w, err := mixWeights(k)
		if err != nil {
			return mixes // not a mix: composeParts reports it
		}
		support := supportOf(w)
		f, ok := floors[support]
		if !ok {
			floors[support] = w
			continue
		}
		for j := range f {
			f[j] = math.Min(f[j], w[j])
		}
	}
	var out []string
	for _, f := range floors {
		out = append(out, floorKey(f))
	}
	if local {
		out = append(out, localMix)
	}
	slices.Sort(out)
	return out
}

// mixWeights returns the weights of a mix (mixKey) as
// plan.ParallelMechanism computes them, or of a floor key its floor, one
// per metric (0 for a metric absent).
func mixWeights(k string) ([]float64, error) {
	if strings.HasPrefix(k, "floor:") {
		present, floor, err := parseBound(k)
		if err != nil {
			return nil, err
		}
		w := make([]float64, len(present))
		j := 0
		for i, p := range present {
			if p > 0 {
				w[i], j = floor[j], j+1
			}
		}
		return w, nil
	}
	counts, err := parseMix(k)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	if total <= 0 {
		return nil, fmt.Errorf("collector: mix %q has no message", k)
	}
	w := make([]float64, len(counts))
	for j, n := range counts {
		w[j] = float64(n) / float64(total)
	}
	return w, nil
}

// supportOf writes which metrics have weight: one digit per metric.
func supportOf(w []float64) string {
	b := make([]byte, len(w))
	for j, x := range w {
		b[j] = "01"[min(1, int(math.Ceil(x)))]
	}
	return string(b)
}

// parseBound reads an element of parallelBound: a mix, as counts (floor
// nil), or a floor, as counts of 1 for the metrics present and the floor
// weights of those.
func parseBound(k string) (counts []int64, floor []float64, err error) {
	rest, ok := strings.CutPrefix(k, "floor:")
	if !ok {
		counts, err = parseMix(k)
		return counts, nil, err
	}
	support, ws, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, nil, fmt.Errorf("collector: floor %q: no weights", k)
	}
	for _, b := range support {
		counts = append(counts, int64(b-'0'))
		if b != '0' && b != '1' {
			return nil, nil, fmt.Errorf("collector: floor %q: support not of 0 and 1", k)
		}
	}
	for _, f := range strings.Split(ws, ",") {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !(x > 0 && x <= 1) {
			return nil, nil, fmt.Errorf("collector: floor %q: weight %q not in (0, 1]", k, f)
		}
		floor = append(floor, x)
	}
	if len(floor) != strings.Count(support, "1") {
		return nil, nil, fmt.Errorf("collector: floor %q: %d weights for %d metrics", k, len(floor), strings.Count(support, "1"))
	}
	return counts, floor, nil
}
