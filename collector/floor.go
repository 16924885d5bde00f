package collector

// The collector's part of a floor (docs/accounting.md §13): batches to
// which the shuffler added draws of a metric's blanket.
//
// What a batch says. A batch may say that D of its reports are the
// shuffler's draws (report.Batch.Draws): D is its epoch's plan's floor,
// or 0 when drawing failed; any other count is refused (a plan with a
// floor travels separately, and checkFloorPlan refuses one with a metric
// whose draws the accountant cannot count). The draws are sealed like
// apps' reports and cannot be told from them; of the batch's reports, V
// open and validate and M = reports - V do not.
//
// Whom it trusts. The collector cannot check D: the floor alone trusts
// the shuffler to add the draws it says it added, from the blanket at the
// plan's eps0, with randomness no one else sees. A shuffler that says D
// and adds none makes the stated floor alone FloorEpsilon(1, D) where the
// truth is eps0 when the rest is fake (docs/threat-model.md). Saying fewer
// than it added is safe: a draw covers at least as well as an honest
// report.
//
// What is counted, and why it is sound. An honest shuffler's draws always
// open (it seals them to the same key, under the same binding, as the
// apps do), so a batch with V < D is refused. Which of the M failed
// reports were draws is not known, so the count of apps' valid reports
// n = V - D and the draws the guarantee counts d = max(D - M, 0) are
// both lower bounds of the truth: at most M draws failed, so at least
// D - M are among the V, and at most D are. A batch with n = 0 changes
// no estimate (its statistic is emptied: which of its valid reports are
// draws is not certain), so no user's report is published without a
// stated guarantee. The accountant's bound (accountant.FloorEpsilon, at the
// honest floor of n) only weakens when either count drops: one more
// report of an app, or one more draw, reshuffled, is a post-processing
// of the batch without it. n_min counts apps' reports only: the admission
// check takes reports - D, the held batches (ingest.go) n.
//
// The estimates. A period's statistic accumulates the draws with the
// apps' reports; its Draws says how many (D per batch, summed), and the
// plugin's
// sdk.FloorEstimator takes their expected contribution out and adds
// their variance. A plugin without it gives no estimate for such a period
// (PeriodEstimate.EstimateError says why), rather than one biased by the
// draws.
//
// Each guarantee twice. A batch's guarantee (eps, delta) counts the
// honest floor of its apps' reports and its draws; the floor alone
// (floorAlone) counts the draws and the user's own report, nothing else:
// accountant.FloorEpsilon with one honest report, which holds whatever
// the rest of the batch is, fakes included. A period states the first at
// its weakest batch and the floor alone at its fewest draws (the two
// minima may come from different batches: the bound only weakens with
// either); the horizon composes
// both (horizon.go, accountant.Part.Floor) at each period's fewest draws.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// checkFloorPlan refuses a plan with a floor whose draws the collector
// could not account: a metric whose randomizer is a tree protocol, or
// whose declaration's blanket no sampler draws from (accountant's
// Decomposition.Sampled). The plan already refuses a floor with pooled
// travel (plan.Plan.Floor), and the shuffler one whose randomizer cannot
// draw.
func checkFloorPlan(ctx context.Context, p *plan.Plan, open plan.Opener) error {
	if p.Floor == 0 {
		return nil
	}
	for _, m := range p.Metrics {
		mech, eps0, _, err := accounting.BatchMechanism(ctx, p, open, m.Name)
		if err != nil {
			return err
		}
		long, err := accountant.IsLongitudinal(mech)
		if err != nil {
			return err
		}
		d, err := mech.Decompose(eps0)
		if err != nil {
			return err
		}
		if long || !d.Sampled {
			return fmt.Errorf("%w: the plan has floor = %d, but metric %q's randomizer %q has no blanket the accountant can count draws of (a tree protocol, or a declaration whose blanket no sampler draws from); remove floor", ErrOptions, p.Floor, m.Name, m.Plugin)
		}
	}
	return nil
}

// takeDraws sets the shuffler's blanket draws of a batch of separate
// travel apart from its valid reports (valid of them, in parts, the
// batch's one part), by the rules at the top of the file: the part's row
// counts the apps' reports and the draws its guarantee may count, its
// statistic the draws it holds, res.Draws the same. It returns the draws
// the guarantee counts. A batch with fewer valid reports than draws is
// refused (an honest shuffler's draws always open); one with no valid
// report of an app changes no estimate: its statistic is emptied, since
// which of its valid reports are draws is not certain once some failed.
func (in *ingestion) takeDraws(parts []metricBatch, valid int64) (int64, error) {
	d := int64(in.b.Draws)
	if d == 0 || len(parts) != 1 {
		return 0, nil
	}
	if valid < d {
		return 0, fmt.Errorf("%w: the batch says %d of its reports are the shuffler's blanket draws, but only %d of its %d reports open: a shuffler's draws always open", ErrBatchRefused, d, valid, len(in.b.Sealed))
	}
	malformed := int64(len(in.b.Sealed)) - valid
	counted := max(d-malformed, 0)
	p := &parts[0]
	p.rec.n -= d
	p.rec.draws = counted
	in.res.Draws = d
	if p.stat != nil {
		p.stat.Draws = d
		if p.rec.n == 0 {
			p.stat.N, p.stat.Draws = 0, 0
			clear(p.stat.Counts)
		}
	}
	return counted, nil
}

