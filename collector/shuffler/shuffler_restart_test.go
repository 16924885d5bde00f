package shuffler

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

func reviewUpload(t *testing.T, url string, envs []report.Envelope) UploadResult {
	t.Helper()
	var res UploadResult
	if resp := post(t, nil, url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: status %d", resp.StatusCode)
	}
	return res
}

// TestShufflerRefusesPreReleaseDatabase: a database whose seen table has
// no period columns (a pre-release build's) is refused at open with an
// error that names the missing column, rather than failing every upload.
func TestShufflerRefusesPreReleaseDatabase(t *testing.T) {
	p := testPlan(t, 1000)
	dir := t.TempDir()
	o := Options{Plan: p, Dir: dir, Collector: "http://127.0.0.1:1"}
	f := newShufflerFixture(t, o)
	f.s.Close()
	db, err := openSQLiteFile(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE seen`,
		`CREATE TABLE seen (h BLOB PRIMARY KEY, gen INTEGER NOT NULL) WITHOUT ROWID`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	db.Close()
	o.Logger = testLogger(t)
	s, err := Open(context.Background(), o)
	if err == nil {
		s.Close()
		t.Fatal("a database without seen.period_end opened")
	}
	if !strings.Contains(err.Error(), "seen has no column period_end") || !strings.Contains(err.Error(), "pre-release") {
		t.Fatalf("error %q, want it to name the missing column and the pre-release build", err)
	}
}

// S3b (second review): ids are forgotten by the grace in force at the
// rollover; a restart with a longer PeriodGrace (or a clock stepped back)
// would reopen the period, so the shuffler refuses every period of which
// it forgot ids: the retry is not pooled again.
func TestShufflerGraceIncreaseReopensForgottenIDs(t *testing.T) {
	p := testPlan(t, 1000)
	dir := t.TempDir()
	clock := &testClock{}
	clock.set(time.Unix(today.Start+3600, 0))
	o := Options{Plan: p, Dir: dir, Collector: "http://127.0.0.1:1", Now: clock.now, DedupWindow: 8, PeriodGrace: time.Hour}
	f := newShufflerFixture(t, o)
	key := periodKey(metric, p.Epoch())
	first := envelopes(key, fakeSealed(1))
	if res := reviewUpload(t, f.url, first); res.Accepted != 1 {
		t.Fatalf("first: %+v", res)
	}
	// Past today's 1 h grace: the next generations forget today's ids.
	clock.set(time.Unix(today.End()+3600+1, 0))
	tomorrow := report.PeriodPoolKey(metric, p.Epoch(), report.Period{Start: today.End(), Length: today.Length})
	for range 12 {
		reviewUpload(t, f.url, envelopes(tomorrow, fakeSealed(1)))
	}
	f.s.Close()
	o.PeriodGrace = 6 * time.Hour // operator lengthens the grace
	g := newShufflerFixture(t, o)
	res := reviewUpload(t, g.url, first)
	st, _ := g.s.Stats(context.Background())
	if res.Accepted != 0 || st.Pools[key] > 1 {
		t.Fatalf("retry after restart with a longer grace: %+v, pool of today %d: the same report pooled twice in one period", res, st.Pools[key])
	}
}

// R1 (second review): a period length the shuffler pooled but did not
// store (AddPlan stores what it learns best effort: a failed write is
// only logged); reopened with a plan of another period, the lengths of
// the periods it has pooled stay accepted, so late reports of apps still
// on the earlier plan are not refused.
func TestShufflerRestartKeepsPooledPeriodLength(t *testing.T) {
	old := testPlan(t, 10)
	old.Period = "1h"
	cur := testPlan(t, 10)
	dir := t.TempDir()
	clock := &testClock{}
	clock.set(time.Unix(today.Start+3600+60, 0))
	o := Options{Plan: old, Dir: dir, Collector: "http://127.0.0.1:1", Now: clock.now}
	f := newShufflerFixture(t, o)
	hour := report.Period{Start: today.Start, Length: 3600}
	if res := reviewUpload(t, f.url, envelopes(report.PeriodPoolKey(metric, old.Epoch(), hour), fakeSealed(1))); res.Accepted != 1 {
		t.Fatalf("before the restart: %+v", res)
	}
	f.s.Close()
	db, err := openSQLiteFile(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM period_lengths`); err != nil { // as if storing them had failed
		t.Fatal(err)
	}
	db.Close()
	o.Plan = cur
	g := newShufflerFixture(t, o)
	res := reviewUpload(t, g.url, envelopes(report.PeriodPoolKey(metric, old.Epoch(), hour), fakeSealed(1)))
	if res.Rejected != 0 {
		t.Fatalf("late report of the earlier plan after the restart: %+v", res)
	}
}
