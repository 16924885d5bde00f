package accounting

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// BatchMechanism returns what the accountant needs to compute the central
// guarantee of one shuffled batch carrying metric name: the mechanism, the
// budget to evaluate it at, and the delta. With separate travel a batch holds
// one metric's reports; with joint or parallel travel it holds the plan's
// combined messages, so the mechanism is the whole plan's (parallel with the
// plan's weights; see ParallelMechanism for a batch's actual mix). Every
// component is fixed at its metric's own eps0, so the result is right for
// any calibrated plan, not only for the equal budgets AllocatePlan gives.
func BatchMechanism(ctx context.Context, p *plan.Plan, open plan.Opener, name string) (mech accountant.Mechanism, eps0, delta float64, err error) {
	if !p.Calibrated() {
		return nil, 0, 0, invalid("plan is not calibrated (no eps0)")
	}
	switch accountant.Travel(p.Travel) {
	case accountant.TravelJoint:
		parts, err := fixedParts(ctx, p, open, nil)
		if err != nil {
			return nil, 0, 0, err
		}
		var sum float64
		ws := make([]float64, len(p.Metrics))
		for i, m := range p.Metrics {
			ws[i] = m.Eps0
			sum += m.Eps0
		}
		return accountant.JointMech{Parts: parts, Weights: ws}, sum, p.Target.Delta, nil
	case accountant.TravelParallel:
		mech, eps0, err := ParallelMechanism(ctx, p, open, nil)
		return mech, eps0, p.Target.Delta, err
	default:
		m := p.Metric(name)
		if m == nil {
			return nil, 0, 0, invalid("no metric %q", name)
		}
		parts, err := fixedParts(ctx, p, open, []int{p.MetricIndex(name)})
		if err != nil {
			return nil, 0, 0, err
		}
		return parts[0], m.Eps0, m.Delta, nil
	}
}

// ParallelMechanism returns the parallel composition of the plan's metrics
// for a batch with counts[i] messages of metric i: the metrics with no
// message are left out and the others weighted by their share of the batch,
// so that the guarantee follows the batch's actual mix (a batch skewed
// toward some metrics gives the others less cover) rather than assuming
// the plan's weights. With counts nil it uses the plan's weights. Every
// component is fixed at its metric's eps0; the returned budget is the
// largest.
func ParallelMechanism(ctx context.Context, p *plan.Plan, open plan.Opener, counts []int64) (accountant.Mechanism, float64, error) {
	var idx []int
	var ws []float64
	if counts == nil {
		ws = p.Weights()
		for i := range p.Metrics {
			idx = append(idx, i)
		}
	} else {
		if len(counts) != len(p.Metrics) {
			return nil, 0, invalid("%d counts for %d metrics", len(counts), len(p.Metrics))
		}
		var total int64
		for _, c := range counts {
			total += c
		}
		if total <= 0 {
			return nil, 0, invalid("a batch with no message")
		}
		for i, c := range counts {
			if c > 0 {
				idx = append(idx, i)
				ws = append(ws, float64(c)/float64(total))
			}
		}
	}
	parts, err := fixedParts(ctx, p, open, idx)
	if err != nil {
		return nil, 0, err
	}
	var eps0 float64
	for _, i := range idx {
		eps0 = math.Max(eps0, p.Metrics[i].Eps0)
	}
	return accountant.ParallelMech{Weights: ws, Parts: parts}, eps0, nil
}

