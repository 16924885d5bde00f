package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestMain stops the throwaway PostgreSQL server of TestReplicas, if it
// started one, and removes the blanket binary it built.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	testbuild.Remove()
	os.Exit(code)
}

// replicasPlanYAML is TestReplicas' plan: two k-RR metrics, daily periods,
// a horizon of one period (the first collector calibrates it in about a
// second) and a small n_min, so that the fleet fills a few dozen batches.
const replicasPlanYAML = `version: 1
target: {eps: 1, delta: 1.0e-6}
n_min: 100
period: 24h
horizon: 1
travel: separate
metrics:
  - name: replicas/screen
    plugin: krr
    categories: [home, search, settings, profile, inbox, compose]
  - name: replicas/theme
    plugin: krr
    categories: [light, dark, auto]
`

// replicasWeights are the true distributions of the apps' values, by
// metric, in the plan's order of categories.
var replicasWeights = map[string][]float64{
	"replicas/screen": {0.30, 0.25, 0.15, 0.12, 0.10, 0.08},
	"replicas/theme":  {0.50, 0.30, 0.20},
}

const (
	// replicasApps is the number of apps of the fleet, each sending one
	// report of each metric.
	replicasApps = 1200
	// replicasWorkers is the number of apps running at once.
	replicasWorkers = 8
	// replicasLoseAck: every replicasLoseAck-th acknowledgement of an
	// upload is lost on its way to the app, which sends the same
	// envelopes again (to the other shuffler).
	replicasLoseAck = 5
	// replicasLoseBatch: every replicasLoseBatch-th acknowledgement of a
	// batch is lost on its way to the shuffler, which delivers the batch
	// again (to the other collector).
	replicasLoseBatch = 3
	// replicasHedgeBatch: every replicasHedgeBatch-th batch is sent to
	// both collectors at once, which ingest it concurrently.
	replicasHedgeBatch = 4
)

// checkUploads checks what the shufflers answered the apps: every report
// id accepted exactly once, by an answer or by a commit whose answer was
// lost with a killed shuffler (its retry then answered as duplicates), and
// every exact retry sent to the other shuffler answered as duplicates.
func checkUploads(t *testing.T, up *appTransport) {
	t.Helper()
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, e := range up.errs {
		t.Error(e)
	}
	if up.accepted+up.acceptedUnanswered != len(up.ackedBy) {
		t.Errorf("the shufflers accepted %d reports over all acknowledgements and %d in commits whose answer was lost, for %d distinct ids: an id was accepted twice or never",
			up.accepted, up.acceptedUnanswered, len(up.ackedBy))
	}
	if up.rechecks == 0 || up.rechecks < up.lostAcks/2 {
		t.Errorf("%d uploads retried on the other shuffler after %d lost acknowledgements, want most of them", up.rechecks, up.lostAcks)
	}
	if up.failures == 0 {
		t.Error("no upload failed: the killed shuffler was not exercised")
	}
	t.Logf("uploads: %d reports acknowledged, %d acknowledgements lost, %d exact retries answered as duplicates by the other shuffler, %d uploads failed (retried), %d reports accepted by a commit whose answer was lost (the retry a duplicate)",
		len(up.ackedBy), up.lostAcks, up.rechecks, up.failures, up.acceptedUnanswered)
}

