//go:build audit

package accountant

import "testing"

// The review-65 grids in full (about 20 s): the tiny-delta target,
// Hadamard and k-RR at k = 1000, and the asymmetric and parallel
// end-to-end searches.

func TestReview65LowerBelowHorizonUpperFull(t *testing.T) { review65LowerBelowHorizonUpper(t, true) }

func TestReview65SameSearchMoreMechanismsFull(t *testing.T) {
	review65SameSearchMoreMechanisms(t, true)
}
