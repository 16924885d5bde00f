package shuffler

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

const metric = "ui/screen"

// todayKey is the pool key the shuffler tests upload to: what an app tags
// a report of metric with for today's reporting period (report.PeriodPoolKey)
// under an epoch (the shuffler checks only its form).
var todayKey = periodKey(metric, "00000000000000e1")

// sortedCopy returns the sealed reports sorted, to compare multisets.
func sortedCopy(s [][]byte) [][]byte {
	c := slices.Clone(s)
	slices.SortFunc(c, bytes.Compare)
	return c
}

// TestShufflerNeverReleasesBelowNMin: below n_min nothing goes out; while
// the period is open a release leaves n_min pooled (so that later reports
// always have company) and splits what it takes into equal batches of
// n_min to MaxBatch; once the period is closed the rest goes out.
func TestShufflerNeverReleasesBelowNMin(t *testing.T) {
	const nMin = 10
	col := &sink{}
	colSrv := newServer(t, col)
	f := newShufflerFixture(t, Options{Plan: testPlan(t, nMin), Collector: colSrv.URL, MaxBatch: 2*nMin - 1, Settle: -1})
	ctx := context.Background()
	sealed := fakeSealed(41)

	// 9 pooled: below n_min, nothing goes out.
	var res UploadResult
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, sealed[:9])), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 9 {
		t.Fatalf("upload: %d %+v", resp.StatusCode, res)
	}
	if n, err := f.s.Release(ctx); err != nil || n != 0 {
		t.Fatalf("Release with 9 < n_min pooled = %d, %v; want 0", n, err)
	}
	// One more: exactly n_min, kept while the period is open.
	post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, sealed[9:10])), nil)
	if n, err := f.s.Release(ctx); err != nil || n != 0 {
		t.Fatalf("Release with n_min pooled = %d, %v; want 0 (n_min stay pooled)", n, err)
	}
	// 31 more with MaxBatch 19: the 31 above n_min go in two equal
	// batches (16, 15; 19 + 12 would make one below n_min).
	post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, sealed[10:41])), nil)
	if n, err := f.s.Release(ctx); err != nil || n != 2 {
		t.Fatalf("Release with 41 pooled = %d, %v; want 2", n, err)
	}
	st, err := f.s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[todayKey] != nMin || st.Outgoing != 2 {
		t.Fatalf("after releases: pool %d, outgoing %d; want %d and 2", st.Pools[todayKey], st.Outgoing, nMin)
	}
	// The period closed: the last n_min go.
	f.closeAll(t)
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release of the closed period = %d, %v; want 1", n, err)
	}
	f.run(t)
	waitFor(t, "3 batches delivered", func() bool { return len(col.Got()) == 3 })
	var all [][]byte
	for _, b := range col.Got() {
		if len(b.Sealed) < nMin || len(b.Sealed) > 2*nMin-1 {
			t.Errorf("batch %s of %d reports, outside [n_min = %d, MaxBatch = %d]", b.ID, len(b.Sealed), nMin, 2*nMin-1)
		}
		if b.Metric != todayKey || b.Suite != report.SuiteX25519ChaCha {
			t.Errorf("batch metric %q suite %d", b.Metric, b.Suite)
		}
		all = append(all, b.Sealed...)
	}
	if want := sortedCopy(sealed[:41]); !slices.EqualFunc(sortedCopy(all), want, bytes.Equal) {
		t.Errorf("delivered reports are not the 41 released ones")
	}
	waitFor(t, "outgoing emptied", func() bool {
		st, _ := f.s.Stats(ctx)
		return st.Outgoing == 0
	})
}

// TestShufflerBatchCarriesNoIDs checks that a forwarded batch holds the
// sealed bytes and nothing of the envelopes' ids.
func TestShufflerBatchCarriesNoIDs(t *testing.T) {
	col := &sink{}
	colSrv := newServer(t, col)
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 5), Collector: colSrv.URL})
	envs := envelopes(todayKey, fakeSealed(5))
	post(t, nil, f.url, report.EncodeEnvelopes(envs), nil)
	f.closeAll(t)
	f.run(t)
	waitFor(t, "batch delivered", func() bool { return len(col.Got()) == 1 })
	body := col.Bodies()[0]
	for _, e := range envs {
		if bytes.Contains(body, e.ID[:]) {
			t.Fatalf("batch body contains envelope id %s", e.ID)
		}
	}
}

