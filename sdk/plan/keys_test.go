package plan_test

import (
	"errors"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

func newPub(t *testing.T) []byte {
	t.Helper()
	_, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestKeyScheduleRefusesMalformed: a schedule parses when its keys are
// valid, named by their ids and start in strictly increasing periods;
// every other form is refused with ErrBadKeySchedule.
func TestKeyScheduleRefusesMalformed(t *testing.T) {
	a, b := plan.NewCollectorKey(newPub(t), 0), plan.NewCollectorKey(newPub(t), 86400)
	tooMany := make([]plan.CollectorKey, plan.MaxCollectorKeys+1)
	for i := range tooMany {
		tooMany[i] = plan.NewCollectorKey(newPub(t), int64(i)*86400)
	}
	for name, c := range map[string]struct {
		keys []plan.CollectorKey
		ok   bool
	}{
		"one":          {[]plan.CollectorKey{a}, true},
		"two":          {[]plan.CollectorKey{a, b}, true},
		"none":         {nil, false},
		"too many":     {tooMany, false},
		"not base64":   {[]plan.CollectorKey{{ID: a.ID, Key: "not base64!", From: 0}}, false},
		"wrong length": {[]plan.CollectorKey{{ID: a.ID, Key: "AAAA", From: 0}}, false},
		"wrong id":     {[]plan.CollectorKey{{ID: b.ID, Key: a.Key, From: 0}}, false},
		"twice":        {[]plan.CollectorKey{a, {ID: a.ID, Key: a.Key, From: 86400}}, false},
		"same from":    {[]plan.CollectorKey{a, {ID: b.ID, Key: b.Key, From: 0}}, false},
		"out of order": {[]plan.CollectorKey{b, a}, false},
		"negative":     {[]plan.CollectorKey{{ID: a.ID, Key: a.Key, From: -1}}, false},
	} {
		p := &plan.Plan{CollectorKeys: c.keys}
		s, err := p.KeySchedule()
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, plan.ErrBadKeySchedule)) {
			t.Errorf("%s: KeySchedule = %v; want ok = %v or ErrBadKeySchedule", name, err, c.ok)
		}
		if c.ok && len(s) != len(c.keys) {
			t.Errorf("%s: %d keys parsed of %d", name, len(s), len(c.keys))
		}
	}
}

// TestKeyScheduleForPeriod: a period is sealed to the key with the latest
// start at or before its own, and to none when every key starts later.
func TestKeyScheduleForPeriod(t *testing.T) {
	const day = 86400
	a, b := plan.NewCollectorKey(newPub(t), 10*day), plan.NewCollectorKey(newPub(t), 12*day)
	s, err := (&plan.Plan{CollectorKeys: []plan.CollectorKey{a, b}}).KeySchedule()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		start int64
		want  string // "": none
	}{
		{9 * day, ""}, {10 * day, a.ID}, {11 * day, a.ID}, {12 * day, b.ID}, {400 * day, b.ID},
	} {
		k, ok := s.For(report.Period{Start: c.start, Length: day})
		if got := map[bool]string{true: k.ID}[ok]; got != c.want {
			t.Errorf("period starting day %d: key %q, want %q", c.start/day, got, c.want)
		}
	}
	// An hour's period straddling nothing: the key of its start.
	if k, _ := s.For(report.Period{Start: 12*day - 3600, Length: 3600}); k.ID != a.ID {
		t.Errorf("the last hour before the rotation: key %s, want %s", k.ID, a.ID)
	}
}
