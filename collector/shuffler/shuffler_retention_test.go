package shuffler

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// TestShufflerDedupWithinPeriod: an app's retry of an envelope whose id
// the dedup window has long rolled past is still a duplicate while its
// period's pools are open (one report per period, however many other
// reports arrived in between); once the period's grace has passed, the id
// is forgotten at the next generation and the period refuses the envelope
// anyway.
func TestShufflerDedupWithinPeriod(t *testing.T) {
	p := testPlan(t, 1000)
	clock := &testClock{}
	clock.set(time.Unix(today.Start+3600, 0))
	f := newShufflerFixture(t, Options{Plan: p, Collector: "http://127.0.0.1:1", Now: clock.now, DedupWindow: 8, PeriodGrace: 24 * time.Hour})
	key := periodKey(metric, p.Epoch())
	upload := func(envs []report.Envelope) UploadResult {
		t.Helper()
		var res UploadResult
		if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("upload: status %d", resp.StatusCode)
		}
		return res
	}
	first := envelopes(key, fakeSealed(1))
	if res := upload(first); res.Accepted != 1 {
		t.Fatalf("first upload: %+v", res)
	}
	// 40 other reports, one per upload: ten generations of 2 ids roll by.
	for range 40 {
		if res := upload(envelopes(key, fakeSealed(1))); res.Accepted != 1 {
			t.Fatalf("other upload: %+v", res)
		}
	}
	if res := upload(first); res.Accepted != 0 || res.Duplicates != 1 {
		t.Fatalf("retry within the period: %+v, want a duplicate", res)
	}
	st, err := f.s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[key] != 41 {
		t.Fatalf("pool %d, want 41 reports (the retry not pooled again)", st.Pools[key])
	}
	// Past today's grace (one period here): ids of today go with the
	// next generation, and today's envelopes are refused as late.
	clock.set(time.Unix(today.End()+today.Length+1, 0))
	tomorrow := report.PeriodPoolKey(metric, p.Epoch(), report.Period{Start: today.End(), Length: today.Length})
	for range 12 {
		upload(envelopes(tomorrow, fakeSealed(1)))
	}
	var kept int
	if err := sqliteDB(t, f.s).R.QueryRow(`SELECT COUNT(*) FROM seen WHERE period_end = ?`, today.End()).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept != 0 {
		t.Errorf("%d ids of a closed period still kept, want none", kept)
	}
	if res := upload(first); res.Rejected != 1 {
		t.Errorf("retry after the grace: %+v, want it refused as late", res)
	}
}

// TestShufflerSettle: with Settle, a pool of an open period is held while
// reports keep joining it and released, down to its last n_min, once none
// joined for Settle: one batch where no Settle would release a few of
// about n_min as they arrive.
func TestShufflerSettle(t *testing.T) {
	p := testPlan(t, 10)
	clock := &testClock{}
	clock.set(time.Unix(today.Start+3600, 0))
	f := newShufflerFixture(t, Options{Plan: p, Collector: "http://127.0.0.1:1", Now: clock.now, Settle: time.Minute})
	key := periodKey(metric, p.Epoch())
	ctx := context.Background()
	for i := range 4 {
		var res UploadResult
		post(t, nil, f.url, report.EncodeEnvelopes(envelopes(key, fakeSealed(6))), &res)
		if res.Accepted != 6 {
			t.Fatalf("upload %d: %+v", i, res)
		}
		if n, err := f.s.Release(ctx); err != nil || n != 0 {
			t.Fatalf("after upload %d: Release = %d, %v; want the growing pool held", i, n, err)
		}
		clock.set(clock.now().Add(30 * time.Second))
	}
	if n, err := f.s.Release(ctx); err != nil || n != 0 {
		t.Fatalf("30 s after the last upload: Release = %d, %v; want the pool held", n, err)
	}
	clock.set(clock.now().Add(30 * time.Second))
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("settled: Release = %d, %v; want one batch", n, err)
	}
	st, err := f.s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ReportsReleased != 14 || st.Pools[key] != 10 {
		t.Errorf("stats %+v, want 14 reports in one batch and n_min = 10 pooled", st)
	}
}