func TestShufflerReleasesInRandomOrder(t *testing.T) {
	ctx := context.Background()
	t.Run("seeded", func(t *testing.T) {
		// With an injected source the release order is exactly Shuffle's
		// order of the pool (insertion order) under that source: the
		// shuffler uses Shuffle, whose uniformity is tested on its own.
		col := &sink{}
		colSrv := newServer(t, col)
		seed := [32]byte{42}
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 20), Collector: colSrv.URL, Rand: rand.NewChaCha8(seed)})
		sealed := fakeSealed(20)
		post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, sealed)), nil)
		f.closeAll(t)
		if n, err := f.s.Release(ctx); err != nil || n != 1 {
			t.Fatalf("Release = %d, %v", n, err)
		}
		want := slices.Clone(sealed)
		Shuffle(rand.NewChaCha8(seed), want)
		f.run(t)
		waitFor(t, "batch delivered", func() bool { return len(col.Got()) == 1 })
		if !slices.EqualFunc(col.Got()[0].Sealed, want, bytes.Equal) {
			t.Fatal("release order is not Shuffle's order under the injected source")
		}
	})
	t.Run("crypto", func(t *testing.T) {
		// With the default source, 56 reports come out in insertion
		// order with probability 1/56!, never in practice; and the
		// positions of the first report over 199 releases of 8 spread
		// over all 8 places (each place missed with probability
		// (7/8)^199 < 1e-11). The period stays open: each release
		// leaves n_min = 8 pooled, and takes the 8 pooled before.
		col := &sink{}
		colSrv := newServer(t, col)
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 8), Collector: colSrv.URL, Settle: -1})
		sealed := fakeSealed(64)
		post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, sealed)), nil)
		if _, err := f.s.Release(ctx); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for range 200 {
			post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(8))), nil)
			if _, err := f.s.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		f.run(t)
		waitFor(t, "201 batches delivered", func() bool { return len(col.Got()) == 201 })
		got := col.Got()
		if len(got[0].Sealed) != 56 || slices.EqualFunc(got[0].Sealed, sealed[:56], bytes.Equal) {
			t.Fatalf("the first batch of %d reports: want 56, not in insertion order", len(got[0].Sealed))
		}
		for _, b := range got[2:] {
			for i, s := range b.Sealed {
				if bytes.Equal(s, fakeSealed(1)[0]) {
					seen[i] = true
				}
			}
		}
		if len(seen) != 8 {
			t.Fatalf("first report seen at positions %v only", seen)
		}
	})
}

func TestShufflerDedupesRetries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Plan: testPlan(t, 1000), Dir: dir, Collector: "http://127.0.0.1:1"}
	f := newShufflerFixture(t, o)
	envs := envelopes(todayKey, fakeSealed(10))
	body := report.EncodeEnvelopes(envs)
	var first, second UploadResult
	post(t, nil, f.url, body, &first)
	post(t, nil, f.url, body, &second)
	if !reflect.DeepEqual(first, UploadResult{Accepted: 10}) || !reflect.DeepEqual(second, UploadResult{Duplicates: 10}) {
		t.Fatalf("first upload %+v, retry %+v", first, second)
	}
	// A duplicate inside one upload, next to a new report.
	var mixed UploadResult
	extra := envelopes(todayKey, fakeSealed(1))
	post(t, nil, f.url, report.EncodeEnvelopes([]report.Envelope{envs[0], extra[0], extra[0]}), &mixed)
	if !reflect.DeepEqual(mixed, UploadResult{Accepted: 1, Duplicates: 2}) {
		t.Fatalf("mixed upload %+v", mixed)
	}
	// The seen ids survive a restart.
	f.s.Close()
	f.srv.Close()
	g := newShufflerFixture(t, o)
	var again UploadResult
	post(t, nil, g.url, body, &again)
	if !reflect.DeepEqual(again, UploadResult{Duplicates: 10}) {
		t.Fatalf("retry after restart %+v", again)
	}
	st, err := g.s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[todayKey] != 11 {
		t.Fatalf("pool holds %d reports, want 11", st.Pools[todayKey])
	}
}

