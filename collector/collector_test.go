package collector

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

const testToken = "test-token"

// swapHandler serves whatever handler is current: a collector restarted
// on the same data directory keeps its URL.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// collectorFixture is a collector serving on loopback.
type collectorFixture struct {
	c    *Collector
	srv  *httptest.Server
	swap *swapHandler
	dir  string
	p    *plan.Plan
}

func openCollector(t testing.TB, dir string, p *plan.Plan) *Collector {
	t.Helper()
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: dir, Store: servertest.Store(t, dir), Open: openBuiltin, Token: testToken, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCollectorFixture(t testing.TB, p *plan.Plan) *collectorFixture {
	t.Helper()
	f := &collectorFixture{dir: t.TempDir(), p: p, swap: &swapHandler{}}
	f.c = openCollector(t, f.dir, p)
	t.Cleanup(func() { f.c.Close() })
	f.install()
	f.srv = newServer(t, f.swap)
	return f
}

func (f *collectorFixture) install() {
	mux := http.NewServeMux()
	f.c.Register(mux)
	f.swap.set(mux)
}

// restart closes the collector and opens a new one on the same directory,
// behind the same URL.
func (f *collectorFixture) restart(t testing.TB) {
	f.c.Close()
	f.c = openCollector(t, f.dir, f.p)
	t.Cleanup(func() { f.c.Close() })
	f.install()
}

// postBatch delivers a batch body with the token and returns the status
// and the decoded result.
func (f *collectorFixture) postBatch(t testing.TB, body []byte) (int, IngestResult) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/batches", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res IngestResult
	if resp.StatusCode == http.StatusOK {
		if err := jsonDecode(resp.Body, &res); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, res
}

func (f *collectorFixture) metric(t testing.TB, name string) MetricDetail {
	t.Helper()
	var d MetricDetail
	if code := getJSON(t, f.srv.URL+"/v1/metrics/"+name, &d); code != http.StatusOK {
		t.Fatalf("GET metric %s: %d", name, code)
	}
	return d
}

// batchBody returns the body of a batch of sealed reports with pool key
// key.
func batchBody(key string, sealed [][]byte) []byte {
	return report.EncodeBatch(report.Batch{ID: report.NewID(), Metric: key, Suite: report.SuiteX25519ChaCha, Sealed: sealed})
}

// todayBody returns the body of a batch of sealed reports of pool for
// today's period under plan p's epoch (sealKRR's reports).
func todayBody(p *plan.Plan, pool string, sealed [][]byte) []byte {
	return batchBody(report.PeriodPoolKey(pool, p.Epoch(), today), sealed)
}

func TestCollectorIngestsABatchOnce(t *testing.T) {
	p := testPlan(t, 100)
	f := newCollectorFixture(t, p)
	body := todayBody(f.c.Plan(), metric, sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(300, 1), 1))
	code, first := f.postBatch(t, body)
	if code != http.StatusOK || first.Duplicate || first.N != 300 || first.Malformed != 0 || first.Eps == nil {
		t.Fatalf("first delivery: %d %+v", code, first)
	}
	code, second := f.postBatch(t, body)
	if code != http.StatusOK || !second.Duplicate || second.N != 0 {
		t.Fatalf("second delivery: %d %+v", code, second)
	}
	// Also after a restart.
	f.restart(t)
	if code, third := f.postBatch(t, body); code != http.StatusOK || !third.Duplicate {
		t.Fatalf("delivery after restart: %d %+v", code, third)
	}
	d := f.metric(t, metric)
	if len(d.Periods) != 1 || d.Periods[0].N != 300 || d.Periods[0].Batches != 1 || len(d.Periods[0].BatchList) != 1 {
		t.Fatalf("metric after three deliveries: %+v", d)
	}
}

