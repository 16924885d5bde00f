package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/report"
)

// How values travel under each mode of the plan (see the package doc):
//
//   - separate: every Record randomizes, seals and commits one report of
//     its metric, pooled by the shuffler with that metric's reports.
//   - joint: a Record randomizes its value and stages the report; when
//     every metric of the plan has a staged report, they are sealed
//     together as one message (report.EncodeMessage, plan order) and
//     committed, and the round starts over. A metric recorded again before
//     the round completes replaces its staged report.
//   - parallel: each round draws one metric at random, with the plan's
//     weights, from crypto randomness, and stages the draw; the first
//     Record of that metric is sealed as a one-part message and committed,
//     which ends the round; so does the end of the UTC day. Records of
//     other metrics report nothing (Stats.Skipped counts them; Enabled
//     tells an app ahead of time).
//
// Staged reports and draws are in the outbox, so a restart neither loses
// a staged report nor draws a round's metric again. Ending a round
// consumes exactly the staged entries it used, atomically with the
// message (Entry.Unstage), so processes sharing an outbox never send a
// staged report twice.

// randomize randomizes one value of ms at the plan's eps0.
func (p *Provider) randomize(ctx context.Context, ms *metricState, in sdk.Inputs) ([]byte, error) {
	reps, err := ms.r.Randomize(ctx, ms.eps0, in)
	if err != nil {
		if errors.Is(err, sdk.ErrBadInput) {
			return nil, fmt.Errorf("%w: metric %q: %w", ErrBadValue, ms.name, err)
		}
		return nil, fmt.Errorf("client: metric %q: %w", ms.name, err)
	}
	if len(reps) != 1 {
		return nil, fmt.Errorf("client: metric %q: randomizer returned %d reports for one value", ms.name, len(reps))
	}
	return reps[0], nil
}

// commit seals plaintext to plan v's key under binding and commits it in
// an envelope of pool, tagged with v's epoch (report.PoolKey).
func (p *Provider) commit(ctx context.Context, v *verifiedPlan, pool string, binding report.Binding, plaintext []byte, e Entry) error {
	sealed, err := report.Seal(v.key, binding, plaintext)
	if err != nil {
		return fmt.Errorf("client: %s: seal: %w", pool, err)
	}
	e.Envelope = report.Envelope{ID: report.NewID(), Metric: report.PoolKey(pool, v.epoch), Suite: report.SuiteX25519ChaCha, Sealed: sealed}
	e.Day = p.now().UTC().Format(time.DateOnly)
	e.Local = p.mode == ModeLocal
	if err := p.outbox.Add(ctx, e, p.cfg.MaxReportsPerDay); err != nil {
		return err
	}
	p.stats.messages.Add(1)
	if p.up != nil {
		p.up.notify()
	}
	return nil
}

// recordSeparate reports one value of ms on its own.
func (p *Provider) recordSeparate(ctx context.Context, v *verifiedPlan, ms *metricState, in sdk.Inputs) error {
	rep, err := p.randomize(ctx, ms, in)
	if err != nil {
		return err
	}
	if err := p.commit(ctx, v, ms.name, ms.binding, rep, Entry{Charges: []Charge{{Metric: ms.name, Eps0: ms.eps0}}}); err != nil {
		return err
	}
	p.stats.recorded.Add(1)
	return nil
}

// maxRoundTries bounds how often a Record reads a round again after
// another process on the same outbox changed it (ErrStaleRound).
const maxRoundTries = 8

