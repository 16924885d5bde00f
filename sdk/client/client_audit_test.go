//go:build audit

package client_test

import (
	"fmt"
	"testing"
)

// TestMeanThousandRecordsOnePeriod is TestMeanRecordsOnePeriod with 1000
// Records per period.
func TestMeanThousandRecordsOnePeriod(t *testing.T) {
	meanRecordsOnePeriod(t, 1000)
}

// TestThousandRecordsOnePeriod is TestRecordsOnePeriod with 1000 Records.
func TestThousandRecordsOnePeriod(t *testing.T) {
	recordsOnePeriod(t, 1000)
}

// TestJointMessageTooLargeRAPPOR is TestJointMessageTooLarge with the
// real RAPPOR plugin over 60,000 categories (reports of 7500 bytes).
func TestJointMessageTooLargeRAPPOR(t *testing.T) {
	labels := make([]string, 60000)
	for i := range labels {
		labels[i] = fmt.Sprint("l", i)
	}
	jointMessageTooLarge(t, labels, nil)
}

// TestCrashRestartDeep is TestCrashRestart with 200 Records, and at least
// 300 before the kill while recording.
func TestCrashRestartDeep(t *testing.T) {
	crashRestartBoth(t, 200, 300)
}

// TestPlanChangeConcurrentRecordsDeep: TestPlanChangeConcurrentRecords
// over 80 quarter periods.
func TestPlanChangeConcurrentRecordsDeep(t *testing.T) {
	planChangeConcurrentRecords(t, 80)
}
