package collector

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

type epsKey struct {
	epoch, pool, mix string
	n, draws         int64
	// alone is the floor alone (floorAlone): the draws and the user's
	// report, nothing else counted.
	alone bool
}

type epsValue struct{ eps, delta float64 }

// epsCall is a guarantee being computed; concurrent ingests of batches of
// the same size wait for it instead of computing it again.
type epsCall struct {
	done chan struct{}
	v    epsValue
	ok   bool
}

// guarantee returns the central (eps, delta) of a batch of n valid
// reports of pool (a metric, with separate travel) under epoch e's plan,
// from the accountant, cached by n. With parallel travel counts is the
// batch's mix (valid messages per metric), and the guarantee is the weaker
// of the plan's weights and that mix (plan.ParallelMechanism): a batch
// skewed toward some metrics gives the others less cover.
//
// With the plan's max_fake_fraction f > 0 every bound is at the batch's
// honest floor, n - floor(f n) reports (plan.Plan.HonestReports; the proof
// is at the top of accountant/declare/fakes.go), and the mix is the least
// honest share of each metric (accounting.HonestParallelMechanism: the
// fakes can skew the visible mix).
//
// draws > 0 are the shuffler's blanket draws the batch holds besides its n
// reports of apps (a plan's floor: floor.go); the bound then counts them
// too (accountant.FloorEpsilon at the honest floor of n). They come with
// separate travel only.
func (c *Collector) guarantee(ctx context.Context, e *epochState, pool string, n int64, counts []int64, draws int64) (epsValue, bool) {
	return c.cachedGuarantee(ctx, epsKey{epoch: e.epoch, pool: pool, n: n, draws: draws}, e, counts)
}

// cachedGuarantee computes the guarantee k names (guarantee, floorAlone)
// once per key: concurrent callers wait for the first.
func (c *Collector) cachedGuarantee(ctx context.Context, k epsKey, e *epochState, counts []int64) (epsValue, bool) {
	if k.n < 1 {
		return epsValue{}, false
	}
	if counts != nil {
		k.mix = fmt.Sprint(counts)
	}
	c.epsMu.Lock()
	if v, ok := c.epsCache[k]; ok {
		c.epsMu.Unlock()
		return v, true
	}
	if call := c.epsInFlight[k]; call != nil {
		c.epsMu.Unlock()
		select {
		case <-call.done:
			if call.ok {
				return call.v, true
			}
			// The other computation failed, perhaps for its own
			// context: try once more with ours.
			return c.computeGuarantee(ctx, e, k, counts)
		case <-ctx.Done():
			return epsValue{}, false
		}
	}
	call := &epsCall{done: make(chan struct{})}
	c.epsInFlight[k] = call
	c.epsMu.Unlock()

	call.v, call.ok = c.computeGuarantee(ctx, e, k, counts)
	c.epsMu.Lock()
	// A parallel batch's mix rarely repeats: only sizes are kept, so the
	// cache stays as small as the set of batch sizes.
	if call.ok && counts == nil {
		c.epsCache[k] = call.v
	}
	delete(c.epsInFlight, k)
	c.epsMu.Unlock()
	close(call.done)
	return call.v, call.ok
}

func (c *Collector) computeGuarantee(ctx context.Context, e *epochState, k epsKey, counts []int64) (epsValue, bool) {
	pool, n := k.pool, k.n
	mech, eps0, delta, err := accounting.BatchMechanism(ctx, e.plan, c.o.Open, pool)
	if err != nil {
		c.log.Error("batch guarantee", "pool", pool, "error", err)
		return epsValue{}, false
	}
	long, err := accountant.IsLongitudinal(mech)
	if err != nil {
		c.log.Error("batch guarantee", "pool", pool, "error", err)
		return epsValue{}, false
	}
	if long {
		// A tree protocol's batch: a change of the user's state in the
		// batch's period (accountant.Longitudinal, a one-period window).
		// The reports it changes can be sent in later periods of the tree,
		// in batches of at least n_min but perhaps fewer than n: the
		// level-mates are inferred at the honest floor of the smaller
		// (HonestReports does not decrease with n, so it is the smaller
		// honest floor).
		r, err := accountant.LongitudinalEpsilon(mech, eps0, e.plan.HonestReports(int(min(n, int64(e.plan.NMin)))), 1, delta)
		if err != nil || math.IsNaN(r.Upper) || math.IsInf(r.Upper, 0) {
			c.log.Error("batch guarantee", "pool", pool, "n", n, "error", err, "eps", r.Upper)
			return epsValue{}, false
		}
		return epsValue{eps: r.Upper, delta: delta}, true
	}
	if k.alone || k.draws > 0 {
		// The floor (floor.go): with the honest floor of the apps'
		// reports, or alone (the user's report among the draws).
		honest := 1
		if !k.alone {
			honest = e.plan.HonestReports(int(n))
		}
		r, err := accountant.FloorEpsilon(mech, eps0, honest, int(k.draws), delta)
		if err != nil || math.IsNaN(r.Upper) || math.IsInf(r.Upper, 0) {
			c.log.Error("batch guarantee", "pool", pool, "n", n, "draws", k.draws, "alone", k.alone, "error", err, "eps", r.Upper)
			return epsValue{}, false
		}
		return epsValue{eps: r.Upper, delta: delta}, true
	}
	type bound struct {
		mech accountant.Mechanism
		n    int
	}
	bounds := []bound{{mech, e.plan.HonestReports(int(n))}}
	if counts != nil {
		// Parallel travel: the plan's weights and the batch's own mix (its
		// least honest shares), whichever gives the weaker guarantee (see
		// plan.ParallelMechanism and plan.HonestParallelMechanism).
		mix, _, at, err := accounting.HonestParallelMechanism(ctx, e.plan, c.o.Open, counts)
		if err != nil {
			c.log.Error("batch guarantee", "pool", pool, "error", err)
			return epsValue{}, false
		}
		bounds = append(bounds, bound{mix, at})
	}
	var worst float64
	for _, b := range bounds {
		r, err := c.o.Epsilon(b.mech, eps0, b.n, delta)
		if err != nil || math.IsNaN(r.Upper) || math.IsInf(r.Upper, 0) {
			c.log.Error("batch guarantee", "pool", pool, "n", n, "error", err, "eps", r.Upper)
			return epsValue{}, false
		}
		worst = math.Max(worst, r.Upper)
	}
	return epsValue{eps: worst, delta: delta}, true
}
