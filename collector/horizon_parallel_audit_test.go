//go:build audit

package collector

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

// TestHorizonParallelManyMixesBoundedTogetherDeep (make audit: make test
// runs TestHorizonParallelManySkewedMixes, the same path): a day with more distinct
// mixes than maxHorizonMixes (all near half and half) is bounded by the
// parallel composition at every weights at least each metric's smallest
// share, rounded down to 1/256 (accountant.ParallelFloor), with the
// plan's weights: one round, so at least the largest batch's guarantee
// (less the engine's Tolerance: a different root search) and, the mixes
// being close (the floor, 128/256 and 122/256, sums to 0.977), within 10%
// of it (measured: 1%).
func TestHorizonParallelManyMixesBoundedTogetherDeep(t *testing.T) {
	h, largest := manyMixesHorizon(t, func(i int64) []int64 { return []int64{250 + i, 250 - i} })
	if *h.Eps < largest/(1+accountant.Tolerance) || *h.Eps > 1.1*largest {
		t.Errorf("horizon eps %.6g, want in [%.6g, 1.1 x that] (the largest batch's guarantee)", *h.Eps, largest)
	}
}

// TestHorizonParallelBetweenBatchAndBasic: with parallel travel the
// horizon over three days of batches is stated; it is at least the
// largest guarantee of a single batch (the window composes three rounds,
// each at least as weak as any batch's) and at most the basic composition
// of its rounds, each day's at the weakest mechanism of that day (the
// plan's weights or one of its batches' mixes) at the window's smallest
// batch and delta/3: a proof as well, which the PLD composition of three
// rounds beats. It runs in make audit (10 s under make test's load); make
// test keeps the lower bound through TestHorizonParallelSkewedMixRaises.
func TestHorizonParallelBetweenBatchAndBasic(t *testing.T) {
	ctx := context.Background()
	f := newCollectorFixture(t, parallelPlan(t, 3))
	pub := f.c.Plan()
	largest := 0.0
	for _, b := range parallelHistory {
		insertMixBatch(t, f, pub.Epoch(), day(b.day), b.counts)
		largest = math.Max(largest, batchEps(t, f, b.counts))
	}
	h := horizonOf(t, f)
	planMech, eps0, delta, err := accounting.BatchMechanism(ctx, pub, openBuiltin, pub.Metrics[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500 // the smallest batch, 500 messages
	basic := 0.0
	for d := range 3 {
		worst := 0.0
		for _, b := range parallelHistory {
			if b.day != d {
				continue
			}
			mix, _, err := accounting.ParallelMechanism(ctx, pub, openBuiltin, b.counts)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []accountant.Mechanism{planMech, mix} {
				r, err := accountant.Epsilon(m, eps0, n, delta/3)
				if err != nil {
					t.Fatal(err)
				}
				worst = math.Max(worst, r.Upper)
			}
		}
		basic += worst
	}
	t.Logf("horizon %.4f over %d reports; largest batch %.4f; basic composition %.4f", *h.Eps, h.Reports, largest, basic)
	if h.Reports != 3 || !strings.Contains(h.Note, "parallel travel") {
		t.Errorf("horizon over %d reports, note %q: want 3, and the note to say what parallel travel composes", h.Reports, h.Note)
	}
	if !(*h.Eps >= largest && *h.Eps <= basic) {
		t.Errorf("horizon eps %.6g, not in [%.6g, %.6g] (the largest batch's, basic composition)", *h.Eps, largest, basic)
	}
}
