//go:build audit

package hadamard_test

import "testing"

// TestConformanceAtSizeDeep is TestConformanceAtSize at 1,000 buckets.
func TestConformanceAtSizeDeep(t *testing.T) {
	conformanceAtSize(t, 1000)
}