// TestShufflerSettleNotPostponed: a settle counts from the last look that
// found the pool larger, so retried duplicates and refused envelopes do
// not postpone a release (they once did, each resetting the wait: one
// sender retrying held every pool to its deadline); and a pool that keeps
// growing goes out at the latest settleCap settle times after it could
// first go.
func TestShufflerSettleNotPostponed(t *testing.T) {
	p := testPlan(t, 10)
	clock := &testClock{}
	clock.set(time.Unix(today.Start+3600, 0))
	f := newShufflerFixture(t, Options{Plan: p, Collector: "http://127.0.0.1:1", Now: clock.now, Settle: time.Minute})
	key := periodKey(metric, p.Epoch())
	ctx := context.Background()
	upload := func(envs []report.Envelope) UploadResult {
		t.Helper()
		var res UploadResult
		post(t, nil, f.url, report.EncodeEnvelopes(envs), &res)
		return res
	}
	release := func(want int, what string) {
		t.Helper()
		if n, err := f.s.Release(ctx); err != nil || n != want {
			t.Fatalf("%s: Release = %d, %v; want %d", what, n, err, want)
		}
	}
	sealed := fakeSealed(200)
	first := envelopes(key, sealed[:25])
	if res := upload(first); res.Accepted != 25 {
		t.Fatalf("upload: %+v", res)
	}
	release(0, "at the upload")
	// Retries of the same envelopes, and envelopes of a pool no plan
	// has, every 20 s: the pool does not grow.
	for i := range 3 {
		clock.set(clock.now().Add(20 * time.Second))
		if res := upload(first[:5]); res.Duplicates != 5 {
			t.Fatalf("retry %d: %+v", i, res)
		}
		if res := upload(envelopes("no/such#00#"+today.String(), sealed[25:27])); res.Rejected != 2 {
			t.Fatalf("unknown pool %d: %+v", i, res)
		}
		if i < 2 {
			release(0, fmt.Sprintf("%d s after the last growth", 20*(i+1)))
		}
	}
	release(1, "a settle after the last growth, duplicates since")

	// A pool growing every 30 s never rests a minute: it goes out
	// settleCap minutes after it could first go (n_min free).
	if res := upload(envelopes(key, sealed[30:41])); res.Accepted != 11 { // 10 + 11: 11 free
		t.Fatalf("upload: %+v", res)
	}
	release(0, "the pool could go just now")
	for i := range 5 {
		clock.set(clock.now().Add(30 * time.Second))
		if res := upload(envelopes(key, sealed[41+i:42+i])); res.Accepted != 1 {
			t.Fatalf("trickle %d: %+v", i, res)
		}
		release(0, fmt.Sprintf("trickle %d, %v after it could go", i, 30*time.Second*time.Duration(i+1)))
	}
	clock.set(clock.now().Add(30 * time.Second))
	if res := upload(envelopes(key, sealed[50:51])); res.Accepted != 1 {
		t.Fatalf("trickle: %+v", res)
	}
	release(1, "settleCap settles after it could go, still growing")
}

// TestDefaultSettle pins the default Settle: a tenth of the period,
// between 1 s and 1 h.
func TestDefaultSettle(t *testing.T) {
	for _, c := range []struct{ period, want time.Duration }{
		{time.Second, time.Second},
		{30 * time.Second, 3 * time.Second},
		{time.Hour, 6 * time.Minute},
		{24 * time.Hour, time.Hour},
	} {
		if got := DefaultSettle(c.period); got != c.want {
			t.Errorf("DefaultSettle(%v) = %v, want %v", c.period, got, c.want)
		}
	}
}