// checkBalancer checks what the collectors answered the shufflers: every
// batch counted by exactly one answer (also when both collectors ingested
// it at once) or, once, by a commit whose answer was lost with a killed
// collector (then answered as a duplicate when delivered again), every
// batch whose answer was lost delivered again and answered as a
// duplicate, and no batch refused or failed. It returns the ids of the
// batches counted.
func checkBalancer(t *testing.T, lb *collectorBalancer) map[string]bool {
	t.Helper()
	tl := lb.tally()
	counted, dups, lost := tl.counted, tl.dups, tl.lost
	for status, n := range tl.refused {
		t.Errorf("%d answers to batches with status %d (0: unreadable), want 200", n, status)
	}
	if tl.hedged == 0 {
		t.Error("no batch was sent to both collectors at once: concurrent ingests were not exercised")
	}
	ids := map[string]bool{}
	for id, n := range counted {
		ids[id] = true
		if n != 1 {
			t.Errorf("batch %s was counted by %d acknowledgements, want 1", id, n)
		}
	}
	unansweredCounts := 0
	for id := range dups {
		switch {
		case counted[id] > 0:
		case tl.unanswered[id]:
			// Committed by a collector killed before it answered.
			ids[id] = true
			unansweredCounts++
		default:
			t.Errorf("batch %s was answered as a duplicate, never counted by an answer nor sent without one", id)
		}
	}
	for id := range lost {
		if counted[id] == 0 {
			t.Errorf("batch %s: its acknowledgement was lost, yet no acknowledgement counted it", id)
		}
		if dups[id] == 0 {
			t.Errorf("batch %s: its acknowledgement was lost, yet it was never delivered again as a duplicate", id)
		}
	}
	if len(lost) == 0 {
		t.Error("no batch acknowledgement was lost: redelivery was not exercised")
	}
	// The outage spans a fifth of the fleet (about 500 reports, 5
	// batches), which the balancer sends to the collectors in turn.
	if tl.failovers == 0 {
		t.Error("no request failed over from the killed collector: its kill was not exercised")
	}
	t.Logf("batches: %d counted, %d acknowledgements lost, %d sent to both collectors at once, %d duplicate deliveries, %d requests failed over to the other collector, %d counted by a commit whose answer was lost (the redelivery a duplicate)",
		len(counted), len(lost), tl.hedged, sumValues(dups), tl.failovers, unansweredCounts)
	return ids
}