// TestCollectorIngestsConcurrentDuplicates delivers the same batch from
// several goroutines at once: exactly one counts it.
func TestCollectorIngestsConcurrentDuplicates(t *testing.T) {
	f := newCollectorFixture(t, testPlan(t, 100))
	body := todayBody(f.c.Plan(), metric, sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(200, 2), 2))
	const senders = 8
	start := make(chan struct{})
	results := make(chan IngestResult, senders)
	for range senders {
		go func() {
			<-start
			code, res := f.postBatch(t, body)
			if code != http.StatusOK {
				t.Errorf("status %d", code)
			}
			results <- res
		}()
	}
	close(start)
	fresh := 0
	for range senders {
		if r := <-results; !r.Duplicate {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d deliveries counted, want 1", fresh)
	}
	if d := f.metric(t, metric); d.Periods[0].N != 200 || d.Periods[0].Batches != 1 {
		t.Fatalf("metric %+v", d.Periods[0])
	}
}

// TestCollectorCrashBeforeCommit makes the collector die (panic) inside
// the ingest transaction, after the plugin accumulated the batch and the
// rows were written, before the commit; the shuffler keeps retrying, the
// collector restarts on the same directory, and the batch is counted once.
func TestCollectorCrashBeforeCommit(t *testing.T) {
	ctx := context.Background()
	p := testPlan(t, 100)
	f := newCollectorFixture(t, p)
	var crashes atomic.Int64
	setBeforeCommit(f.c, func() {
		crashes.Add(1)
		panic("simulated crash before commit")
	})
	s := newShufflerFixture(t, shuffler.Options{Plan: p, Collector: f.srv.URL, Token: testToken})
	values := krrValues(250, 3)
	post(t, nil, s.url, report.EncodeEnvelopes(envelopes(periodKey(metric, f.c.Epoch()), sealKRRIn(t, f.c.Plan(), metric, f.c.PublicKey(), values, 3, today))), nil)
	closeAll(t, s.s)
	if n, err := s.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	s.run(t)
	waitFor(t, "two crashed attempts", func() bool { return crashes.Load() >= 2 })
	if d := f.metric(t, metric); len(d.Periods) != 0 {
		t.Fatalf("a crashed ingest left data: %+v", d)
	}
	f.restart(t)
	waitFor(t, "batch acknowledged", func() bool {
		st, _ := s.s.Stats(ctx)
		return st.BatchesForwarded == 1
	})
	d := f.metric(t, metric)
	if len(d.Periods) != 1 || d.Periods[0].N != 250 || d.Periods[0].Batches != 1 {
		t.Fatalf("after restart: %+v", d)
	}
}

// TestMain runs a collector child process when asked to (see
// runCollectorChild); otherwise the tests, then removes the binaries they
// built.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runCollectorChild())
	}
	code := pgtest.Main(m)
	testbuild.Remove()
	os.Exit(code)
}

const childEnv = "BLANKET_COLLECTOR_TEST_CHILD"

// runCollectorChild serves a collector on $ADDR over $DIR; with $HANG set
// it prints "COMMITTING" when inside the ingest transaction (every write
// done, not committed) and blocks there until killed.
func runCollectorChild() int {
	p, err := loadTestPlan(1000)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: os.Getenv("DIR"), Store: os.Getenv("STORE"), Open: openBuiltin, Token: testToken})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("HANG") != "" {
		setBeforeCommit(c, func() {
			fmt.Println("COMMITTING")
			select {}
		})
	}
	ln, err := netListen(os.Getenv("ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ADDR", ln.Addr())
	mux := http.NewServeMux()
	c.Register(mux)
	httpserver.New(mux, nil).Serve(ln)
	return 0
}

// child is a collector child process.
type child struct {
	cmd   *exec.Cmd
	addr  string
	lines chan string
}

func startChild(t *testing.T, dir, addr string, hang bool) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "DIR="+dir, "STORE="+servertest.Store(t, dir), "ADDR="+addr)
	if hang {
		cmd.Env = append(cmd.Env, "HANG=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	line := c.expect(t, "ADDR ")
	c.addr = strings.TrimPrefix(line, "ADDR ")
	return c
}

// expect waits for a line starting with prefix.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("child did not print %q", prefix)
		}
	}
}

