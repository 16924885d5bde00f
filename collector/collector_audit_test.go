//go:build audit

package collector

import "testing"

// TestCollectorSIGKILLDuringIngestDeep is TestCollectorSIGKILLDuringIngest
// with a batch of 5000 reports.
func TestCollectorSIGKILLDuringIngestDeep(t *testing.T) {
	sigkillDuringIngest(t, 5000)
}

// TestCollectorKeyAndCalibrationPersistDeep is
// TestCollectorKeyAndCalibrationPersist on the test plan's own separate
// travel.
func TestCollectorKeyAndCalibrationPersistDeep(t *testing.T) {
	keyAndCalibrationPersist(t, "separate")
}

// TestEndToEndDeep is TestEndToEnd with 4000 reports.
func TestEndToEndDeep(t *testing.T) {
	endToEnd(t, 4000)
}

// TestHorizonWindowsCoverNonNestedDeep is the 3000-case run of
// TestHorizonWindowsCoverNonNested.
func TestHorizonWindowsCoverNonNestedDeep(t *testing.T) {
	horizonWindowsCoverNonNested(t, 3000)
}
