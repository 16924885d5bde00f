package shuffler

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/plan"
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

// TestShufflerGraceRisesWithPlans: one grace serves every plan the
// shuffler takes, the largest: a plan added later (a plan the collector
// published, through the relay) with a longer grace than the one it
// opened with keeps every period open that long, so the reports its apps
// seal late are taken; a shorter one changes nothing; an explicit
// PeriodGrace stays.
func TestShufflerGraceRisesWithPlans(t *testing.T) {
	short := servertest.Plan(t, 10)
	short.Grace = 1
	long := servertest.Plan(t, 10)
	long.Grace = 3
	clock := &testClock{}
	clock.set(time.Unix(day(10).Start+3600, 0)) // day 10, 01:00 UTC
	for _, fixed := range []time.Duration{0, 24 * time.Hour} {
		f := newShufflerFixture(t, Options{Plan: short, Collector: "http://127.0.0.1:1", Now: clock.now, PeriodGrace: fixed})
		upload := func(p *plan.Plan, d report.Period) UploadResult {
			t.Helper()
			var res UploadResult
			envs := envelopes(report.PeriodPoolKey(metric, p.Epoch(), d), fakeSealed(3))
			if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("upload: status %d", resp.StatusCode)
			}
			return res
		}
		// Day 8 ended a day and an hour ago: past the short grace.
		if res := upload(short, day(8)); res.Rejected != 3 {
			t.Fatalf("fixed %v: before the longer plan: %+v, want refused", fixed, res)
		}
		f.s.AddPlan(long)
		f.s.AddPlan(short) // a shorter grace again lowers nothing
		res := upload(long, day(8))
		switch {
		case fixed == 0 && res.Accepted != 3:
			t.Errorf("after a plan with grace 3: %+v, want taken", res)
		case fixed != 0 && res.Rejected != 3:
			t.Errorf("PeriodGrace %v set: %+v, want refused (the operator's grace stays)", fixed, res)
		}
	}
}
