package collector

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// metricState is a metric of the current plan, ready to ingest.
type metricState struct {
	m       plan.Metric
	binding report.Binding
	r       sdk.Randomizer
	desc    *sdk.Description
	// restarting is set while the readiness check restarts r.
	restarting atomic.Bool
}

// epochState is a published plan, ready to ingest: its metrics with their
// randomizers and bindings, and its pool with pooled travel.
type epochState struct {
	epoch   string
	plan    *plan.Plan
	metrics map[string]*metricState
	// pool is the plan's one shuffler pool with joint or parallel travel,
	// nil with separate travel.
	pool *poolState
}

// binding returns the binding reports of pool in period are sealed under
// in this epoch, the report length to expect (0: any), and whether the
// epoch has that pool at all.
func (e *epochState) binding(pool string, period report.Period) (report.Binding, int, bool) {
	if e.pool != nil {
		if pool != e.pool.name {
			return report.Binding{}, 0, false
		}
		bs := make([]report.Binding, len(e.pool.metrics))
		for i, ms := range e.pool.metrics {
			bs[i] = ms.binding
			bs[i].Period = period
		}
		return report.PoolBinding(e.pool.name, e.pool.travel, bs), 0, true
	}
	if ms := e.metrics[pool]; ms != nil {
		b := ms.binding
		b.Period = period
		return b, ms.desc.ReportBytes, true
	}
	return report.Binding{}, 0, false
}

