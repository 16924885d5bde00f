package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/builtin"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// openBuiltin is a plan.Opener over the built-in plugins.
func openBuiltin(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
	return builtin.Open(ctx, name, cfg)
}

// testLogger logs to the test's output when -v is given.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testPlan returns testdata/plan.yaml with n_min = nMin and every metric's
// eps0 set to 2 by hand (no calibration, to keep tests fast): a
// calibrated-looking plan whose guarantee the tests do not rely on.
func testPlan(t testing.TB, nMin int) *plan.Plan {
	t.Helper()
	p, err := loadTestPlan(nMin)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func loadTestPlan(nMin int) (*plan.Plan, error) {
	p, err := plan.Load("testdata/plan.yaml")
	if err != nil {
		return nil, err
	}
	p.NMin = nMin
	for i := range p.Metrics {
		m := &p.Metrics[i]
		r, err := openBuiltin(context.Background(), m.Plugin, m.Config())
		if err != nil {
			return nil, err
		}
		d, _ := r.Describe(context.Background())
		m.Version, m.Eps0, m.Delta = d.Version, 2, p.Target.Delta/2
	}
	p.Guarantee = &plan.Guarantee{Eps: 0, Delta: 0, Rule: "set by hand in tests"}
	return p, nil
}

// fakeSealed returns n distinct fake sealed reports (the shuffler never
// opens them): 48 bytes, the index in the first 8.
func fakeSealed(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, MinSealedLen)
		binary.BigEndian.PutUint64(b, uint64(i))
		out[i] = b
	}
	return out
}

// today is the 24-hour reporting period (the test plan's) that the tests
// started in.
var today = report.Period{Start: time.Now().Unix() / 86400 * 86400, Length: 86400}

// periodKey returns the pool key an app tags a report of pool with under
// epoch for today's reporting period (report.PeriodPoolKey).
func periodKey(pool, epoch string) string { return report.PeriodPoolKey(pool, epoch, today) }

// envelopes wraps sealed reports of metric in envelopes with random ids.
func envelopes(metric string, sealed [][]byte) []report.Envelope {
	out := make([]report.Envelope, len(sealed))
	for i, s := range sealed {
		out[i] = report.Envelope{ID: report.NewID(), Metric: metric, Suite: report.SuiteX25519ChaCha, Sealed: s}
	}
	return out
}

// krrValues returns n category values with known counts: value i is
// categories[i % len(weights)] repeated by weight.
func krrValues(n int, seed uint64) []string {
	cats := []string{"home", "home", "home", "search", "search", "settings", "profile", "elsewhere"}
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		out[i] = cats[r.IntN(len(cats))]
	}
	return out
}

// truth counts values per bucket, mapping unknown labels to "other".
func truth(values []string) map[string]int {
	known := map[string]bool{"home": true, "search": true, "settings": true, "profile": true}
	out := map[string]int{}
	for _, v := range values {
		if !known[v] {
			v = "other"
		}
		out[v]++
	}
	return out
}

// sealKRR randomizes values with the plan's k-RR metric (seeded) and
// seals each report to pub with the metric's binding.
func sealKRR(t testing.TB, p *plan.Plan, metric string, pub *report.PublicKey, values []string, seed uint64) [][]byte {
	t.Helper()
	return sealKRRIn(t, p, metric, pub, values, seed, report.Period{})
}

// sealKRRIn is sealKRR for reports of period.
func sealKRRIn(t testing.TB, p *plan.Plan, metric string, pub *report.PublicKey, values []string, seed uint64, period report.Period) [][]byte {
	t.Helper()
	m := p.Metric(metric)
	r, err := krr.New(krr.Options{Categories: m.Categories, Other: m.Other, Rand: rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})})
	if err != nil {
		t.Fatal(err)
	}
	reps, err := r.Randomize(context.Background(), m.Eps0, sdk.Inputs{Categories: values})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Binding(m.Name)
	b.Period = period
	out := make([][]byte, len(reps))
	for i, rep := range reps {
		if out[i], err = report.Seal(pub, b, rep); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// post POSTs body to url and decodes a JSON answer into v (when not nil).
func post(t testing.TB, c *http.Client, url string, body []byte, v any) *http.Response {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
	}
	return resp
}

// getJSON GETs url and decodes the JSON answer into v.
func getJSON(t testing.TB, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
	}
	return resp.StatusCode
}

// newServer serves h on a loopback httptest server with the production
// server settings (ConnContext, recovery).
func newServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	hs := NewHTTPServer(h, testLogger(t))
	srv.Config.Handler = hs.Handler
	srv.Config.ConnContext = hs.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// sink is a fake collector: it records every batch delivered to it and
// answers with status() (200 by default).
type sink struct {
	mu      sync.Mutex
	batches []report.Batch
	bodies  [][]byte
	calls   int
	status  func(call int) int
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	code := http.StatusOK
	if s.status != nil {
		code = s.status(s.calls)
	}
	if code != http.StatusOK {
		w.WriteHeader(code)
		return
	}
	b, err := report.DecodeBatch(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.batches = append(s.batches, b)
	s.bodies = append(s.bodies, body)
	w.Write([]byte(`{}`))
}

func (s *sink) got() []report.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]report.Batch(nil), s.batches...)
}

// waitFor polls cond every 10 ms until it holds or 30 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shufflerFixture is a shuffler serving on loopback, forwarding to url.
type shufflerFixture struct {
	s   *Shuffler
	srv *httptest.Server
	url string // POST /v1/reports
}

func newShufflerFixture(t testing.TB, o ShufflerOptions) *shufflerFixture {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.RetryMin == 0 {
		o.RetryMin, o.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	}
	s, err := OpenShuffler(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mux := http.NewServeMux()
	s.Register(mux)
	srv := newServer(t, mux)
	return &shufflerFixture{s: s, srv: srv, url: srv.URL + "/v1/reports"}
}

// run runs the shuffler's release and forward loops until the test ends.
func (f *shufflerFixture) run(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.s.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func netListen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