// TestCollectorSIGKILLDuringIngest kills a collector process with SIGKILL
// inside the ingest transaction of a batch, restarts it on the same data
// directory and address, and checks that the shuffler's retry counts the
// batch exactly once. The batch is of n_min = 1000 reports (each sealed
// once and opened by both processes, which is most of the test's CPU
// under -race); TestCollectorSIGKILLDuringIngestDeep (make audit) sends
// 5000.
func TestCollectorSIGKILLDuringIngest(t *testing.T) {
	sigkillDuringIngest(t, 1000)
}

// sigkillDuringIngest runs TestCollectorSIGKILLDuringIngest with a batch
// of n reports (n >= 1000, the child's n_min).
func sigkillDuringIngest(t *testing.T, n int) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	p := testPlan(t, 1000)
	c1 := startChild(t, dir, "127.0.0.1:0", true)
	var pub plan.Plan
	if code := getJSON(t, "http://"+c1.addr+"/v1/plan", &pub); code != http.StatusOK {
		t.Fatalf("GET /v1/plan: %d", code)
	}
	pk := servertest.KeyOf(t, &pub, today)
	s := newShufflerFixture(t, shuffler.Options{Plan: p, Collector: "http://" + c1.addr, Token: testToken})
	post(t, nil, s.url, report.EncodeEnvelopes(envelopes(periodKey(metric, pub.Epoch()), sealKRRIn(t, &pub, metric, pk, krrValues(n, 4), 4, today))), nil)
	closeAll(t, s.s)
	if k, err := s.s.Release(ctx); err != nil || k != 1 {
		t.Fatalf("Release = %d, %v", k, err)
	}
	s.run(t)
	c1.expect(t, "COMMITTING")
	if err := c1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c1.cmd.Wait()

	c2 := startChild(t, dir, c1.addr, false)
	waitFor(t, "batch acknowledged", func() bool {
		st, _ := s.s.Stats(ctx)
		return st.BatchesForwarded == 1 && st.Outgoing == 0
	})
	var d MetricDetail
	if code := getJSON(t, "http://"+c2.addr+"/v1/metrics/"+metric, &d); code != http.StatusOK {
		t.Fatalf("GET metric: %d", code)
	}
	if len(d.Periods) != 1 || d.Periods[0].N != int64(n) || d.Periods[0].Batches != 1 {
		t.Fatalf("after kill and restart: %+v", d)
	}
}

