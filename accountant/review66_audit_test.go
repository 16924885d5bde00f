//go:build audit

package accountant

import "testing"

// The review-66 grids in full: 300 random sparse sets, and emBelow at n
// up to 1e10.

func TestReview66SparseRandomSameBitsFull(t *testing.T) { review66SparseRandomSameBits(t, 300) }

func TestReview66EmBelowExtremesFull(t *testing.T) {
	review66EmBelowExtremes(t, []int{1, 2, 3, 10, 100, 5000, 1000000, 100000000, 10000000000})
}