// openEpoch opens the randomizers of a calibrated plan and computes its
// bindings. The plan's metric versions must match the plugins'.
func (c *Collector) openEpoch(ctx context.Context, pub *plan.Plan) (*epochState, error) {
	e := &epochState{epoch: pub.Epoch(), plan: pub, metrics: map[string]*metricState{}}
	bs := pub.Bindings()
	for i, m := range pub.Metrics {
		r, err := c.o.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			return nil, fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		d, err := r.Describe(ctx)
		if err != nil {
			return nil, fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		if m.Version != d.Version {
			return nil, fmt.Errorf("collector: metric %q: the plan is for %s version %q, the plugin is version %q", m.Name, m.Plugin, m.Version, d.Version)
		}
		if m.Eps0 < d.Eps0Min || m.Eps0 > d.Eps0Max {
			return nil, fmt.Errorf("collector: metric %q: eps0 = %v outside the plugin's range [%v, %v]", m.Name, m.Eps0, d.Eps0Min, d.Eps0Max)
		}
		e.metrics[m.Name] = &metricState{m: m, binding: bs[i], r: r, desc: d}
	}
	if pub.Pooled() {
		ps := &poolState{name: pub.Pool(""), travel: pub.Travel}
		for _, m := range pub.Metrics {
			ps.metrics = append(ps.metrics, e.metrics[m.Name])
		}
		e.pool = ps
	}
	return e, nil
}

// poolState is the one shuffler pool of a plan with pooled travel: its
// messages carry the metrics (in plan order) inside the sealed bytes.
type poolState struct {
	name    string
	travel  string
	metrics []*metricState
}

// publish sets the current epoch's plan: a stored calibration of the same
// configured plan, or a new one. The key schedule is not part of it
// (keys.go): openKeys serves it with the schedule.
func (c *Collector) publish(ctx context.Context) error {
	src, err := clonePlan(c.o.Plan)
	if err != nil {
		return err
	}
	if err := src.Validate(); err != nil {
		return err
	}
	src.CollectorKeys = nil
	source := src.Digest()

	var pub *plan.Plan
	var stored []byte
	// Replicas starting together calibrate once: the first stores the
	// calibration, the others wait and reuse it.
	unlock, err := c.st.lockPublish(ctx)
	if err != nil {
		return fmt.Errorf("collector: publishing the plan: %w", err)
	}
	defer unlock()
	if stored, err = c.st.calibration(ctx, source); err != nil {
		return fmt.Errorf("collector: stored plans: %w", err)
	}
	if stored != nil {
		if pub, err = plan.Parse(stored); err != nil {
			return fmt.Errorf("collector: stored plan: %w", err)
		}
	} else {
		pub = src
	}
	// Check the plan against every metric's plugin before calibrating.
	for i := range pub.Metrics {
		m := &pub.Metrics[i]
		r, err := c.o.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			return fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		d, err := r.Describe(ctx)
		if err != nil {
			return fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		if m.Version == "" && pub.Calibrated() {
			m.Version = d.Version
		}
		if m.Version != "" && m.Version != d.Version {
			return fmt.Errorf("collector: metric %q: the plan is for %s version %q, the plugin is version %q", m.Name, m.Plugin, m.Version, d.Version)
		}
	}
	if stored == nil {
		if !pub.Calibrated() {
			c.log.Info("calibrating the plan", "metrics", len(pub.Metrics), "n_min", pub.NMin, "target_eps", pub.Target.Eps, "target_delta", pub.Target.Delta)
			start := time.Now()
			if err := accounting.Calibrate(ctx, pub, c.o.Open); err != nil {
				return err
			}
			c.m.calibration.Set(time.Since(start).Seconds())
		}
		b, err := pub.JSON()
		if err != nil {
			return err
		}
		epoch := pub.Epoch()
		if err := c.st.addEpoch(ctx, epoch, source, b); err != nil {
			return fmt.Errorf("collector: storing plan: %w", err)
		}
		c.log.Info("published a new plan epoch", "epoch", epoch)
	}
	if c.cur, err = c.openEpoch(ctx, pub); err != nil {
		return err
	}
	c.plan = pub
	c.epoch = c.cur.epoch
	c.plans[c.epoch] = pub
	return nil
}

// EarlierPlans returns the plans published before the current one, for
// the shuffler to keep taking their apps' late reports
// (shuffler.Options.EarlierPlans). An old plan that no longer parses is
// left out.
func (c *Collector) EarlierPlans(ctx context.Context) ([]*plan.Plan, error) {
	stored, err := c.st.plans(ctx, c.epoch)
	if err != nil {
		return nil, err
	}
	var out []*plan.Plan
	for _, st := range stored {
		if p, err := plan.Parse(st.plan); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// errUnknownEpoch reports an epoch whose reports this collector cannot
// open: not published by it.
var errUnknownEpoch = errors.New("unknown epoch")

// epochByID returns the epoch of id: the current one, an open earlier one,
// or one this collector published, opened from the database (and kept
// open).
func (c *Collector) epochByID(ctx context.Context, id string) (*epochState, error) {
	if id == c.epoch {
		return c.cur, nil
	}
	c.plansMu.Lock()
	defer c.plansMu.Unlock()
	if e := c.opened[id]; e != nil {
		return e, nil
	}
	b, err := c.st.epochPlan(ctx, id)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: %q was not published by this collector", errUnknownEpoch, id)
	}
	e, err := c.openStored(ctx, b)
	if err != nil {
		// Published, so its reports may open elsewhere: another replica
		// with the plugin (a rolling upgrade), or this one once the
		// plugin is back. Not acknowledged: the shuffler retries.
		return nil, fmt.Errorf("collector: epoch %s was published but does not open here (the batch is not stored; it is retried): %w", id, err)
	}
	return e, nil
}

// openStored opens an epoch from its stored plan and keeps it open. The
// caller holds plansMu (or is OpenCollector).
func (c *Collector) openStored(ctx context.Context, stored []byte) (*epochState, error) {
	p, err := plan.Parse(stored)
	if err != nil {
		return nil, fmt.Errorf("stored plan: %w", err)
	}
	e, err := c.openEpoch(ctx, p)
	if err != nil {
		return nil, err
	}
	c.opened[e.epoch] = e
	c.plans[e.epoch] = p
	return e, nil
}

// epochPlan returns the published plan of epoch.
func (c *Collector) epochPlan(ctx context.Context, epoch string) (*plan.Plan, error) {
	c.plansMu.Lock()
	p := c.plans[epoch]
	c.plansMu.Unlock()
	if p != nil {
		return p, nil
	}
	b, err := c.st.epochPlan(ctx, epoch)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("collector: no plan stored for epoch %s", epoch)
	}
	if p, err = plan.Parse(b); err != nil {
		return nil, fmt.Errorf("collector: stored plan of epoch %s: %w", epoch, err)
	}
	c.plansMu.Lock()
	c.plans[epoch] = p
	c.plansMu.Unlock()
	return p, nil
}