// TestCollectorDropsBadReports mixes good reports with garbage, reports
// sealed for another metric, another eps0 or another key: the bad ones are
// counted as malformed and the rest is kept.
func TestCollectorDropsBadReports(t *testing.T) {
	p := testPlan(t, 10)
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	good := sealKRR(t, pub, metric, f.c.PublicKey(), krrValues(100, 5), 5)

	garbage := make([]byte, 80)
	rand.Read(garbage)
	m := pub.Metric(metric)
	seal := func(pk *report.PublicKey, b report.Binding, rep []byte) []byte {
		s, err := report.Seal(pk, b, rep)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	right := pub.Binding(m.Name)
	right.Period = today
	otherMetric, otherEps0, otherVersion := right, right, right
	otherMetric.Metric = "net/latency_ms"
	otherEps0.Eps0 = m.Eps0 + 1
	otherVersion.Version = "999"
	_, otherPub, _ := report.GenerateKey()
	otherKey, _ := report.ParsePublicKey(otherPub)
	bad := [][]byte{
		garbage,
		{},
		seal(f.c.PublicKey(), otherMetric, []byte{1}),
		seal(f.c.PublicKey(), otherEps0, []byte{1}),
		seal(f.c.PublicKey(), otherVersion, []byte{1}),
		seal(otherKey, right, []byte{1}),
		seal(f.c.PublicKey(), right, []byte{1, 2, 3, 4}), // opens, wrong length
		seal(f.c.PublicKey(), right, []byte{200}),        // opens, bucket out of range
	}
	code, res := f.postBatch(t, todayBody(pub, metric, append(good, bad...)))
	if code != http.StatusOK || res.N != 100 || res.Malformed != int64(len(bad)) {
		t.Fatalf("status %d, result %+v; want n 100, malformed %d", code, res, len(bad))
	}
	d := f.metric(t, metric)
	if e := d.Periods[0]; e.N != 100 || e.Malformed != int64(len(bad)) || len(e.Estimates) != 5 {
		t.Fatalf("metric %+v", e)
	}
	// A batch of nothing but bad reports is recorded (so it is not
	// retried) with no estimate change.
	code, res = f.postBatch(t, todayBody(pub, metric, append(bad, bad[:2]...)))
	if code != http.StatusOK || res.N != 0 || res.Eps != nil {
		t.Fatalf("all-bad batch: %d %+v", code, res)
	}
	if e := f.metric(t, metric).Periods[0]; e.N != 100 || e.Batches != 2 || e.Malformed != int64(2*len(bad)+2) {
		t.Fatalf("after the all-bad batch: %+v", e)
	}
}

func TestCollectorRefusesBadBatches(t *testing.T) {
	p := testPlan(t, 10)
	f := newCollectorFixture(t, p)
	sealed := sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(10, 6), 6)
	good := todayBody(f.c.Plan(), metric, sealed)
	for _, tc := range []struct {
		name string
		body []byte
		want int
	}{
		{"garbage", []byte("not a batch"), http.StatusBadRequest},
		{"truncated", good[:len(good)-3], http.StatusBadRequest},
		{"trailing", append(append([]byte(nil), good...), 0), http.StatusBadRequest},
		{"malformed period", batchBody(metric+"#"+f.c.Epoch()+"#1+0", sealed), http.StatusBadRequest},
		{"unknown metric", todayBody(f.c.Plan(), "no/such", sealed), http.StatusUnprocessableEntity},
		{"below n_min", todayBody(f.c.Plan(), metric, sealed[:9]), http.StatusUnprocessableEntity},
		{"suite", report.EncodeBatch(report.Batch{ID: report.NewID(), Metric: periodKey(metric, f.c.Epoch()), Suite: 7, Sealed: sealed}), http.StatusUnprocessableEntity},
		// A shuffler's blanket draws do not count toward n_min.
		{"below n_min with a draw", report.EncodeBatch(report.Batch{ID: report.NewID(), Metric: periodKey(metric, f.c.Epoch()), Suite: report.SuiteX25519ChaCha, Sealed: sealed, Draws: 1}), http.StatusUnprocessableEntity},
		// Pool keys without a reporting period: no per-period guarantee
		// could cover their reports.
		{"no tag", batchBody(metric, sealed), http.StatusUnprocessableEntity},
		{"epoch tag only", batchBody(metric+report.PoolKeySep+f.c.Epoch(), sealed), http.StatusUnprocessableEntity},
	} {
		if code, _ := f.postBatch(t, tc.body); code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, code, tc.want)
		}
	}
	// Without the token.
	resp := post(t, nil, f.srv.URL+"/v1/batches", good, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: status %d, want 401", resp.StatusCode)
	}
	// Still serving, nothing counted.
	if code, res := f.postBatch(t, good); code != http.StatusOK || res.N != 10 {
		t.Fatalf("good batch after the bad ones: %d %+v", code, res)
	}
	st := f.c.Stats()
	if st.Bad != 4 || st.Refused != 6 || st.Batches != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCollectorKeyAndCalibrationPersist opens a collector twice on one
// directory with an uncalibrated plan: the key file is 0600, the public
// key, the calibration and so the epoch are the same both times. The test
// plan runs under joint travel, which calibrates in a tenth of the CPU of
// its own separate travel (TestCollectorKeyAndCalibrationPersistDeep, make
// audit); the persistence does not depend on the travel.
func TestCollectorKeyAndCalibrationPersist(t *testing.T) {
	keyAndCalibrationPersist(t, "joint")
}

