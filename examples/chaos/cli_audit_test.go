//go:build audit

package chaos

import (
	"testing"
	"time"
)

// TestCLIShapedDeep is TestCLIShaped at a larger size: 48 users over 14
// days of 4 s, the server down twice (3 days, then 2), so that reports
// sealed during an outage by users who also skip days arrive up to 7 days
// late, close to the grace of 8. About a minute. (Each run is a process:
// more users at once would measure the machine's run queue, not the SDK.)
func TestCLIShapedDeep(t *testing.T) {
	runCLI(t, cliRunCfg{users: 48, days: 14, nMin: 6, period: 4 * time.Second, down: []outage{{from: 3, days: 3}, {from: 9, days: 2}}, seed: 12})
}
