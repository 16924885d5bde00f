// Package servertest holds what the shuffler's and the collector's tests
// share: a test plan, fake and real sealed reports, loopback servers and a
// fake collector (Sink). It is imported by tests only.
package servertest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

//go:embed plan.yaml
var planYAML []byte

// OpenBuiltin is a plan.Opener over the built-in plugins.
func OpenBuiltin(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
	return builtin.Open(ctx, name, cfg)
}

// Logger logs to the test's output when -v is given.
func Logger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Plan returns plan.yaml (this package's) with n_min = nMin and every metric's
// eps0 set to 2 by hand (no calibration, to keep tests fast): a
// calibrated-looking plan whose guarantee the tests do not rely on.
func Plan(t testing.TB, nMin int) *plan.Plan {
	t.Helper()
	p, err := LoadPlan(nMin)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// LoadPlan is Plan without a test.
func LoadPlan(nMin int) (*plan.Plan, error) {
	p, err := plan.Parse(planYAML)
	if err != nil {
		return nil, err
	}
	p.NMin = nMin
	for i := range p.Metrics {
		m := &p.Metrics[i]
		r, err := OpenBuiltin(context.Background(), m.Plugin, m.Config())
		if err != nil {
			return nil, err
		}
		d, _ := r.Describe(context.Background())
		m.Version, m.Eps0, m.Delta = d.Version, 2, p.Target.Delta/2
	}
	p.Guarantee = &plan.Guarantee{Eps: 0, Delta: 0, Rule: "set by hand in tests"}
	return p, nil
}

// FakeSealed returns n distinct fake sealed reports (the shuffler never
// opens them): 48 bytes, the index in the first 8.
func FakeSealed(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, report.SealOverhead)
		binary.BigEndian.PutUint64(b, uint64(i))
		out[i] = b
	}
	return out
}

// Today is the 24-hour reporting period (the test plan's) that the tests
// started in.
var Today = report.Period{Start: time.Now().Unix() / 86400 * 86400, Length: 86400}

// Day returns the report.Period of the UTC day i days after 2026-11-01.
func Day(i int) report.Period {
	const d = 86400
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix() + int64(i)*d
	return report.Period{Start: start, Length: d}
}

// PeriodKey returns the pool key an app tags a report of pool with under
// epoch for Today's reporting period (report.PeriodPoolKey).
func PeriodKey(pool, epoch string) string { return report.PeriodPoolKey(pool, epoch, Today) }

// Envelopes wraps sealed reports of metric in Envelopes with random ids.
func Envelopes(metric string, sealed [][]byte) []report.Envelope {
	out := make([]report.Envelope, len(sealed))
	for i, s := range sealed {
		out[i] = report.Envelope{ID: report.NewID(), Metric: metric, Suite: report.SuiteX25519ChaCha, Sealed: s}
	}
	return out
}

// KRRValues returns n category values with known counts: value i is
// categories[i % len(weights)] repeated by weight.
func KRRValues(n int, seed uint64) []string {
	cats := []string{"home", "home", "home", "search", "search", "settings", "profile", "elsewhere"}
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		out[i] = cats[r.IntN(len(cats))]
	}
	return out
}

// Truth counts values per bucket, mapping unknown labels to "other".
func Truth(values []string) map[string]int {
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

// KeyOf returns the public key that seals reports of period in p's key
// schedule, failing the test when p has none for it.
func KeyOf(t testing.TB, p *plan.Plan, period report.Period) *report.PublicKey {
	t.Helper()
	ks, err := p.KeySchedule()
	if err != nil {
		t.Fatal(err)
	}
	k, ok := ks.For(period)
	if !ok {
		t.Fatalf("no key of %+v seals %s", p.CollectorKeys, period)
	}
	return k.Key
}

// SealKRR randomizes values with the plan's k-RR metric (seeded) and
// seals each report to pub with the metric's binding for Today's period.
func SealKRR(t testing.TB, p *plan.Plan, metric string, pub *report.PublicKey, values []string, seed uint64) [][]byte {
	t.Helper()
	return SealKRRIn(t, p, metric, pub, values, seed, Today)
}

// SealKRRIn is SealKRR for reports of period.
func SealKRRIn(t testing.TB, p *plan.Plan, metric string, pub *report.PublicKey, values []string, seed uint64, period report.Period) [][]byte {
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
func Post(t testing.TB, c *http.Client, url string, body []byte, v any) *http.Response {
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

// GetJSON GETs url and decodes the JSON answer into v.
func GetJSON(t testing.TB, url string, v any) int {
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

// NewServer serves h on a loopback httptest server with the production
// server settings (ConnContext, recovery).
func NewServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	hs := httpserver.New(h, Logger(t))
	srv.Config.Handler = hs.Handler
	srv.Config.ConnContext = hs.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// Sink is a fake collector: it records every batch delivered to it and
// answers with status() (200 by default).
type Sink struct {
	mu      sync.Mutex
	batches []report.Batch
	bodies  [][]byte
	calls   int
	// Status answers call number call (from 1); nil answers 200.
	Status func(call int) int
}

// ServeHTTP records a batch and answers Status.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	code := http.StatusOK
	if s.Status != nil {
		code = s.Status(s.calls)
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

// Got returns the batches received so far.
func (s *Sink) Got() []report.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]report.Batch(nil), s.batches...)
}

// Bodies returns the batch bodies received so far.
func (s *Sink) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// CollectorKey returns a fresh collector key: its public half's bytes
// (for plan.NewCollectorKey) and its private half.
func CollectorKey(t testing.TB) ([]byte, *report.PrivateKey) {
	t.Helper()
	priv, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sk, err := report.ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pub, sk
}
