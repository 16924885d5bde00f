package shuffler

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// testClock is a settable clock for Options.Now.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *testClock) now() time.Time  { return time.Unix(0, c.ns.Load()) }

// TestShufflerPoolsPerPeriod: envelopes of two periods pool apart, so each
// released batch is one period's; a pool below n_min past its period's
// grace is deleted and counted, never released; late and far-future
// envelopes are rejected with a reason.
func TestShufflerPoolsPerPeriod(t *testing.T) {
	p := testPlan(t, 100)
	ep := p.Epoch()
	clock := &testClock{}
	clock.set(time.Unix(day(2).Start+3600, 0)) // day 2, 01:00 UTC
	sink := &sink{}
	srv := newServer(t, sink)
	f := newShufflerFixture(t, Options{Plan: p, Collector: srv.URL, Now: clock.now, PeriodGrace: 36 * time.Hour})
	key := func(d report.Period) string { return report.PeriodPoolKey(metric, ep, d) }
	upload := func(envs []report.Envelope) UploadResult {
		t.Helper()
		var res UploadResult
		if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("upload: status %d", resp.StatusCode)
		}
		return res
	}
	sealed := fakeSealed(370)
	// Day 1 (ended an hour ago) reaches n_min; day 0 (ended 25 h ago,
	// within the 36 h grace) does not; day 2 is the current day.
	var envs []report.Envelope
	envs = append(envs, envelopes(key(day(1)), sealed[:150])...)
	envs = append(envs, envelopes(key(day(0)), sealed[150:210])...)
	envs = append(envs, envelopes(key(day(2)), sealed[210:310])...)
	if res := upload(envs); res.Accepted != 310 || res.Rejected != 0 {
		t.Fatalf("upload: %+v", res)
	}
	// A period without an epoch tag.
	if res := upload(envelopes(metric+"##"+day(2).String(), sealed[:1])); res.Rejected != 1 || !strings.Contains(res.Errors[0].Error, "without an epoch") {
		t.Fatalf("a period without an epoch: %+v", res)
	}
	// Ended 49 h ago (past the grace), and three days ahead.
	res := upload(append(envelopes(key(day(-1)), sealed[310:320]), envelopes(key(day(5)), sealed[320:330])...))
	if res.Accepted != 0 || res.Rejected != 20 || len(res.Errors) < 11 ||
		!strings.Contains(res.Errors[0].Error, "grace") || !strings.Contains(res.Errors[10].Error, "after the shuffler's clock") {
		t.Fatalf("late and future envelopes: %+v", res)
	}
	// While a period's grace lasts its pool keeps n_min: day 1 (150)
	// has only 50 to spare, day 2 (100) none.
	if n, err := f.s.Release(context.Background()); err != nil || n != 0 {
		t.Fatalf("Release = %d, %v; want none while the periods are open", n, err)
	}
	st, err := f.s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[key(day(0))] != 60 || st.Pools[key(day(1))] != 150 || st.Expired != 0 || st.Late != 10 {
		t.Fatalf("after the release: %+v", st)
	}
	// 12 hours later day 0's grace has passed: its 60 reports, fewer than
	// n_min in all, go unreleased.
	clock.set(time.Unix(day(2).Start+13*3600, 0))
	if n, err := f.s.Release(context.Background()); err != nil || n != 0 {
		t.Fatalf("Release after day 0's grace = %d, %v", n, err)
	}
	if st, _ = f.s.Stats(context.Background()); st.Pools[key(day(0))] != 0 || st.Expired != 60 {
		t.Fatalf("after day 0's grace: %+v", st)
	}
	if res := upload(envelopes(key(day(0)), sealed[330:340])); res.Rejected != 10 || !strings.Contains(res.Errors[0].Error, "grace") {
		t.Fatalf("day 0 after its grace: %+v", res)
	}
	// Day 1's grace passes: its pool goes whole; day 2's still waits.
	clock.set(time.Unix(day(2).Start+37*3600, 0))
	if n, err := f.s.Release(context.Background()); err != nil || n != 1 {
		t.Fatalf("Release after day 1's grace = %d, %v; want its batch", n, err)
	}
	clock.set(time.Unix(day(2).End()+36*3600, 0))
	if n, err := f.s.Release(context.Background()); err != nil || n != 1 {
		t.Fatalf("Release after day 2's grace = %d, %v; want its batch", n, err)
	}
	if st, _ = f.s.Stats(context.Background()); len(st.Pools) != 0 || st.Expired != 60 {
		t.Fatalf("after the graces: %+v", st)
	}
	f.run(t)
	waitFor(t, "two batches", func() bool { return len(sink.Got()) == 2 })
	got := map[string]int{}
	for _, b := range sink.Got() {
		got[b.Metric] = len(b.Sealed)
	}
	if got[key(day(1))] != 150 || got[key(day(2))] != 100 {
		t.Fatalf("batches %v: want one of day 1 (150) and one of day 2 (100)", got)
	}
}

