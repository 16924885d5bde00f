package plugintest

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/sdk"
)

// The floor estimate check: estimates that take the shuffler's blanket
// draws out (sdk.FloorEstimator).
//
// A randomizer that draws from its blanket (sdk.BlanketSampler) lets a
// shuffler add draws to every batch (a plan's floor), and then the
// collector needs its estimates without them: it must implement
// sdk.FloorEstimator too, or the check fails saying so. The check is the
// estimator check (estimator.go) with Options.BatchSize draws of
// SampleBlanket added to each batch of the ground truth's reports,
// accumulated together, the statistic's Draws set and estimated by
// EstimateFloor: every tested item's mean must be the truth of the apps'
// inputs alone (Student's t), and its reported variance the variance of
// its estimates (scaled chi-square), with the draws as many as the
// reports, so that an estimator that leaves their contribution in (BatchSize
// times a draw's expected contribution, against a standard error of order
// sqrt(BatchSize)) or forgets their variance fails. A randomizer without a
// sampler, or a stateful one, has the check skipped.
//
// Contract. Before the statistics, deterministic tests at the first eps0
// on one batch of the ground truth's reports and BatchSize draws: with
// Draws = 0 EstimateFloor gives Estimate's estimate (within floorTol);
// with the draws, an estimate of N - Draws reports whose items are valid
// as the statistics check wants Estimate's (intervals Value ±
// z·sqrt(Variance), Post feasible for N - Draws reports), the statistic
// left unchanged; and each of these fails with an error wrapping
// sdk.ErrBadStatistic: Estimate of the statistic with draws (a collector
// that called it would publish the draws as apps' reports), and
// EstimateFloor with Draws = -1, N (no report of an app: nothing to
// estimate, and a mean of no report has no value) or N + 1.
//
// Threshold: half of the estimator family's budget (the estimator check
// has the other half), split as there.

// CheckFloorEstimate (named "floor") tests EstimateFloor against
// the ground truth with blanket draws in every batch.
const CheckFloorEstimate = "floor"

// floorEstimate draws the blanket and estimates with the draws out.
type floorEstimate struct {
	v  *verifier
	bs sdk.BlanketSampler
	fe sdk.FloorEstimator
	n  int // draws per batch
}

func (f *floorEstimate) draw(ctx context.Context, eps0 float64) (out [][]byte, err error) {
	err = guard(func() error {
		out, err = f.bs.SampleBlanket(ctx, eps0, f.n)
		return err
	})
	if err == nil && len(out) != f.n {
		err = fmt.Errorf("%d draws for %d asked", len(out), f.n)
	}
	return out, err
}

