//go:build audit

package accountant

import "testing"

// TestAuditWindowSkipKeepsBits: windowSkipCompare at eps0 6 to 20, n up
// to 1e6, two lattice steps.
func TestAuditWindowSkipKeepsBits(t *testing.T) {
	_, skipped := windowSkipCompare(t, []float64{6, 10, 14, 20}, []int{300, 10000, 1000000}, []float64{0.5, 0.125})
	if skipped < 100 {
		t.Errorf("%d windows passed over, want >= 100", skipped)
	}
}
