package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-dp/blanket/internal/health"
)

// Checks are the collector's readiness checks: "collector store" (its
// database answers), "plan" (the published plan is calibrated), "report
// keys" (the private half of every key not deleted is at hand, as Run
// last read them: a key directory not shared with this replica shows
// here) and "plugins" (every metric of the current plan has its plugin
// running). A
// plugin process that died is restarted in the background, under the
// host's own start timeout, never inside the probe: a probe's short
// deadline would kill a slow start over and over.
func (c *Collector) Checks() []health.Check {
	return []health.Check{
		{Name: "collector store", Ready: c.st.ready},
		{Name: "plan", Ready: func(context.Context) error {
			if c.plan == nil || !c.plan.Calibrated() {
				return errors.New("not calibrated")
			}
			return nil
		}},
		{Name: "report keys", Ready: func(context.Context) error {
			ring := c.keys.held()
			now := c.o.Now().Unix()
			var errs []error
			for i, k := range ring.keys {
				if k.priv == nil && ring.state(i, now, c.retention) != KeyDeleted {
					errs = append(errs, k.privErr)
				}
			}
			return errors.Join(errs...)
		}},
		{Name: "plugins", Ready: func(ctx context.Context) error {
			var errs []error
			for _, m := range c.plan.Metrics {
				ms := c.cur.metrics[m.Name]
				if ms == nil {
					errs = append(errs, fmt.Errorf("metric %q: not opened", m.Name))
					continue
				}
				if err := ms.ready(ctx); err != nil {
					errs = append(errs, fmt.Errorf("metric %q (%s): %w", m.Name, m.Plugin, err))
				}
			}
			return errors.Join(errs...)
		}},
	}
}

// pluginRestartTimeout bounds a restart the readiness check starts.
const pluginRestartTimeout = time.Minute

// ready returns nil when the metric's randomizer answers without starting
// anything: a plugin (host.Plugin) reports whether it runs, and one that
// does not is restarted in the background (one restart at a time); any
// other randomizer is asked to Describe itself under ctx.
func (ms *metricState) ready(ctx context.Context) error {
	r, ok := ms.r.(interface{ Running() bool })
	if !ok {
		_, err := ms.r.Describe(ctx)
		return err
	}
	if r.Running() {
		return nil
	}
	if ms.restarting.CompareAndSwap(false, true) {
		go func() {
			defer ms.restarting.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), pluginRestartTimeout)
			defer cancel()
			ms.r.Describe(ctx) // starts a process if it can; a failure shows at the next probe
		}()
	}
	return errors.New("plugin not running (restarting it in the background)")
}