// TestShufflerSplitsEvenly: a pool above MaxBatch goes out in equal
// batches, so no remainder below n_min is left: with n_min 100 and
// MaxBatch 199, a closed pool of 250 makes two batches of 125, not 199
// and a stranded 51; an open one of 450 releases 350 as 175 and 175 and
// keeps n_min.
func TestShufflerSplitsEvenly(t *testing.T) {
	p := testPlan(t, 100)
	sink := &sink{}
	srv := newServer(t, sink)
	clock := &testClock{}
	clock.set(time.Unix(day(2).Start+3600, 0))
	f := newShufflerFixture(t, Options{Plan: p, Collector: srv.URL, MaxBatch: 199, Now: clock.now, Settle: -1})
	ctx := context.Background()
	key := func(d report.Period) string { return report.PeriodPoolKey(metric, p.Epoch(), d) }
	var res UploadResult
	envs := append(envelopes(key(day(1)), fakeSealed(450)), envelopes(key(day(2)), fakeSealed(250))...)
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 700 {
		t.Fatalf("upload: %d %+v", resp.StatusCode, res)
	}
	if closed, err := f.s.ClosePeriods(ctx, time.Unix(day(2).End(), 0)); err != nil || len(closed) != 2 {
		t.Fatalf("ClosePeriods = %v, %v; want days 1 and 2", closed, err)
	}
	if n, err := f.s.Release(ctx); err != nil || n != 5 {
		t.Fatalf("Release = %d, %v; want 3 batches of day 1 and 2 of day 2", n, err)
	}
	st, err := f.s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pools) != 0 || st.ReportsReleased != 700 {
		t.Fatalf("after the release: %+v", st)
	}
	f.run(t)
	waitFor(t, "5 batches", func() bool { return len(sink.Got()) == 5 })
	sizes := map[string][]int{}
	for _, b := range sink.Got() {
		sizes[b.Metric] = append(sizes[b.Metric], len(b.Sealed))
	}
	for _, s := range sizes {
		slices.Sort(s)
	}
	if !slices.Equal(sizes[key(day(1))], []int{150, 150, 150}) || !slices.Equal(sizes[key(day(2))], []int{125, 125}) {
		t.Fatalf("batch sizes %v: want day 1 in 3 of 150, day 2 in 2 of 125", sizes)
	}
}

// TestShufflerSplitsEvenlyOpen: while its period is open, a pool releases
// what it holds above n_min in equal batches of n_min to MaxBatch.
func TestShufflerSplitsEvenlyOpen(t *testing.T) {
	p := testPlan(t, 100)
	f := newShufflerFixture(t, Options{Plan: p, Collector: "http://127.0.0.1:1", MaxBatch: 199, Settle: -1})
	ctx := context.Background()
	var res UploadResult
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(450))), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 450 {
		t.Fatalf("upload: %d %+v", resp.StatusCode, res)
	}
	if n, err := f.s.Release(ctx); err != nil || n != 2 {
		t.Fatalf("Release = %d, %v; want 2 batches", n, err)
	}
	st, err := f.s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[todayKey] != 100 || st.ReportsReleased != 350 {
		t.Fatalf("after the release: %+v, want 350 released in 2 and n_min = 100 pooled", st)
	}
}
