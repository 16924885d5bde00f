//go:build audit

package collector

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
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
