//go:build audit

package accountant

import "testing"

// TestRampSumClosedFormDeep: 600 random windows (c up to 2^24,
// i0 up to 1e9, theta h from 1e-14 to 100) against the 400-bit closed
// form; about 20 s.
func TestRampSumClosedFormDeep(t *testing.T) {
	r50RampSumClosedForm(t, 600, 7)
}