// recordJoint stages one value of ms and commits the round's message when
// every metric has one.
func (p *Provider) recordJoint(ctx context.Context, v *verifiedPlan, ms *metricState, in sdk.Inputs) error {
	rep, err := p.randomize(ctx, ms, in)
	if err != nil {
		return err
	}
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	if _, err := p.outbox.Stage(ctx, Staged{Metric: ms.name, Plan: v.digest, Report: rep}, false); err != nil {
		return err
	}
	p.stats.recorded.Add(1)
	for range maxRoundTries {
		staged, err := p.outbox.Staged(ctx)
		if err != nil {
			return err
		}
		round := make([]Staged, len(v.order))
		have := 0
		for _, st := range staged {
			if m := v.metrics[st.Metric]; m != nil && st.Plan == v.digest && len(st.Report) > 0 && round[m.index].Report == nil {
				round[m.index] = st
				have++
			}
		}
		if have < len(v.order) {
			return nil // the value is staged; the round goes out with its last metric
		}
		parts := make([]report.Part, len(v.order))
		charges := make([]Charge, len(v.order))
		for i, m := range v.order {
			parts[i] = report.Part{Metric: i, Report: round[i].Report}
			charges[i] = Charge{Metric: m.name, Eps0: m.eps0}
		}
		err = p.commit(ctx, v, v.pool, v.poolBinding, report.EncodeMessage(parts), Entry{Charges: charges, Unstage: round})
		if !errors.Is(err, ErrStaleRound) {
			return err
		}
	}
	// Other processes on the outbox keep changing the round. The value is
	// staged: the next Record to find the round complete sends it.
	return nil
}

// recordParallel reports one value of ms if the round drew ms. The value is
// randomized either way, so that a bad value fails whatever the draw.
func (p *Provider) recordParallel(ctx context.Context, v *verifiedPlan, ms *metricState, in sdk.Inputs) error {
	rep, err := p.randomize(ctx, ms, in)
	if err != nil {
		return err
	}
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	msg := report.EncodeMessage([]report.Part{{Metric: ms.index, Report: rep}})
	for range maxRoundTries {
		draw, chosen, err := p.parallelDraw(ctx, v)
		if err != nil {
			return err
		}
		if chosen != ms {
			p.stats.skipped.Add(1)
			return nil
		}
		e := Entry{Charges: []Charge{{Metric: ms.name, Eps0: ms.eps0}}, Unstage: []Staged{draw}}
		err = p.commit(ctx, v, v.pool, v.poolBinding, msg, e)
		if err == nil {
			p.stats.recorded.Add(1)
		}
		if !errors.Is(err, ErrStaleRound) {
			return err
		}
	}
	// Other processes on the outbox keep ending rounds first: this value
	// does not go out, as if the round had drawn another metric.
	p.stats.skipped.Add(1)
	return nil
}

// parallelDraw returns the staged draw of the current parallel round of
// plan v and the metric it drew, drawing one if the round has none. A
// round lasts until its metric is recorded or the UTC day ends, so that a
// metric an app never records holds the user's reports back one day at
// most. The caller holds roundMu.
func (p *Provider) parallelDraw(ctx context.Context, v *verifiedPlan) (Staged, *metricState, error) {
	m := v.order[pickIndex(v.cumWeights, ldp.NewCryptoSource())]
	round := v.digest + "/" + p.now().UTC().Format(time.DateOnly)
	// Staged once: a draw already staged for this round, by this process
	// or another on the same outbox, stands.
	draw, err := p.outbox.Stage(ctx, Staged{Metric: "", Plan: round, Report: []byte(m.name)}, true)
	if err != nil {
		return Staged{}, nil, err
	}
	chosen := v.metrics[string(draw.Report)]
	if chosen == nil {
		return Staged{}, nil, fmt.Errorf("client: the staged draw names %q, not a metric of the plan", draw.Report)
	}
	return draw, chosen, nil
}

// pickIndex returns i with probability cum[i] - cum[i-1], for cumulative
// probabilities cum ending in 1, from 53 uniform bits of src.
func pickIndex(cum []float64, src ldp.Source) int {
	u := float64(src.Uint64()>>11) / (1 << 53)
	for i, c := range cum {
		if u < c {
			return i
		}
	}
	return len(cum) - 1
}

// enabled reports whether a Record of metric name of kind kind would
// report: when the plan has it, always, except with parallel travel for a
// metric the current round did not choose.
func (p *Provider) enabled(ctx context.Context, name string, kind sdk.InputKind) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown {
		return false
	}
	v := p.plan.Load()
	ms, err := v.resolve(name, kind)
	if err != nil {
		return false
	}
	if v.travel != accountant.TravelParallel {
		return true
	}
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	_, chosen, err := p.parallelDraw(ctx, v)
	return err != nil || chosen == ms
}
