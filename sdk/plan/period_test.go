package plan_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
)

const onePlan = "target: {eps: 1, delta: 1e-6}\nn_min: 10000\nmetrics: [{name: a, plugin: krr, categories: [x, y, z]}]\n"

func TestPeriodAndHorizonValidation(t *testing.T) {
	bad := map[string]string{
		"period: abc":      "period",
		"period: 0s":       "period",
		"period: -1h":      "period",
		"period: 500ms":    "period",
		"period: 1500ms":   "period",
		"period: 9000h":    "period",
		"horizon: -1":      "horizon",
		"horizon: 2000000": "horizon",
		"horizon: 1.5":     "horizon",
	}
	for line, field := range bad {
		_, err := plan.Parse([]byte(onePlan + line + "\n"))
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: err = %v, want ErrInvalid naming %s", line, err, field)
		}
	}
	p, err := plan.Parse([]byte(onePlan + "period: 1440m\nhorizon: 30\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Period != "24h0m0s" || p.PeriodLength() != 24*time.Hour || p.HorizonPeriods() != 30 {
		t.Errorf("period %q (%v), horizon %d: want canonical 24h0m0s, 30", p.Period, p.PeriodLength(), p.HorizonPeriods())
	}
	// Omitted: the defaults, not written into the canonical JSON (Digest
	// omits a field while it is unset).
	q, err := plan.Parse([]byte(onePlan))
	if err != nil {
		t.Fatal(err)
	}
	if q.PeriodLength() != plan.DefaultPeriod || q.HorizonPeriods() != 1 {
		t.Errorf("defaults: period %v, horizon %d", q.PeriodLength(), q.HorizonPeriods())
	}
	if j, _ := q.JSON(); strings.Contains(string(j), "period") || strings.Contains(string(j), "horizon") {
		t.Errorf("defaults written into the plan:\n%s", j)
	}
	// Both are part of the digest.
	r, _ := plan.Parse([]byte(onePlan + "horizon: 30\n"))
	s, _ := plan.Parse([]byte(onePlan + "period: 1h\n"))
	if d := map[string]bool{p.Digest(): true, q.Digest(): true, r.Digest(): true, s.Digest(): true}; len(d) != 4 {
		t.Errorf("period or horizon not in the digest")
	}
}

func TestPeriodOf(t *testing.T) {
	p, err := plan.Parse([]byte(onePlan + "period: 6h\n"))
	if err != nil {
		t.Fatal(err)
	}
	const six = 6 * time.Hour
	cases := []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(0, int64(six)-1), 0},
		{time.Unix(0, int64(six)), 1},
		{time.Unix(0, -1), -1},
		{time.Unix(0, -int64(six)), -1},
		{time.Unix(0, -int64(six)-1), -2},
		// 2026-11-23 13:00 in UTC+5 is 08:00 UTC: period 6h -> index 4*days+1.
		{time.Date(2026, 11, 23, 13, 0, 0, 0, time.FixedZone("", 5*3600)), time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Unix()/int64(six/time.Second) + 1},
	}
	for _, c := range cases {
		i := p.PeriodOf(c.t)
		if i != c.want {
			t.Errorf("PeriodOf(%v) = %d, want %d", c.t, i, c.want)
		}
		start := p.PeriodStart(i)
		if c.t.Before(start) || !c.t.Before(start.Add(six)) || start.Location() != time.UTC {
			t.Errorf("%v not in period %d = [%v, +6h)", c.t, i, start)
		}
	}
}

func TestReportPeriod(t *testing.T) {
	p, err := plan.Parse([]byte(onePlan + "period: 6h\n"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 13, 5, 0, 0, time.UTC)
	rp := p.ReportPeriod(at)
	if rp.Length != 6*3600 || rp.Valid() != nil || time.Unix(rp.Start, 0).UTC() != time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) {
		t.Errorf("ReportPeriod(%v) = %v", at, rp)
	}
}

// TestGrace: a plan's grace is in periods, defaults to DefaultGrace (an
// app used weekly under a daily plan keeps its reports), is bounded, is
// part of the digest when set and absent from the canonical JSON when
// not (a plan written before grace keeps its epoch).
func TestGrace(t *testing.T) {
	for line, why := range map[string]string{
		"grace: -1":                 "negative",
		"grace: 1.5":                "not whole",
		"grace: 401":                "past MaxGrace at daily periods",
		"period: 1h\ngrace: 9601":   "past MaxGrace at hourly periods",
		"period: 200h\ngrace: 49":   "past MaxGrace at 200-hour periods",
		"period: 1m\ngrace: 576001": "past MaxGrace at minute periods",
	} {
		_, err := plan.Parse([]byte(onePlan + line + "\n"))
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "grace") {
			t.Errorf("%q (%s): err = %v, want ErrInvalid naming grace", line, why, err)
		}
	}
	cases := []struct {
		lines string
		want  time.Duration
	}{
		{"", 8 * 24 * time.Hour},
		{"period: 1m\n", 8 * time.Minute},
		{"grace: 1\n", 24 * time.Hour},
		{"grace: 400\n", 400 * 24 * time.Hour},
		{"period: 1h\ngrace: 9600\n", 400 * 24 * time.Hour},
		{"period: 8760h\n", plan.MaxGrace}, // the default, capped at MaxGrace
		{"period: 8760h\ngrace: 1\n", 8760 * time.Hour},
	}
	digests := map[string]string{}
	for _, c := range cases {
		p, err := plan.Parse([]byte(onePlan + c.lines))
		if err != nil {
			t.Fatalf("%q: %v", c.lines, err)
		}
		if got := p.GraceLength(); got != c.want {
			t.Errorf("%q: GraceLength = %v, want %v", c.lines, got, c.want)
		}
		j, _ := p.JSON()
		if strings.Contains(string(j), "grace") != strings.Contains(c.lines, "grace") {
			t.Errorf("%q: canonical JSON %s", c.lines, j)
		}
		if prev, ok := digests[p.Digest()]; ok {
			t.Errorf("%q and %q share a digest", c.lines, prev)
		}
		digests[p.Digest()] = c.lines
	}
}
