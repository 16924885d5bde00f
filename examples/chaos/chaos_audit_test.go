//go:build audit

package chaos

import (
	"testing"
	"time"
)

// TestChaosDeep is TestChaos at a larger size, closer to issue 23's
// operator run (2,000 apps, 30 s periods, n_min 200, five kills): 500
// apps with their own SQLite outboxes, 4 s periods, n_min 40, eight
// rounds of a kill at a period boundary and one (up to three) right after
// a release, over about 16 periods, so that the first periods reach their
// deadline (8 periods of grace) while the run goes on and go out whole
// then, the others when the test closes them. About a minute.
func TestChaosDeep(t *testing.T) {
	runChaos(t, chaosRun{apps: 500, nMin: 40, period: 4 * time.Second, rounds: 8, releaseTries: 3, seed: 11})
}