// TestDedupRetention checks the bounded retention of seen ids: of
// periods whose pools have closed, at least DedupWindow of the most recent
// ids are remembered, at most 25% more. (Ids of open periods are all kept:
// TestShufflerDedupWithinPeriod.) Each report here is of its own hourly
// period, closed by the time of the next.
func TestDedupRetention(t *testing.T) {
	const window = 8
	p := testPlan(t, 1000)
	p.Period = "1h"
	clock := &testClock{}
	f := newShufflerFixture(t, Options{Plan: p, Collector: "http://127.0.0.1:1", DedupWindow: window, Now: clock.now})
	remembered := func(e report.Envelope) bool {
		var n int
		if err := sqliteDB(t, f.s).R.QueryRow(`SELECT COUNT(*) FROM seen WHERE h = ?`, f.s.idHash(e.ID)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	var all []report.Envelope
	for i := range 40 {
		hour := report.Period{Start: today.Start + int64(3*i)*3600, Length: 3600}
		clock.set(time.Unix(hour.Start+60, 0)) // earlier periods are past their grace
		e := envelopes(report.PeriodPoolKey(metric, p.Epoch(), hour), fakeSealed(1))
		all = append(all, e...)
		var res UploadResult
		post(t, nil, f.url, report.EncodeEnvelopes(e), &res)
		if res.Accepted != 1 {
			t.Fatalf("upload %d: %+v", i, res)
		}
		var rows int
		if err := sqliteDB(t, f.s).R.QueryRow(`SELECT COUNT(*) FROM seen`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if want := min(i+1, window); rows < want || rows > window+window/dedupGenerations {
			t.Fatalf("after %d ids: %d remembered, want in [%d, %d]", i+1, rows, want, window+window/dedupGenerations)
		}
	}
	// The most recent window ids are remembered, the oldest forgotten.
	for i, e := range all[len(all)-window:] {
		if !remembered(e) {
			t.Errorf("recent id %d forgotten", i)
		}
	}
	if remembered(all[0]) {
		t.Error("the oldest id is still remembered")
	}
}

func TestShufflerRejectsOversizeAndKeepsServing(t *testing.T) {
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1", MaxBodyBytes: 4 << 10, MaxEnvelopes: 20})
	big := report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(60))) // about 6 KiB
	if len(big) <= 4<<10 {
		t.Fatalf("test body of %d bytes is not over the limit", len(big))
	}
	if resp := post(t, nil, f.url, big, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize body: status %d, want 413", resp.StatusCode)
	}
	// Without a Content-Length the limit still holds (MaxBytesReader).
	req, _ := http.NewRequest(http.MethodPost, f.url, struct{ *bytes.Reader }{bytes.NewReader(big)})
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked oversize body: status %d, want 413", resp.StatusCode)
	}
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(21))), nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("21 envelopes, limit 20: status %d, want 413", resp.StatusCode)
	}
	var res UploadResult
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(20))), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 20 {
		t.Fatalf("upload after the refusals: %d %+v", resp.StatusCode, res)
	}
	st, _ := f.s.Stats(context.Background())
	if st.TooLarge != 3 || st.Accepted != 20 {
		t.Fatalf("stats %+v", st)
	}
}