func (f *floorEstimate) estimate(ctx context.Context, s *sdk.Statistic) (e *sdk.Estimate, err error) {
	s = s.Clone()
	s.Draws = int64(f.n)
	err = guard(func() error {
		e, err = f.fe.EstimateFloor(ctx, s)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("EstimateFloor: %w", err)
	case e == nil:
		return nil, errors.New("EstimateFloor returned a nil estimate and no error")
	case e.N != s.N-s.Draws:
		return nil, fmt.Errorf("EstimateFloor: the estimate counts N = %d reports, want the %d of apps (N - Draws)", e.N, s.N-s.Draws)
	}
	return e, nil
}

func (v *verifier) checkFloorEstimate(ctx context.Context, c *Check) {
	bs, ok, _ := v.blanketSampler(ctx) // a failing sampler fails the draws check
	if !ok {
		c.skip("all", "the randomizer does not draw from its blanket (sdk.BlanketSampler): no shuffler adds draws to its batches")
		return
	}
	if v.desc.Stateful {
		c.skip("all", "a stateful randomizer's estimates span periods; the kit does not test them with draws")
		return
	}
	f := &floorEstimate{v: v, bs: bs, n: v.opts.BatchSize}
	fe, ok := v.r.(sdk.FloorEstimator)
	if ok {
		perr := guard(func() error {
			stat, err := v.accumulate(ctx, v.opts.Eps0s[0], nil)
			if err != nil {
				return err
			}
			_, err = fe.EstimateFloor(ctx, stat)
			return err
		})
		ok = !errors.Is(perr, errors.ErrUnsupported)
	}
	if !ok {
		c.fail("implemented", "the randomizer draws from its blanket but cannot take its draws out of its estimates: implement sdk.FloorEstimator (RPC EstimateFloor), or a collector gives no estimate for batches with a shuffler's floor")
		return
	}
	f.fe = fe
	v.floorContract(ctx, c, f, v.opts.Eps0s[0])
	if ctx.Err() != nil {
		return
	}
	tb := v.tb
	nMeans := len(tb.single)
	if len(tb.rest) > 0 {
		nMeans++
	}
	perEps := v.opts.FalseFailureRate / families / float64(len(v.opts.Eps0s)) / 2
	for _, eps0 := range v.opts.Eps0s {
		v.estimatorAt(ctx, c, eps0, tb, perEps/float64(nMeans), perEps/float64(max(len(tb.single), 1)), f)
		if ctx.Err() != nil {
			return
		}
	}
}

// floorTol is the relative tolerance of EstimateFloor without draws
// against Estimate: the same estimate, computed perhaps in another order
// (a few ulps), on a scale of the item's value and standard deviation.
const floorTol = 1e-9

// floorContract runs the deterministic tests of the floor check at eps0
// (see the top of the file).
func (v *verifier) floorContract(ctx context.Context, c *Check, f *floorEstimate, eps0 float64) {
	// The steps before the tests only fail, as the estimator check's do.
	reports, err := v.randomizeAll(ctx, eps0, v.tb.in)
	if err != nil {
		c.fail("contract: Randomize", "%v", err)
		return
	}
	draws, err := f.draw(ctx, eps0)
	if err != nil {
		c.fail("contract: SampleBlanket", "%v", err)
		return
	}
	stat, err := v.accumulate(ctx, eps0, append(reports, draws...))
	if err != nil {
		c.fail("contract: Accumulate", "%v", err)
		return
	}
	floor := func(s *sdk.Statistic) (e *sdk.Estimate, err error) {
		err = guard(func() error {
			e, err = f.fe.EstimateFloor(ctx, s)
			return err
		})
		if err == nil && e == nil {
			err = errors.New("EstimateFloor returned a nil estimate and no error")
		}
		return e, err
	}

	plain, err := v.estimate(ctx, stat)
	if err != nil {
		c.fail("contract: Estimate", "%v", err)
		return
	}
	zero, err := floor(stat)
	switch {
	case err != nil:
		c.fail("no draws: Estimate's", "EstimateFloor with Draws = 0: %v", err)
	default:
		c.expect(sameEstimate(zero, plain), "no draws: Estimate's", "EstimateFloor with Draws = 0 gave N = %d and items %v; Estimate N = %d and items %v: they must agree", zero.N, zero.Items, plain.N, plain.Items)
	}

	with := stat.Clone()
	with.Draws = int64(f.n)
	saved := with.Clone()
	est, err := floor(with)
	c.expect(sameStat(with, saved), "draws: statistic unchanged", "EstimateFloor modified its statistic: %s, was %s", fmtStat(with), fmtStat(saved))
	if c.expect(err == nil, "draws: EstimateFloor", "%d draws of N = %d: %v", with.Draws, with.N, err) {
		// The estimate of the apps' reports: N - Draws of them, its
		// tests named apart from the statistics check's.
		apps := saved.Clone()
		apps.N -= apps.Draws
		apps.Draws = 0
		shape := &Check{Name: c.Name}
		v.estimateShape(shape, apps, est, false)
		for _, t := range shape.Tests {
			t.Name = "draws: " + t.Name
			c.add(t)
		}
	}

	e, err := v.estimate(ctx, saved)
	c.expect(wraps(err, sdk.ErrBadStatistic), "draws: Estimate refuses", "Estimate of a statistic with %d draws of N = %d returned estimate %v and error %v, want an error wrapping sdk.ErrBadStatistic (it would count the draws as apps' reports; EstimateFloor takes them out)", saved.Draws, saved.N, e != nil, err)
	for _, tt := range []struct {
		name  string
		draws int64
	}{{"negative draws refused", -1}, {"only draws refused", saved.N}, {"more draws than reports refused", saved.N + 1}} {
		d := tt.draws
		bad := saved.Clone()
		bad.Draws = d
		e, err := floor(bad)
		c.expect(wraps(err, sdk.ErrBadStatistic), tt.name, "EstimateFloor with Draws = %d of N = %d returned estimate %v and error %v, want an error wrapping sdk.ErrBadStatistic (Draws must be in [0, N-1])", d, bad.N, e != nil, err)
	}
}

// sameEstimate reports whether a and b estimate the same reports with the
// same items, within floorTol.
func sameEstimate(a, b *sdk.Estimate) bool {
	if a.N != b.N || a.Malformed != b.Malformed || a.Eps0 != b.Eps0 || len(a.Items) != len(b.Items) {
		return false
	}
	for i, x := range a.Items {
		y := b.Items[i]
		scale := max(1, math.Abs(y.Value), math.Sqrt(max(y.Variance, 0)))
		near := func(p, q float64) bool { return math.Abs(p-q) <= floorTol*scale }
		if x.Label != y.Label || !near(x.Value, y.Value) || !near(x.Post, y.Post) || !near(x.Lo, y.Lo) || !near(x.Hi, y.Hi) ||
			math.Abs(x.Variance-y.Variance) > floorTol*max(1e-300, math.Abs(y.Variance)) {
			return false
		}
	}
	return true
}