// keyAndCalibrationPersist runs TestCollectorKeyAndCalibrationPersist on
// the test plan under travel.
func keyAndCalibrationPersist(t *testing.T, travel string) {
	dir := t.TempDir()
	raw, err := plan.Load("testdata/plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw.Travel = travel
	c1 := openCollector(t, dir, raw)
	p1, e1, k1 := c1.Plan(), c1.Epoch(), c1.PublicKey().Bytes()
	c1.Close()
	if !p1.Calibrated() || p1.Travel != travel || len(p1.CollectorKeys) != 1 || p1.CollectorKeys[0].Key != base64.StdEncoding.EncodeToString(k1) {
		t.Fatalf("published plan %+v", p1)
	}
	keyFile := filepath.Join(dir, ReportKeyFile(p1.CollectorKeys[0].ID))
	sqliteStore := servertest.Store(t, dir) == "" // else the key is in the database
	if runtime.GOOS != "windows" && sqliteStore {
		fi, err := os.Stat(keyFile)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v, mode %v", err, fi.Mode())
		}
	}
	c2 := openCollector(t, dir, raw)
	defer c2.Close()
	if c2.Epoch() != e1 || string(c2.PublicKey().Bytes()) != string(k1) || c2.Plan().Digest() != p1.Digest() {
		t.Fatalf("restart changed epoch %s -> %s or key", e1, c2.Epoch())
	}
	if len(e1) != EpochLen {
		t.Fatalf("epoch %q", e1)
	}
	// A key readable by others is refused.
	if runtime.GOOS != "windows" && sqliteStore {
		os.Chmod(keyFile, 0o644)
		if _, err := OpenCollector(context.Background(), CollectorOptions{Plan: raw, Dir: dir, Open: openBuiltin}); err == nil {
			t.Fatal("opened with a world-readable key")
		}
	}
}

// TestCollectorEpochs changes eps0 between runs on one directory: the
// statistics of the two plans are kept apart and both are estimated.
func TestCollectorEpochs(t *testing.T) {
	p := testPlan(t, 10)
	f := newCollectorFixture(t, p)
	body := todayBody(f.c.Plan(), metric, sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(50, 7), 7))
	if code, _ := f.postBatch(t, body); code != http.StatusOK {
		t.Fatal(code)
	}
	old := f.c.Epoch()
	f.p = testPlan(t, 10)
	f.p.Metrics[0].Eps0 = 1.5
	f.restart(t)
	if f.c.Epoch() == old {
		t.Fatal("new eps0, same epoch")
	}
	body = todayBody(f.c.Plan(), metric, sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(70, 8), 8))
	if code, _ := f.postBatch(t, body); code != http.StatusOK {
		t.Fatal(code)
	}
	d := f.metric(t, metric)
	if len(d.Periods) != 2 || d.Periods[0].Epoch != old || d.Periods[0].N != 50 || d.Periods[1].N != 70 || !d.Periods[1].Current || d.Periods[0].Eps0 != 2 || d.Periods[1].Eps0 != 1.5 {
		t.Fatalf("epochs %+v", d.Periods)
	}
	var list MetricList
	getJSON(t, f.srv.URL+"/v1/metrics", &list)
	if len(list.Metrics) != 2 || list.Metrics[1].Name != metric || list.Metrics[1].N != 120 || len(list.Metrics[1].Epochs) != 2 {
		t.Fatalf("list %+v", list)
	}

	// Late reports: a batch of reports sealed under the earlier plan (apps
	// that have not fetched the new one), tagged with its epoch, next to
	// a batch of current ones. Each counts in its own epoch, with its own
	// epoch's guarantee at its own number.
	oldPlan, err := f.c.epochPlan(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	late := sealKRR(t, oldPlan, metric, f.c.PublicKey(), krrValues(30, 9), 9)
	now := sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(40, 10), 10)
	if code, res := f.postBatch(t, todayBody(oldPlan, metric, append(late, []byte("garbage")))); code != http.StatusOK || res.N != 30 || res.Malformed != 1 || res.Epoch != old {
		t.Fatalf("late batch: %d %+v", code, res)
	}
	if code, res := f.postBatch(t, todayBody(f.c.Plan(), metric, now)); code != http.StatusOK || res.N != 40 || res.Epoch != f.c.Epoch() {
		t.Fatalf("current batch: %d %+v", code, res)
	}
	d = f.metric(t, metric)
	e0, e1 := d.Periods[0], d.Periods[1]
	if e0.N != 80 || e0.Batches != 2 || e0.Malformed != 1 || e1.N != 110 || e1.Malformed != 0 || e1.Batches != 2 {
		t.Fatalf("after the late batch: %+v", d.Periods)
	}
	for _, c := range []struct {
		e    PeriodEstimate
		plan *plan.Plan
		n    int
	}{{e0, oldPlan, 30}, {e1, f.c.Plan(), 40}} {
		b := c.e.BatchList[1]
		mech, eps0, delta, err := accounting.BatchMechanism(context.Background(), c.plan, openBuiltin, metric)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := accountant.Epsilon(mech, eps0, c.n, delta)
		if err != nil {
			t.Fatal(err)
		}
		if b.N != int64(c.n) || b.Eps == nil || math.Abs(*b.Eps-ref.Upper) > 1e-9*ref.Upper {
			t.Errorf("epoch %s: batch %+v, want n %d and eps %g", c.e.Epoch, b, c.n, ref.Upper)
		}
	}
}

