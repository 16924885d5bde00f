package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/servertest"
)

// The helpers shared with the shuffler's tests.
var (
	openBuiltin    = servertest.OpenBuiltin
	testLogger     = servertest.Logger
	testPlan       = servertest.Plan
	loadTestPlan   = servertest.LoadPlan
	fakeSealed     = servertest.FakeSealed
	today          = servertest.Today
	day            = servertest.Day
	periodKey      = servertest.PeriodKey
	envelopes      = servertest.Envelopes
	krrValues      = servertest.KRRValues
	truth          = servertest.Truth
	sealKRR        = servertest.SealKRR
	sealKRRIn      = servertest.SealKRRIn
	post           = servertest.Post
	getJSON        = servertest.GetJSON
	newServer      = servertest.NewServer
	waitFor        = servertest.WaitFor
	histogramCount = servertest.HistogramCount
	lint           = servertest.Lint
	gathered       = servertest.Gathered
)

type sink = servertest.Sink

// metric is the test plan's k-RR metric.
const metric = "ui/screen"

// todayKey is the pool key of metric for today's period under an epoch
// (the shuffler checks only its form).
var todayKey = periodKey(metric, "00000000000000e1")

// shufflerFixture is a shuffler serving on loopback, forwarding to url.
type shufflerFixture struct {
	s   *shuffler.Shuffler
	srv *httptest.Server
	url string // POST /v1/reports
}

func newShufflerFixture(t testing.TB, o shuffler.Options) *shufflerFixture {
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
	s, err := shuffler.Open(context.Background(), o)
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

// setBeforeCommit sets c's store hook that runs inside the ingest
// transaction before the commit.
func setBeforeCommit(c *Collector, f func()) {
	switch st := c.st.(type) {
	case *sqliteStore:
		st.beforeCommit = f
	case *pgStore:
		st.beforeCommit = f
	}
}

// rawExec runs a statement written for SQLite (? placeholders) on c's
// store, whichever it is.
func rawExec(t testing.TB, c *Collector, q string, args ...any) (any, error) {
	t.Helper()
	switch st := c.st.(type) {
	case *sqliteStore:
		return st.db.W.Exec(q, args...)
	case *pgStore:
		n := 0
		q = regexp.MustCompile(`\?`).ReplaceAllStringFunc(q, func(string) string { n++; return fmt.Sprintf("$%d", n) })
		return st.pool.Exec(context.Background(), q, args...)
	}
	t.Fatalf("unknown store %T", c.st)
	return nil, nil
}