// checkCollectors checks both collectors' estimates: the same answer from
// each, every acknowledged report counted once, no batch below n_min, and
// each category's count estimate near the truth.
func checkCollectors(ctx context.Context, t *testing.T, pl *plan.Plan, col []*replica, acked map[string]int64,
	truth map[string]map[string]int64, period int64, batchIDs map[string]bool) {
	t.Helper()
	start := pl.PeriodStart(period)
	// The z-test's threshold: each category's estimate minus its true
	// count, over the estimator's standard deviation at the true count
	// (ldp.Pure.Variance, Wang et al. 2017), is a sum of ~1300 independent
	// bounded terms, close to standard normal. With a two-sided normal
	// tail of falseFailure/items per category, a correct run fails with
	// probability falseFailure (1e-6) over all items by the union bound
	// (|z| <= 5.3 for the plan's 9 categories).
	items := 0
	for _, m := range pl.Metrics {
		items += len(m.Categories)
	}
	zMax := math.Sqrt2 * math.Erfcinv(falseFailure/float64(items))
	seen := map[string]bool{}
	outside, conf := 0, 0.0
	// The bodies hold the horizon guarantee too: the replicas must state
	// it to the last digit (issue 29), whichever computed what before.
	for _, m := range pl.Metrics {
		var bodies [2][]byte
		for i, c := range col {
			if err := servertest.FetchBody(ctx, c.url+"/v1/metrics/"+m.Name, &bodies[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(bodies[0], bodies[1]) {
			t.Errorf("%s: the collectors answer differently:\n%s:\n%s\n%s:\n%s", m.Name, col[0].name, bodies[0], col[1].name, bodies[1])
		}
		var d collector.MetricDetail
		if err := json.Unmarshal(bodies[1], &d); err != nil {
			t.Fatal(err)
		}
		var n, malformed int64
		var est *collector.PeriodEstimate
		for i, p := range d.Periods {
			n += p.N
			malformed += p.Malformed
			var inBatches int64
			for _, b := range p.BatchList {
				if b.N+b.Malformed < int64(pl.NMin) {
					t.Errorf("%s: batch %s holds %d reports (%d malformed), below n_min = %d", m.Name, b.ID, b.N+b.Malformed, b.Malformed, pl.NMin)
				}
				if seen[b.ID] {
					t.Errorf("%s: batch %s listed twice", m.Name, b.ID)
				}
				seen[b.ID] = true
				inBatches += b.N
			}
			if inBatches != p.N {
				t.Errorf("%s: the period's batches hold %d valid reports, its statistic %d", m.Name, inBatches, p.N)
			}
			if p.Start.Equal(start) {
				est = &d.Periods[i]
			}
		}
		switch {
		case n > acked[m.Name]:
			t.Errorf("%s: %d valid reports counted, %d acknowledged: some counted twice", m.Name, n, acked[m.Name])
		case n < acked[m.Name]:
			t.Errorf("%s: %d valid reports counted, %d acknowledged: some lost", m.Name, n, acked[m.Name])
		}
		if malformed != 0 {
			t.Errorf("%s: %d malformed reports, want none", m.Name, malformed)
		}
		if len(d.Periods) != 1 || est == nil {
			t.Errorf("%s: %d periods, want the one of %s", m.Name, len(d.Periods), start)
			continue
		}
		if est.EstimateError != "" {
			t.Errorf("%s: no estimate: %s", m.Name, est.EstimateError)
			continue
		}
		r, err := krr.New(krr.Options{Categories: m.Categories})
		if err != nil {
			t.Fatal(err)
		}
		pure, conf0 := r.Pure(est.Eps0), est.Confidence
		conf = conf0
		for _, e := range est.Estimates {
			nv := float64(truth[m.Name][e.Label])
			z := (e.Value - nv) / math.Sqrt(pure.Variance(float64(est.N), nv))
			if math.Abs(z) > zMax || math.IsNaN(z) {
				t.Errorf("%s %q: estimate %.1f, true count %.0f: z = %.2f, beyond %.2f", m.Name, e.Label, e.Value, nv, z, zMax)
			}
			if nv < e.Lo || nv > e.Hi {
				outside++
			}
		}
		t.Logf("%s: %d reports in %d batches, eps0 %.3f; estimates %v; truth %v", m.Name, n, est.Batches, est.Eps0, estimateValues(est.Estimates), truth[m.Name])
	}
	// The intervals' misses, treated as independent, at the same
	// false-failure rate (binomialAllowance, report.go).
	if allowed := binomialAllowance(items, 1-conf, falseFailure); outside > allowed {
		t.Errorf("%d of %d true counts outside their %g%% intervals, at most %d allowed", outside, items, 100*conf, allowed)
	}
	for id := range batchIDs {
		if !seen[id] {
			t.Errorf("batch %s was acknowledged as counted but is in no metric's batch list", id)
		}
	}
	for id := range seen {
		if !batchIDs[id] {
			t.Errorf("batch %s is listed but no acknowledgement counted it", id)
		}
	}
}

// appValue is one value an app records.
type appValue struct {
	metric, category string
}

// weighted returns an index drawn with the weights w (summing to 1).
func weighted(rng *rand.Rand, w []float64) int {
	u := rng.Float64()
	for i, p := range w {
		if u < p {
			return i
		}
		u -= p
	}
	return len(w) - 1
}

// runApp runs one app on the SDK: a Provider on a fresh outbox records
// values at recordAt; a second Provider on the same outbox, started at
// closeAt (after the period's end), closes the period, sealing one report
// per metric under the plan, and uploads them through rt in Flush,
// retrying as the outbox does until a shuffler acknowledges them.
func runApp(ctx context.Context, pl *plan.Plan, cache *client.RandomizerCache, rt http.RoundTripper, values []appValue, recordAt, closeAt time.Time) (client.Stats, error) {
	ob := client.NewMemoryOutbox()
	defer ob.Close()
	cfg := client.Config{
		Mode:        client.ModeOn,
		Endpoint:    "http://shufflers.test", // rt routes it
		Plan:        pl,
		MaxEps0:     8,
		Outbox:      ob,
		Randomizers: cache,
		HTTPClient:  &http.Client{Transport: rt, Timeout: 30 * time.Second},
		UploadDelay: time.Hour, // upload in Flush only
		RetryMin:    20 * time.Millisecond,
		RetryMax:    500 * time.Millisecond,
		Now:         func() time.Time { return recordAt },
	}
	p, err := client.NewProvider(ctx, cfg)
	if err != nil {
		return client.Stats{}, err
	}
	m := p.Meter("")
	for _, v := range values {
		if err := m.Categorical(v.metric).Record(ctx, v.category); err != nil {
			p.Shutdown(ctx)
			return client.Stats{}, err
		}
	}
	if err := p.Shutdown(ctx); err != nil {
		return client.Stats{}, err
	}
	cfg.Now = func() time.Time { return closeAt }
	p, err = client.NewProvider(ctx, cfg)
	if err != nil {
		return client.Stats{}, err
	}
	if err := p.Flush(ctx); err != nil { // uploads, retrying; Shutdown makes one attempt
		p.Shutdown(ctx)
		return client.Stats{}, err
	}
	if err := p.Shutdown(ctx); err != nil {
		return client.Stats{}, err
	}
	st := p.Stats()
	if st.Messages != int64(len(values)) || st.Uploaded != st.Messages || st.Rejected != 0 || st.Dropped != 0 {
		return st, fmt.Errorf("%d values recorded; stats %+v", len(values), st)
	}
	return st, nil
}

// blanketBin returns a blanket binary (not race-instrumented) built from
// cmd/blanket, or $BLANKET_BIN when set.
func blanketBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BLANKET_BIN"); bin != "" {
		return bin
	}
	return testbuild.Binary(t, "github.com/blanket-dp/blanket/cmd/blanket")
}

// replica is a blanket server process.
type replica struct {
	name, logPath string
	cmd           *exec.Cmd
	url, admin    string        // its listeners
	done          chan struct{} // closed when it has exited
}

// startReplica runs bin with args, its output in dir/name.log, waits
// until it listens and answers GET /readyz, appends it to all and kills
// it when t ends.
func startReplica(ctx context.Context, t *testing.T, all *[]*replica, bin, dir, name string, args ...string) *replica {
	t.Helper()
	r := &replica{name: name, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	urls := make(chan [2]string, 1)
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stderr = logf
	r.cmd.Stdout = &listenWatcher{w: logf, urls: urls}
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	*all = append(*all, r)
	go func() {
		r.cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	t.Cleanup(r.kill)
	select {
	case u := <-urls:
		r.url, r.admin = u[0], u[1]
	case <-r.done:
		t.Fatalf("%s exited at start:\n%s", name, r.log())
	case <-ctx.Done():
		t.Fatalf("%s did not start: %v", name, ctx.Err())
	}
	servertest.Poll(ctx, t, 30*time.Second, name+" ready", func() (bool, string) {
		var b []byte
		err := servertest.FetchBody(ctx, r.url+"/readyz", &b)
		return err == nil, fmt.Sprint(err)
	})
	return r
}

// kill SIGKILLs r and waits until it has exited.
func (r *replica) kill() {
	r.cmd.Process.Kill() // fails only when it has exited
	<-r.done
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.logPath)
	return string(b)
}

// dumpLog logs the end of r's output.
func (r *replica) dumpLog(t *testing.T) {
	const tail = 48 << 10
	s := r.log()
	if len(s) > tail {
		s = "…" + s[len(s)-tail:]
	}
	t.Logf("%s (%s):\n%s", r.name, r.logPath, s)
}

// listenWatcher passes a blanket server's stdout to w and sends its
// listeners' URLs ("blanket ROLE listening on URL", then "blanket ROLE
// admin listening on URL") to urls once it has printed both.
type listenWatcher struct {
	w    io.Writer
	urls chan<- [2]string
	line []byte
	got  [2]string
	sent bool
}

func (l *listenWatcher) Write(p []byte) (int, error) {
	l.w.Write(p)
	l.line = append(l.line, p...)
	for {
		i := bytes.IndexByte(l.line, '\n')
		if i < 0 {
			break
		}
		f := strings.Fields(string(l.line[:i]))
		l.line = l.line[i+1:]
		if len(f) >= 5 && f[0] == "blanket" && f[len(f)-3] == "listening" {
			if f[len(f)-4] == "admin" {
				l.got[1] = f[len(f)-1]
			} else {
				l.got[0] = f[len(f)-1]
			}
		}
		if !l.sent && l.got[0] != "" && l.got[1] != "" {
			l.urls <- l.got
			l.sent = true
		}
	}
	return len(p), nil
}

// samePlan returns the plan both collectors serve, failing t unless they
// serve the same bytes.
func samePlan(ctx context.Context, t *testing.T, a, b *replica) []byte {
	t.Helper()
	var pa, pb []byte
	if err := servertest.FetchBody(ctx, a.url+"/v1/plan", &pa); err != nil {
		t.Fatal(err)
	}
	if err := servertest.FetchBody(ctx, b.url+"/v1/plan", &pb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pa, pb) {
		t.Fatalf("the collectors serve different plans:\n%s: %s\n%s: %s", a.name, pa, b.name, pb)
	}
	return pa
}

// testHTTP is the test's own client for GETs.
var testHTTP = &http.Client{Timeout: 10 * time.Second}

// postJSONCtx POSTs an empty body to url and decodes its JSON answer
// into v; an answer other than 200 is an error.
func postJSONCtx(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %.300s", url, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func estimateValues(es []collector.ItemEstimate) map[string]float64 {
	out := make(map[string]float64, len(es))
	for _, e := range es {
		out[e.Label] = math.Round(e.Value*10) / 10
	}
	return out
}