// TestCollectorPlanETag checks that GET /v1/plan answers 304 to a
// matching If-None-Match, so that apps can poll for a new plan cheaply.
func TestCollectorPlanETag(t *testing.T) {
	f := newCollectorFixture(t, testPlan(t, 10))
	resp, err := http.Get(f.srv.URL + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || etag == "" {
		t.Fatalf("GET /v1/plan: %s, ETag %q", resp.Status, etag)
	}
	for _, c := range []struct {
		inm  string
		want int
	}{{etag, http.StatusNotModified}, {`"other", ` + etag, http.StatusNotModified}, {`"other"`, http.StatusOK}, {"*", http.StatusNotModified}} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/plan", nil)
		req.Header.Set("If-None-Match", c.inm)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("If-None-Match %s: %s, want %d", c.inm, resp.Status, c.want)
		}
	}
}

func TestCollectorPlanAndNotFound(t *testing.T) {
	f := newCollectorFixture(t, testPlan(t, 10))
	var p plan.Plan
	if code := getJSON(t, f.srv.URL+"/v1/plan", &p); code != http.StatusOK {
		t.Fatal(code)
	}
	if pk := servertest.KeyOf(t, &p, today); string(pk.Bytes()) != string(f.c.PublicKey().Bytes()) || !p.Calibrated() {
		t.Fatalf("plan keys %+v", p.CollectorKeys)
	}
	for _, path := range []string{"/v1/metrics/no/such", "/v1/metrics/"} {
		if code := getJSON(t, f.srv.URL+path, nil); code != http.StatusNotFound {
			t.Fatalf("GET %s: %d, want 404", path, code)
		}
	}
	// A metric of the plan without data: 200 and no epochs.
	if d := f.metric(t, "net/latency_ms"); !d.InPlan || len(d.Periods) != 0 {
		t.Fatalf("%+v", d)
	}
}

// TestEndToEnd runs the shuffler and the collector on one loopback server,
// as blanket serve does: apps seal k-RR reports of known values and upload
// them from several connections; the shuffler releases, the collector
// ingests, and the estimate is checked against the truth. 2000 reports
// (two batches of n_min); TestEndToEndDeep (make audit) sends 4000.
func TestEndToEnd(t *testing.T) {
	endToEnd(t, 2000)
}