// HonestShares returns, for a parallel batch of p with counts[i] valid
// messages of metric i (total T), the least share of each metric among the
// batch's honest messages when at most fakes = T - p.HonestReports(T) of
// them are fake: least[i] = (counts[i] - fakes)_+ / (T - fakes), rounded
// down, 0 for a metric absent. ok is false when a metric present has a
// least share of 0: all its messages but one honest user's may be fake,
// and nothing shuffles that user's message among others of its metric.
// With no fake possible (max_fake_fraction 0, or a batch too small for
// one) least is counts / T, the batch's own mix, and fakes is 0.
//
// Why it is the least share. Let a_i <= counts[i] be the fakes of metric i,
// A = sum a_i <= fakes. The honest share of metric i is (counts[i] - a_i)
// / (T - A) >= (counts[i] - A) / (T - A) >= (counts[i] - fakes) / (T -
// fakes), as x -> (c - x) / (T - x) does not grow for c <= T. The
// adversary, who knows its fakes, can skew the batch's visible mix: the
// mix alone would overstate the cover of a metric it padded.
func HonestShares(p *plan.Plan, counts []int64) (least []float64, fakes int64, ok bool) {
	var total int64
	for _, c := range counts {
		total += c
	}
	least = make([]float64, len(counts))
	if total <= 0 {
		return least, 0, false
	}
	fakes = total - int64(p.HonestReports(int(total)))
	ok = true
	for i, c := range counts {
		switch {
		case fakes == 0:
			least[i] = float64(c) / float64(total)
		case c > fakes:
			// One ulp down: the quotient is rounded to nearest, and the
			// floor must not exceed the true share.
			least[i] = math.Nextafter(float64(c-fakes)/float64(total-fakes), 0)
		case c > 0:
			ok = false
		}
	}
	return least, fakes, ok
}

// HonestParallelMechanism returns what bounds the central guarantee of a
// parallel batch of p with counts[i] valid messages of metric i (total T)
// when at most a fraction p.MaxFakeFraction of them are fake: the
// mechanism, its budget and the number of reports n to evaluate it at.
// With no fake possible it is ParallelMechanism of counts at n = T.
// Otherwise it is accountant.ParallelFloor of the metrics present at their
// HonestShares, at n = p.HonestReports(T): the honest messages number at
// least that many, and each honest user's is drawn, as the mix's model
// has it, with weights at least those shares (ParallelFloor bounds every
// such weights; accountant/worst.go points 6-8). When a present metric's
// least share is 0 no floor exists: it is accountant.WorstOf the present
// metrics' randomizers alone, at n = 1, the local guarantee (the batch is
// a post-processing of the user's own message).
func HonestParallelMechanism(ctx context.Context, p *plan.Plan, open plan.Opener, counts []int64) (mech accountant.Mechanism, eps0 float64, n int, err error) {
	if len(counts) != len(p.Metrics) {
		return nil, 0, 0, invalid("%d counts for %d metrics", len(counts), len(p.Metrics))
	}
	least, fakes, ok := HonestShares(p, counts)
	var total int64
	for _, c := range counts {
		total += c
	}
	if fakes == 0 {
		mech, eps0, err := ParallelMechanism(ctx, p, open, counts)
		return mech, eps0, int(total), err
	}
	var idx []int
	var floor []float64
	for i, c := range counts {
		if c > 0 {
			idx = append(idx, i)
			floor = append(floor, least[i])
			eps0 = math.Max(eps0, p.Metrics[i].Eps0)
		}
	}
	parts, err := fixedParts(ctx, p, open, idx)
	if err != nil {
		return nil, 0, 0, err
	}
	if !ok {
		return accountant.WorstOf(parts...), eps0, 1, nil
	}
	return accountant.ParallelFloor(floor, parts...), eps0, p.HonestReports(int(total)), nil
}

// fixedParts returns the mechanisms of the metrics at idx (all when nil),
// each fixed at its metric's eps0.
func fixedParts(ctx context.Context, p *plan.Plan, open plan.Opener, idx []int) ([]accountant.Mechanism, error) {
	if idx == nil {
		for i := range p.Metrics {
			idx = append(idx, i)
		}
	}
	parts := make([]accountant.Mechanism, len(idx))
	for j, i := range idx {
		m := &p.Metrics[i]
		r, err := open(ctx, m.Plugin, m.Config())
		if err != nil {
			return nil, fmt.Errorf("plan: metric %q: %w", m.Name, err)
		}
		mech := Mechanism(ctx, r, m.Plugin)
		mech.Eps0 = m.Eps0
		parts[j] = mech
	}
	return parts, nil
}
