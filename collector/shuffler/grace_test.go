package shuffler

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestShufflerFollowsPlanGrace: without PeriodGrace the shuffler keeps a
// period open for the plan's grace, the one the SDK seals by
// (plan.Plan.GraceLength): 8 daily periods when the plan sets none, so the
// report of a day an app was last used a week ago is still taken; a plan's
// own grace is followed too, and the report of a period past it is
// refused as late.
func TestShufflerFollowsPlanGrace(t *testing.T) {
	for _, c := range []struct {
		grace int // the plan's, in days (0: the default)
		days  int // the grace in effect, in days
	}{
		{grace: 0, days: 8},
		{grace: 2, days: 2},
	} {
		p := servertest.Plan(t, 10)
		p.Grace = c.grace
		ep := p.Epoch()
		clock := &testClock{}
		clock.set(time.Unix(day(10).Start+3600, 0)) // day 10, 01:00 UTC
		f := newShufflerFixture(t, Options{Plan: p, Collector: "http://127.0.0.1:1", Now: clock.now})
		if want := time.Duration(c.days) * 24 * time.Hour; f.s.o.PeriodGrace != want {
			t.Errorf("grace %d: PeriodGrace = %v, want %v", c.grace, f.s.o.PeriodGrace, want)
		}
		upload := func(d report.Period) UploadResult {
			t.Helper()
			var res UploadResult
			envs := envelopes(report.PeriodPoolKey(metric, ep, d), fakeSealed(3))
			if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("upload: status %d", resp.StatusCode)
			}
			return res
		}
		// Day 10-g ended g-1 days and an hour ago: taken; the day
		// before it ended the grace and an hour ago: refused.
		if res := upload(day(10 - c.days)); res.Accepted != 3 {
			t.Errorf("grace %d: a period ended %d days 1 h ago: %+v, want taken", c.grace, c.days-1, res)
		}
		if res := upload(day(10 - c.days - 1)); res.Rejected != 3 || !strings.Contains(res.Errors[0].Error, "grace") {
			t.Errorf("grace %d: a period ended %d days 1 h ago: %+v, want refused past its grace", c.grace, c.days, res)
		}
		if _, err := f.s.Stats(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