// endToEnd runs TestEndToEnd with n reports, a multiple of 1000 (the
// plan's n_min).
func endToEnd(t *testing.T, n int) {
	ctx := context.Background()
	p := testPlan(t, 1000)
	dir := t.TempDir()
	c := openCollector(t, dir, p)
	defer c.Close()
	mux := http.NewServeMux()
	c.Register(mux)
	srv := newServer(t, mux)
	s, err := shuffler.Open(ctx, shuffler.Options{Plan: p, Dir: dir, Collector: srv.URL, Token: testToken, ReleaseInterval: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Register(mux)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	var pub plan.Plan
	getJSON(t, srv.URL+"/v1/plan", &pub)
	pk := servertest.KeyOf(t, &pub, today)
	values := krrValues(n, 9)
	sealed := sealKRRIn(t, &pub, metric, pk, values, 9, today)
	// The reports arrive as uploads of 500 from as many connections; the
	// pool waits for its period to close (here: closed by hand, as the
	// deadline would) and goes out whole.
	var d MetricDetail
	for i := 0; i < n; i += 500 {
		var res shuffler.UploadResult
		c := &http.Client{Transport: &http.Transport{}}
		if resp := post(t, c, srv.URL+"/v1/reports", report.EncodeEnvelopes(envelopes(periodKey(metric, pub.Epoch()), sealed[i:i+500])), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 500 {
			t.Fatalf("upload: %d %+v", resp.StatusCode, res)
		}
	}
	closeAll(t, s)
	waitFor(t, "reports ingested", func() bool {
		getJSON(t, srv.URL+"/v1/metrics/"+metric, &d)
		return len(d.Periods) == 1 && d.Periods[0].N == int64(n)
	})
	e := d.Periods[0]
	if e.Malformed != 0 || e.Batches < 1 || e.Guarantee == nil || len(e.BatchList) != int(e.Batches) {
		t.Fatalf("estimate %+v", e)
	}
	// Each estimate is checked against the truth at the z for a
	// false-failure rate of 1e-6 split over the 5 buckets (the estimates
	// are unbiased and approximately normal with the reported variance);
	// the seeded randomizer makes the outcome reproducible anyway.
	z := distuv.UnitNormal.Quantile(1 - 1e-6/(2*5))
	want := truth(values)
	for _, it := range e.Estimates {
		if dev := math.Abs(it.Value - float64(want[it.Label])); dev > z*math.Sqrt(it.Variance) {
			t.Errorf("%s: estimate %.1f, truth %d, sd %.1f", it.Label, it.Value, want[it.Label], math.Sqrt(it.Variance))
		}
		if !(it.Lo < it.Value && it.Value < it.Hi) {
			t.Errorf("%s: CI [%g, %g] around %g", it.Label, it.Lo, it.Hi, it.Value)
		}
	}
	// The weakest guarantee is the accountant's eps for the smallest
	// batch.
	mech, eps0, delta, err := accounting.BatchMechanism(ctx, c.plan, openBuiltin, metric)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := accountant.Epsilon(mech, eps0, int(e.Guarantee.N), delta)
	if err != nil {
		t.Fatal(err)
	}
	// epsTol is relative: the accountant's parallel sums make repeated
	// calls differ in the last few bits.
	const epsTol = 1e-9
	if math.Abs(e.Guarantee.Eps-ref.Upper) > epsTol*ref.Upper || e.Guarantee.Delta != delta || e.Guarantee.N < int64(p.NMin) {
		t.Fatalf("guarantee %+v, accountant eps %g at delta %g", e.Guarantee, ref.Upper, delta)
	}
	for _, b := range e.BatchList {
		if b.N < int64(p.NMin) || *b.Eps > e.Guarantee.Eps {
			t.Errorf("batch %+v below n_min or weaker than the reported weakest", b)
		}
	}
}
