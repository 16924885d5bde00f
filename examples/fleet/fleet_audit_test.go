//go:build audit

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestFleetDeep is TestFleet on the demo plan's own horizon (30 periods)
// at n_min = 300: 1200 instances over 4 days, so that the collector
// calibrates the composition of the three metrics over 30 periods at a
// small n_min and the guarantee over the horizon is checked against it.
func TestFleetDeep(t *testing.T) {
	runFleet(t, fleetCase{n: 1200, nMin: 300, days: 4})
}

// TestFleetPooledDeep runs fleetPooled over 2 days.
func TestFleetPooledDeep(t *testing.T) {
	fleetPooled(t, 2)
}

// fleetPooled runs a small fleet under joint and parallel travel over
// days simulated days: one shuffler pool for the plan's messages,
// calibrated by the collector for the joint or parallel mechanism; the
// estimates must pass the fleet's own check. (Pooled travel is checked
// in make test by the collector's and the commands' tests.)
func fleetPooled(t *testing.T, days int) {
	for _, travel := range []string{"joint", "parallel"} {
		t.Run(travel, func(t *testing.T) {
			n, nMin := 800, 250
			if testing.Short() {
				n, nMin = 600, 250
			}
			p := loadPlan(t, nMin)
			p.Travel = travel
			// One period's horizon: the collector calibrates the pooled
			// mechanism in a second instead of composing 30 periods (the
			// horizon calibration is TestFleet's and sdk/plan's).
			p.Horizon = 1
			url := startServer(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var out, log bytes.Buffer
			ok, err := run(ctx, config{endpoint: url, planKey: planKey(url), n: n, workers: 16, seed: 11, zipfS: 1.1, maxEps0: 12, days: days, active: 0.6, records: 2, poll: 50 * time.Millisecond}, &out, &log)
			t.Log("\n" + out.String())
			if err != nil {
				// The instances' own log says why a report was refused.
				t.Log("instances' log:\n" + lastLines(log.String(), 40))
				t.Fatal(err)
			}
			if !ok {
				t.Fatal("estimates off")
			}
			for _, want := range []string{travel + " travel", "guarantee per user over the horizon", "generic clone bound", "all reports estimated"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q", want)
				}
			}
		})
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
