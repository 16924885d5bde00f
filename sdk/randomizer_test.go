package sdk_test

import (
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestMaxBlanketDrawsFillsABatch: one SampleBlanket call may fill the
// largest batch a shuffler releases, and no more.
func TestMaxBlanketDrawsFillsABatch(t *testing.T) {
	if sdk.MaxBlanketDraws != report.MaxBatchReports {
		t.Errorf("sdk.MaxBlanketDraws = %d, report.MaxBatchReports = %d", sdk.MaxBlanketDraws, report.MaxBatchReports)
	}
}
