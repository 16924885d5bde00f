//go:build audit

package rappor_test

import (
	"testing"

	"github.com/blanket-dp/blanket/plugins/rappor"
)

// TestConformanceAtSizeDeep is TestConformanceAtSize at 1,000 buckets in
// both modes.
func TestConformanceAtSizeDeep(t *testing.T) {
	conformanceAtSize(t, atSize{rappor.Optimized, 1000}, atSize{rappor.Symmetric, 1000})
}
