package shuffler

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// TestShufflerReleasesEveryAcknowledgedReport replays, with the
// shuffler's default options (only the clock is injected), the shape of
// the chaos run of issue 23: a period's burst of reports, then stragglers
// after a release, and the shuffler restarted on its store between a
// release and the forwarding of its batches, twice. On PostgreSQL two
// replicas share the store, take the uploads in turn and both release; the
// restarts are of one of them. Every report acknowledged for a pool whose
// total reached n_min must reach the collector once, in a batch of at
// least n_min; a pool that received fewer than n_min in all is the only
// loss, and is counted in blanket_shuffler_reports_expired_total.
//
// Before issue 23 a pool was released whole as soon as it held n_min: the
// stragglers after the release started a pool that never reached n_min
// and was deleted at the deadline although every one of them had been
// acknowledged (Stats.Expired counted them; this test failed).
func TestShufflerReleasesEveryAcknowledgedReport(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { releasesEveryAcknowledged(t, kind) })
	}
}

func releasesEveryAcknowledged(t *testing.T, kind string) {
	const nMin = 20
	ctx := context.Background()
	p := testPlan(t, nMin)
	ep := p.Epoch()
	col := &sink{}
	colURL := newServer(t, col).URL
	dir := t.TempDir()
	store := servertest.StoreOf(t, kind, dir)
	// The periods: day 1 gets a burst and stragglers (2.5 n_min, then a
	// few), day 2 fewer than n_min in all, and day 1 of the other metric
	// exactly n_min in two parts across a restart.
	burst := report.PeriodPoolKey(metric, ep, day(1))
	few := report.PeriodPoolKey(metric, ep, day(2))
	exact := report.PeriodPoolKey("net/latency_ms", ep, day(1))
	clock := &testClock{}
	clock.set(time.Unix(day(1).End(), 0).Add(10 * time.Minute)) // apps seal a period once it has ended

	// replica is one shuffler process with its upload server; restart
	// closes it (its outgoing batches unsent) and opens another on the
	// same store (SQLite: the file in its directory), as a SIGKILL and a
	// restart would leave it.
	type replica struct {
		s   *Shuffler
		url string
		reg *prometheus.Registry
	}
	open := func(i int) *replica {
		t.Helper()
		reg := prometheus.NewRegistry()
		s, err := Open(ctx, Options{Plan: testPlan(t, nMin), Dir: fmt.Sprintf("%s/%d", dir, i), Store: store,
			Collector: colURL, Logger: testLogger(t), Now: clock.now, Registerer: reg, PeriodGrace: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return &replica{s: s, url: serveUploads(t, s), reg: reg}
	}
	rs := []*replica{open(0)}
	if kind == "postgres" {
		rs = append(rs, open(1))
	}
	// expired sums blanket_shuffler_reports_expired_total over the
	// processes gone.
	var expired float64
	restart := func() {
		t.Helper()
		expired += gathered(t, rs[0].reg, "blanket_shuffler_reports_expired_total")
		if err := rs[0].s.Close(); err != nil {
			t.Fatal(err)
		}
		rs[0] = open(0)
	}
	// tick advances the clock and runs every replica's Release, as Run
	// does every ReleaseInterval.
	tick := func(d time.Duration) {
		t.Helper()
		clock.set(clock.now().Add(d))
		for _, r := range rs {
			r.s.poolDirty.Store(true) // the other replica's uploads
			if _, err := r.s.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	acked := map[string][]string{} // pool key -> acknowledged sealed reports
	next, turn := 0, 0
	upload := func(key string, n int) {
		t.Helper()
		envs := make([]report.Envelope, n)
		for i := range envs {
			envs[i] = report.Envelope{ID: report.NewID(), Metric: key, Suite: report.SuiteX25519ChaCha, Sealed: uniqueSealed(6_000_000, next)}
			next++
		}
		r := rs[turn%len(rs)]
		turn++
		res, err := uploadEnvs(&http.Client{}, r.url, envs)
		if err != nil || res.Accepted != n {
			t.Fatalf("upload of %d to %s: %+v, %v", n, key, res, err)
		}
		for _, e := range envs {
			acked[key] = append(acked[key], string(e.Sealed))
		}
	}

	// The burst: 50 reports of day 1 within seconds, the pools looked at
	// every second, then the time to settle.
	for range 5 {
		upload(burst, 10)
		tick(time.Second)
	}
	upload(exact, 12)
	upload(few, 5)
	tick(2 * time.Hour)
	// Killed after a release, before forwarding it.
	restart()
	// Stragglers over the next hours, fewer than n_min.
	for range 3 {
		upload(burst, 2)
		tick(3 * time.Hour)
	}
	upload(exact, 8)
	upload(few, 7)
	tick(time.Second)
	// Past day 1's deadline (its end and a period of grace), then past
	// day 2's; killed again after the releases, before forwarding.
	clock.set(time.Unix(day(1).End(), 0).Add(24*time.Hour + time.Second))
	tick(0)
	clock.set(time.Unix(day(2).End(), 0).Add(24*time.Hour + time.Second))
	tick(0)
	restart()
	for _, r := range rs {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			r.s.Run(runCtx)
			close(done)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	waitFor(t, "every released batch forwarded", func() bool {
		n, err := rs[0].s.st.outgoingCount(ctx)
		return err == nil && n == 0
	})

	got := map[string][]string{}
	for _, b := range col.Got() {
		if len(b.Sealed) < nMin {
			t.Errorf("batch %s of %s holds %d reports, below n_min = %d", b.ID, b.Metric, len(b.Sealed), nMin)
		}
		for _, s := range b.Sealed {
			got[b.Metric] = append(got[b.Metric], string(s))
		}
	}
	for _, key := range []string{burst, exact} {
		want, have := slices.Clone(acked[key]), slices.Clone(got[key])
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(have, want) {
			t.Errorf("%s: %d reports acknowledged, %d forwarded (%d distinct): every acknowledged report of a pool that reached n_min must be forwarded once",
				key, len(want), len(have), len(slices.Compact(have)))
		}
	}
	if len(got[few]) != 0 {
		t.Errorf("%s: %d reports forwarded from a pool of %d, below n_min", few, len(got[few]), len(acked[few]))
	}
	for _, r := range rs {
		expired += gathered(t, r.reg, "blanket_shuffler_reports_expired_total")
	}
	if want := float64(len(acked[few])); expired != want {
		t.Errorf("blanket_shuffler_reports_expired_total = %v, want %v: the pool of %s, and only it", expired, want, few)
	}
	st, err := rs[0].s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pools) != 0 {
		t.Errorf("reports left pooled: %v", st.Pools)
	}
}

// TestShufflerClosePeriods: POST /v1/pools/close closes the periods of
// pooled reports ending by ?through=, before their deadline: the pool kept
// at n_min goes out whole at the next Release, a pool below n_min is
// deleted and counted, and envelopes of those periods are refused from then
// on; a bad time is refused.
func TestShufflerClosePeriods(t *testing.T) {
	const nMin = 10
	ctx := context.Background()
	f := newShufflerFixture(t, Options{Plan: testPlan(t, nMin), Collector: "http://127.0.0.1:1", Settle: -1})
	mux := http.NewServeMux()
	f.s.RegisterAdmin(mux)
	admin := newServer(t, mux).URL
	other := report.PeriodPoolKey("net/latency_ms", testPlan(t, nMin).Epoch(), today)
	for key, n := range map[string]int{todayKey: 25, other: 4} {
		var res UploadResult
		if post(t, nil, f.url, report.EncodeEnvelopes(envelopes(key, fakeSealed(n))), &res); res.Accepted != n {
			t.Fatalf("upload: %+v", res)
		}
	}
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v; want one batch of 15, n_min kept", n, err)
	}
	if resp := post(t, nil, admin+"/v1/pools/close?through=yesterday", nil, nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad time: status %d, want 400", resp.StatusCode)
	}
	var out ClosedPeriods
	// Before today ends: nothing to close.
	if resp := post(t, nil, admin+"/v1/pools/close?through="+time.Unix(today.Start, 0).UTC().Format(time.RFC3339), nil, &out); resp.StatusCode != http.StatusOK || len(out.Closed) != 0 {
		t.Fatalf("closing before today ends: %d %+v", resp.StatusCode, out)
	}
	// Today has not ended: closing it refuses its later reports, so it
	// needs force=true.
	if resp := post(t, nil, admin+"/v1/pools/close?through="+time.Unix(today.End(), 0).UTC().Format(time.RFC3339), nil, nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("closing today before it ends, without force: status %d, want 400", resp.StatusCode)
	}
	if resp := post(t, nil, admin+"/v1/pools/close?force=true&through="+time.Unix(today.End(), 0).UTC().Format(time.RFC3339), nil, &out); resp.StatusCode != http.StatusOK ||
		len(out.Closed) != 1 || out.Closed[0] != *report.NewPeriodSpan(today) {
		t.Fatalf("closing today: %d %+v", resp.StatusCode, out)
	}
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release after the closing = %d, %v; want the n_min kept", n, err)
	}
	st, err := f.s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pools) != 0 || st.ReportsReleased != 25 || st.Expired != 4 {
		t.Fatalf("after the closing: %+v, want 25 released and 4 expired", st)
	}
	var res UploadResult
	if post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(1))), &res); res.Rejected != 1 || !strings.Contains(res.Errors[0].Error, "closed") {
		t.Fatalf("an envelope of the closed period: %+v, want it refused", res)
	}
}