// floorAlone returns the guarantee of the floor alone for pool's batches
// in epoch e that hold draws of the shuffler's blanket draws: the user's
// report among them and nothing else counted (accountant.FloorEpsilon
// with one honest report), cached by draws. Without draws it is the
// local guarantee of one report.
func (c *Collector) floorAlone(ctx context.Context, e *epochState, pool string, draws int64) (epsValue, bool) {
	return c.cachedGuarantee(ctx, epsKey{epoch: e.epoch, pool: pool, n: 1, draws: draws, alone: true}, e, nil)
}

// estimate returns r's estimate of stat: with the shuffler's blanket
// draws in it (stat.Draws > 0), the plugin's sdk.FloorEstimator, which
// takes their expected contribution out; a plugin without it gives no
// estimate (an error wrapping sdk.ErrBadStatistic, which the period shows
// as its EstimateError) rather than one biased by the draws.
func estimate(ctx context.Context, r sdk.Randomizer, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if stat.Draws == 0 {
		return r.Estimate(ctx, stat)
	}
	fe, ok := r.(sdk.FloorEstimator)
	if !ok {
		return nil, fmt.Errorf("%w: %d of the period's reports are the shuffler's blanket draws, and the plugin cannot take them out of its estimate (sdk.FloorEstimator)", sdk.ErrBadStatistic, stat.Draws)
	}
	est, err := fe.EstimateFloor(ctx, stat)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, fmt.Errorf("%w: %d of the period's reports are the shuffler's blanket draws, and the plugin cannot take them out of its estimate: %v", sdk.ErrBadStatistic, stat.Draws, err)
	}
	return est, err
}

// periodFloor returns the weakest floor alone among a period's batches
// (the fewest draws; held batches included, as for PeriodEstimate's
// Guarantee), nil when the epoch's plan p has no floor and no batch holds
// draws. A batch without a valid report of an app holds no user's report
// and is skipped.
func (c *Collector) periodFloor(ctx context.Context, p *plan.Plan, row statRow, batches []batchRecord) *FloorGuarantee {
	var weakest *batchRecord
	shown := p.Floor > 0
	for i, b := range batches {
		shown = shown || b.draws > 0
		if b.n > 0 && (weakest == nil || b.draws < weakest.draws) {
			weakest = &batches[i]
		}
	}
	if !shown || weakest == nil {
		return nil
	}
	f := &FloorGuarantee{Delta: p.Target.Delta, Draws: weakest.draws, Batch: hex.EncodeToString(weakest.id[:])}
	e, err := c.epochByID(ctx, row.epoch)
	if err != nil {
		c.log.Error("floor guarantee", "metric", row.metric, "epoch", row.epoch, "error", err)
		return f
	}
	if g, ok := c.floorAlone(ctx, e, p.Pool(row.metric), weakest.draws); ok {
		f.Eps, f.Delta = &g.eps, g.delta
	}
	return f
}

// HorizonFloor is the guarantee of the floor alone over the horizon:
// every user's reports in a window of the horizon's periods, each among
// its batch's blanket draws alone, whatever the batches' other reports
// are (fakes included).
type HorizonFloor struct {
	// Eps and Delta: every user's reports in the weakest window are (Eps,
	// Delta)-DP. Eps is null when it is not known (see Note).
	Eps   *float64 `json:"eps"`
	Delta float64  `json:"delta"`
	// Draws is the fewest draws of a batch in that window.
	Draws int64 `json:"draws"`
	// Window is the weakest window.
	Window *report.PeriodSpan `json:"window,omitempty"`
	// Note says what the guarantee covers or why Eps is unknown.
	Note string `json:"note,omitempty"`
}

// horizonFloor composes the floor alone over each window of windows
// (horizonWindows: dominance there, which counts the fewest draws, is
// dominance for the floor alone too, where a batch's size plays no part)
// and returns the weakest; nil when the plan has no floor and no part
// holds draws.
func (c *Collector) horizonFloor(ctx context.Context, parts []horizonPart, windows []horizonWindow) (*HorizonFloor, error) {
	shown := c.plan.Floor > 0
	for _, q := range parts {
		shown = shown || q.draws > 0
	}
	if !shown || len(windows) == 0 {
		return nil, nil
	}
	f := &HorizonFloor{Delta: c.plan.Target.Delta}
	var worst float64
	var weakest *horizonWindow
	for i, w := range windows {
		eps, err := c.composeParts(ctx, w.loads, f.Delta, true)
		if errors.Is(err, errNoMechanism) {
			f.Note = err.Error()
			return f, nil
		}
		if err != nil {
			return nil, err
		}
		if weakest == nil || eps > worst {
			worst, weakest = eps, &windows[i]
		}
	}
	f.Eps = &worst
	f.Window = &report.PeriodSpan{Start: time.Unix(weakest.start, 0).UTC(), End: time.Unix(min(weakest.end, maxJSONTime), 0).UTC()}
	f.Draws = -1
	for _, ld := range weakest.loads {
		if f.Draws < 0 || ld.draws < f.Draws {
			f.Draws = ld.draws
		}
	}
	f.Note = "every user's reports of every metric in the weakest window of the horizon, each among the shuffler's blanket draws of its batch alone (the fewest of its metric's batches in the window), whatever the batches' other reports are; a batch without draws leaves its report the local guarantee"
	return f, nil
}
