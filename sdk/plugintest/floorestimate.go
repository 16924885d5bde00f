package plugintest

import (
	"context"
	"errors"
	"fmt"

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
