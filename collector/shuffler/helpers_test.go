package shuffler

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/sqlitedb"
)

// The helpers shared with the collector's tests.
var (
	testLogger     = servertest.Logger
	testPlan       = servertest.Plan
	fakeSealed     = servertest.FakeSealed
	today          = servertest.Today
	periodKey      = servertest.PeriodKey
	envelopes      = servertest.Envelopes
	post           = servertest.Post
	newServer      = servertest.NewServer
	waitFor        = servertest.WaitFor
	day            = servertest.Day
	histogramCount = servertest.HistogramCount
	lint           = servertest.Lint
	gathered       = servertest.Gathered
)

type sink = servertest.Sink

// shufflerFixture is a shuffler serving on loopback, forwarding to url.
type shufflerFixture struct {
	s   *Shuffler
	srv *httptest.Server
	url string // POST /v1/reports
}

func newShufflerFixture(t testing.TB, o Options) *shufflerFixture {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Store == "" {
		o.Store = servertest.Store(t, o.Dir)
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.RetryMin == 0 {
		o.RetryMin, o.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	}
	s, err := Open(context.Background(), o)
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

// closeAll closes every period of f's pooled reports (ClosePeriods), so
// that the next Release takes each pool whole, as at its deadline.
func (f *shufflerFixture) closeAll(t testing.TB) {
	t.Helper()
	closeAll(t, f.s)
}

// closeAll closes every period of s's pooled reports, ending up to two
// days from now.
func closeAll(t testing.TB, s *Shuffler) {
	t.Helper()
	if _, err := s.ClosePeriods(context.Background(), time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// sqliteDB returns the SQLite database of s, skipping the test on another
// store (a test of the SQLite store's own tables).
func sqliteDB(t testing.TB, s *Shuffler) *sqlitedb.DB {
	t.Helper()
	st, ok := s.st.(*sqliteStore)
	if !ok {
		t.Skip("a test of the SQLite store")
	}
	return st.db
}

// openSQLiteFile opens the SQLite file of the shuffler in dir directly,
// skipping the test when the fixtures run on PostgreSQL (a test of the
// SQLite store's own tables).
func openSQLiteFile(t testing.TB, dir string) (*sql.DB, error) {
	t.Helper()
	servertest.SQLiteOnly(t)
	return sql.Open("sqlite", filepath.Join(dir, DBFile))
}

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
