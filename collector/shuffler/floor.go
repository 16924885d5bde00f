package shuffler

// The floor: blanket draws the shuffler adds to every batch.
//
// A plan with floor m (plan.Plan.Floor) has the shuffler add m draws of a
// metric's blanket distribution to every batch of that metric it releases
// (docs/accounting.md §13). Each draw is what the metric's randomizer
// returns from SampleBlanket at the plan's eps0 (sdk.BlanketSampler: a
// report in the format of Randomize's, of a law that depends on no
// input), sealed to the collector's key of the batch's period under the
// metric's binding, exactly as an app seals its report. The draws are
// shuffled among the apps' reports, so neither their position nor their
// form tells them apart, and the batch says how many it holds
// (report.Batch.Draws): the collector then states, besides the guarantee
// under the plan's honest-fraction assumption, the floor that holds with
// the draws alone, whatever the other reports are.
//
// Rules:
//   - Draws never count toward n_min: batchSize counts the pool's reports,
//     and the draws come on top (a batch of a pool with a floor holds at
//     least n_min reports of apps and m draws).
//   - Draws are made before the release's transaction (a plugin call and m
//     HPKE seals: too slow to hold the store's writer lock), and those a
//     release did not use (it found fewer than n_min free reports) are kept
//     for the pool's next batch: every draw is independent of every other
//     and of the batch, so a draw may wait.
//   - The draws are of the plan of the pool key's epoch, calibrated and
//     published (its eps0 and report keys): a pool of an epoch the shuffler
//     has no such plan for gets none, and its batch says 0.
//   - A failed draw (the plugin down, the period's key deleted) releases
//     the batch without draws, which it says, and is logged and counted
//     (blanket_shuffler_floor_failures_total): reports are never held back
//     for the floor, and a batch never claims draws it lacks.

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// addFloorPlan records p's floor for its epoch, when p has one and is
// published (calibrated, with report keys). It returns an error naming the
// metric whose randomizer cannot draw from its blanket.
func (s *Shuffler) addFloorPlan(ctx context.Context, p *plan.Plan) error {
	if p.Floor == 0 || !p.Calibrated() || len(p.CollectorKeys) == 0 {
		return nil
	}
	if s.o.Open == nil {
		return fmt.Errorf("%w: plan %s has floor = %d, and the shuffler has no randomizers to draw with (Options.Open; --plugin-dir for a plugin that is not built in)", ErrOptions, p.Epoch(), p.Floor)
	}
	for _, m := range p.Metrics {
		r, err := s.o.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			return fmt.Errorf("%w: plan %s has floor = %d: metric %q: randomizer %q: %w", ErrOptions, p.Epoch(), p.Floor, m.Name, m.Plugin, err)
		}
		if _, ok := r.(sdk.BlanketSampler); !ok {
			return fmt.Errorf("%w: plan %s has floor = %d, but metric %q's randomizer %q cannot draw from its blanket (sdk.BlanketSampler); remove floor", ErrOptions, p.Epoch(), p.Floor, m.Name, m.Plugin)
		}
	}
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	next := maps.Clone(s.floorPlans)
	if next == nil {
		next = map[string]*plan.Plan{}
	}
	next[p.Epoch()] = p
	s.floorPlans = next
	return nil
}

// drawsFor returns the sealed draws for one batch of pool key (nil when
// its epoch's plan has no floor), taking first those a release left.
func (s *Shuffler) drawsFor(ctx context.Context, key string) ([][]byte, error) {
	pool, epoch, period, err := report.ParsePoolKey(key)
	if err != nil {
		return nil, nil
	}
	s.floorMu.Lock()
	p := s.floorPlans[epoch]
	spare := s.spareDraws[key]
	delete(s.spareDraws, key)
	s.floorMu.Unlock()
	if p == nil {
		return nil, nil
	}
	if len(spare) == p.Floor {
		return spare, nil
	}
	i := p.MetricIndex(pool) // a floor's plan travels separately: a pool is a metric
	if i < 0 {
		return nil, fmt.Errorf("pool %q is no metric's of plan %s", pool, epoch)
	}
	m := p.Metrics[i]
	r, err := s.o.Open(ctx, m.Plugin, m.Config())
	if err != nil {
		return nil, fmt.Errorf("metric %q: randomizer %q: %w", m.Name, m.Plugin, err)
	}
	bs, ok := r.(sdk.BlanketSampler)
	if !ok {
		return nil, fmt.Errorf("metric %q: randomizer %q cannot draw from its blanket: %w", m.Name, m.Plugin, errors.ErrUnsupported)
	}
	keys, err := p.KeySchedule()
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", epoch, err)
	}
	k, ok := keys.For(period)
	if !ok {
		return nil, fmt.Errorf("plan %s has no report key for period %s", epoch, period)
	}
	reports, err := bs.SampleBlanket(ctx, m.Eps0, p.Floor)
	if err != nil {
		return nil, fmt.Errorf("metric %q: randomizer %q: SampleBlanket: %w", m.Name, m.Plugin, err)
	}
	if len(reports) != p.Floor {
		return nil, fmt.Errorf("metric %q: randomizer %q: SampleBlanket returned %d draws, want %d", m.Name, m.Plugin, len(reports), p.Floor)
	}
	b := p.Bindings()[i]
	b.Period = period
	sealed := make([][]byte, len(reports))
	for j, rep := range reports {
		if sealed[j], err = report.Seal(k.Key, b, rep); err != nil {
			return nil, fmt.Errorf("metric %q: sealing a draw: %w", m.Name, err)
		}
	}
	return sealed, nil
}

// keepDraws keeps the draws a release did not use for key's next batch.
func (s *Shuffler) keepDraws(key string, draws [][]byte) {
	if len(draws) == 0 {
		return
	}
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	if s.spareDraws == nil {
		s.spareDraws = map[string][][]byte{}
	}
	s.spareDraws[key] = draws
}

// dropDraws forgets the draws kept for key, a pool emptied for good.
func (s *Shuffler) dropDraws(key string) {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	delete(s.spareDraws, key)
}