func TestShufflerValidatesEnvelopes(t *testing.T) {
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1"})
	envs := envelopes(todayKey, fakeSealed(5))
	envs[1].Metric = "no/such/metric"
	envs[2].Suite = 99
	envs[3].Sealed = envs[3].Sealed[:MinSealedLen-1]
	// Pool keys without a period tag: the pool alone, or with an epoch
	// only.
	noPeriod := envelopes(metric, fakeSealed(2))
	noPeriod[1].Metric = metric + report.PoolKeySep + "00000000000000e1"
	envs = append(envs, noPeriod...)
	var res UploadResult
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if res.Accepted != 2 || res.Rejected != 5 || len(res.Errors) != 5 || res.Errors[0].Index != 1 {
		t.Fatalf("result %+v", res)
	}
	for _, e := range res.Errors[3:] {
		if !strings.Contains(e.Error, "no reporting period") {
			t.Errorf("envelope %d: error %q, want it to name the missing reporting period", e.Index, e.Error)
		}
	}
	for i, code := range []string{"unknown_pool", "unsupported_suite", "too_short", "no_period", "no_period"} {
		if res.Errors[i].Code != code {
			t.Errorf("envelope %d: code %q, want %q", res.Errors[i].Index, res.Errors[i].Code, code)
		}
	}
	// Bad bytes: 400, and the shuffler keeps serving.
	for _, body := range [][]byte{[]byte("garbage"), report.EncodeEnvelopes(envs)[:50]} {
		if resp := post(t, nil, f.url, body, nil); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad body: status %d, want 400", resp.StatusCode)
		}
	}
	resp, err := http.Post(f.url, "text/plain", bytes.NewReader(report.EncodeEnvelopes(envs)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: status %d, want 415", resp.StatusCode)
	}
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(1))), &res); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("good upload after bad ones: status %d", resp.StatusCode)
	}
}

func TestShufflerRateLimitPerConnection(t *testing.T) {
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1", ConnRate: 1, MaxEnvelopes: 10})
	newClient := func() *http.Client { return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} }
	a := newClient()
	if resp := post(t, a, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(10))), nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first upload: %d", resp.StatusCode)
	}
	resp := post(t, a, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(5))), nil)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second upload on the same connection: %d, want 429", resp.StatusCode)
	}
	// 5 envelopes at 1 per second: about 5 s to wait.
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 4 || ra > 6 {
		t.Fatalf("Retry-After %q, want about 5", resp.Header.Get("Retry-After"))
	}
	// Another connection has its own budget.
	if resp := post(t, newClient(), f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(10))), nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload on a new connection: %d", resp.StatusCode)
	}
}

func TestShufflerForwardRetriesAndSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The collector fails the first three attempts.
	col := &sink{Status: func(call int) int {
		if call <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	colSrv := newServer(t, col)
	p := testPlan(t, 5)

	// First run: release with the collector unreachable, then stop.
	down := Options{Plan: p, Dir: dir, Collector: "http://127.0.0.1:1"}
	f := newShufflerFixture(t, down)
	post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(5))), nil)
	f.closeAll(t)
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	f.s.Close()
	f.srv.Close()

	// Second run, same directory: the batch goes out on start and is
	// retried until acknowledged.
	g := newShufflerFixture(t, Options{Plan: p, Dir: dir, Collector: colSrv.URL})
	g.run(t)
	waitFor(t, "batch acknowledged", func() bool {
		st, _ := g.s.Stats(ctx)
		return st.BatchesForwarded == 1 && st.Outgoing == 0
	})
	if got := col.Got(); len(got) != 1 || len(got[0].Sealed) != 5 {
		t.Fatalf("collector got %d batches", len(got))
	}
	if st, _ := g.s.Stats(ctx); st.ForwardFailures < 3 {
		t.Fatalf("forward failures %d, want >= 3", st.ForwardFailures)
	}
}

// TestShufflerConcurrentUploads checks the group commit against the
// sequential truth: N clients behind a barrier upload disjoint reports and
// retries; every report is pooled once.
func TestShufflerConcurrentUploads(t *testing.T) {
	const clients, uploads, per = 16, 10, 25
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1_000_000), Collector: "http://127.0.0.1:1"})
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total UploadResult
	for range clients {
		wg.Go(func() {
			<-start
			c := &http.Client{Transport: &http.Transport{}}
			for range uploads {
				body := report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(per)))
				for range 2 { // the second is a retry
					var res UploadResult
					resp := post(t, c, f.url, body, &res)
					if resp.StatusCode != http.StatusAccepted {
						t.Errorf("status %d", resp.StatusCode)
					}
					mu.Lock()
					total.Accepted += res.Accepted
					total.Duplicates += res.Duplicates
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	want := clients * uploads * per
	if total.Accepted != want || total.Duplicates != want {
		t.Fatalf("accepted %d, duplicates %d; want %d each", total.Accepted, total.Duplicates, want)
	}
	st, err := f.s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[todayKey] != int64(want) || st.Accepted != int64(want) {
		t.Fatalf("pool %d, counter %d; want %d", st.Pools[todayKey], st.Accepted, want)
	}
}
