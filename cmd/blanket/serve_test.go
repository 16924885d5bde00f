package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/internal/servertest"

	"go.yaml.in/yaml/v3"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// testPlanFile is the collector's test plan: two metrics, n_min 1000.
const testPlanFile = "../../collector/testdata/plan.yaml"

// calibrated is testPlanFile calibrated once by 'blanket plan -o --json'
// for the tests of this binary (TestPlanCommand checks that run; the server
// tests start from its plan so as not to calibrate it again).
var calibrated struct {
	once   sync.Once
	yaml   []byte // the written plan
	stdout string // the --json summary
	stderr string
	code   int
	err    error
}

// calibratedTestPlan returns a copy of the calibrated test plan in a file
// of t's temporary directory, and the summary 'blanket plan --json' printed
// when it was written.
func calibratedTestPlan(t *testing.T) (path, summary string) {
	t.Helper()
	c := &calibrated
	c.once.Do(func() {
		dir, err := os.MkdirTemp("", "blanket-plan-test-")
		if err != nil {
			c.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "plan.yaml")
		c.stdout, c.stderr, c.code = execute(t, defaultEnv(), "plan", testPlanFile, "-o", out, "--json")
		if c.code == exitOK {
			c.yaml, c.err = os.ReadFile(out)
		}
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	if c.code != exitOK {
		t.Fatalf("blanket plan %s -o --json: exit %d: %s", testPlanFile, c.code, c.stderr)
	}
	path = filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(path, c.yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, c.stdout
}

func TestPlanCommand(t *testing.T) {
	// The plan on stdout and the summary table on stderr, for the test plan
	// under joint travel: a tenth of the CPU of separate travel, which the
	// -o --json run below calibrates.
	src := mustRead(t, testPlanFile)
	joint := strings.Replace(src, "travel: separate", "travel: joint", 1)
	if joint == src {
		t.Fatalf("%s does not say travel: separate", testPlanFile)
	}
	jointFile := filepath.Join(t.TempDir(), "joint.yaml")
	if err := os.WriteFile(jointFile, []byte(joint), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := execute(t, defaultEnv(), "plan", jointFile)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	p, err := plan.Parse([]byte(stdout))
	if err != nil {
		t.Fatalf("stdout is not a plan: %v\n%s", err, stdout)
	}
	if !p.Calibrated() || p.Guarantee.Eps > p.Target.Eps || p.Travel != "joint" {
		t.Fatalf("plan not calibrated to its target: %+v (travel %s)", p.Guarantee, p.Travel)
	}
	for _, want := range []string{"metric", "ui/screen", "krr", "net/latency_ms", "summation", "guarantee", "rule"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary on stderr lacks %q:\n%s", want, stderr)
		}
	}

	// plan -o out --json: the run calibratedTestPlan made.
	out, stdout := calibratedTestPlan(t)
	var r planReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	written, err := plan.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Metrics) != 2 || r.Metrics[0].Eps0 != written.Metrics[0].Eps0 || r.Digest != written.Digest() || r.Metrics[0].Weight != 1 {
		t.Fatalf("summary %+v does not describe the written plan", r)
	}
	if !written.Calibrated() || written.Guarantee.Eps > written.Target.Eps || written.Travel != "separate" {
		t.Fatalf("written plan not calibrated to its target: %+v (travel %s)", written.Guarantee, written.Travel)
	}
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(mustRead(t, out)), &raw); err != nil || raw["guarantee"] == nil {
		t.Fatalf("written file: %v %v", err, raw)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPlanCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("target: {eps: 1, delta: 2}\nn_min: 10\nmetrics: [{name: a, plugin: krr, categories: [x, y]}]\n"), 0o644)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("target: {eps: 1, delta: 1e-6}\nn_min: 1000\nmetrics: [{name: a, plugin: nosuchplugin}]\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan"}, exitUsage, "accepts 1 arg"},
		{[]string{"plan", filepath.Join(dir, "missing.yaml")}, exitUsage, "no such file"},
		{[]string{"plan", bad}, exitUsage, "target.delta"},
		{[]string{"plan", unknown}, exitFailure, "nosuchplugin"},
	} {
		_, stderr, code := execute(t, defaultEnv(), tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

func TestServerCommandUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--plan", testPlanFile}, "--data"},
		{[]string{"serve", "--data", dir}, "--plan"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--log-level", "loud"}, "--log-level"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--release-interval", "0s"}, "--release-interval"},
		{[]string{"shuffler", "--data", dir, "--plan", testPlanFile}, "--collector"},
		{[]string{"shuffler", "--data", dir, "--plan", testPlanFile, "--collector", "ftp://x"}, "--collector"},
		{[]string{"shuffler", "--data", dir, "--plan", testPlanFile, "--collector", "http://127.0.0.1:1", "--admission", "open"}, "token"},
		{[]string{"collector", "--data", dir, "--plan", filepath.Join(dir, "nope.yaml")}, "no such file"},
		// Admission is on by default: serve needs an identity provider's
		// key set, or the explicit opt-out; the shuffler the issuer's seed.
		{[]string{"serve", "--data", dir, "--plan", testPlanFile}, "--jwks FILE|URL"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile}, "--admission open"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--admission", "none"}, "--admission"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--admission", "open", "--jwks", "keys.json"}, "--jwks"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--jwks", filepath.Join(dir, "nope.json"), "--jwt-issuer", "https://idp.test", "--jwt-audience", "blanket"}, "nope.json"},
		// Any iss and aud would let tokens signed for other services or
		// tenants on the same key set be identities here.
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--jwks", "keys.json", "--jwt-issuer", "https://idp.test"}, "--jwt-audience"},
		{[]string{"serve", "--data", dir, "--plan", testPlanFile, "--jwks", "keys.json", "--jwt-audience", "blanket"}, "--jwt-issuer"},
		{[]string{"shuffler", "--data", dir, "--plan", testPlanFile, "--collector", "http://127.0.0.1:1"}, "--admission-seed"},
		{[]string{"shuffler", "--data", dir, "--plan", testPlanFile, "--collector", "http://127.0.0.1:1", "--admission-seed", filepath.Join(dir, "nope.seed")}, "does not exist"},
		{[]string{"collector", "--data", dir, "--plan", testPlanFile, "--shuffler-admission", "none"}, "--shuffler-admission"},
		{[]string{"issuer", "--data", dir, "--plan", testPlanFile}, "--jwks"},
		{[]string{"issuer", "--data", dir, "--jwks", "keys.json"}, "--plan"},
		{[]string{"issuer", "--data", dir, "--jwks", "keys.json", "--plan", testPlanFile}, "not a plan a collector publishes (calibrated)"},
	} {
		_, stderr, code := execute(t, defaultEnv(), tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// syncBuffer is the output of a server, read while it runs.
type syncBuffer = servertest.SyncBuffer

// server is a server command running in-process.
type server struct {
	cancel context.CancelFunc
	done   chan int
	out    *syncBuffer
	errOut *syncBuffer
	url    string
}

// startServer runs the command line until stop, and waits until it prints
// where it listens.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{cancel: cancel, done: make(chan int, 1), out: &syncBuffer{}, errOut: &syncBuffer{}}
	go func() { s.done <- run(ctx, args, s.out, s.errOut, defaultEnv()) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if line, _, ok := strings.Cut(s.out.String(), "\n"); ok && strings.Contains(line, "listening on ") {
			s.url = line[strings.LastIndex(line, " ")+1:]
			break
		}
		select {
		case code := <-s.done:
			t.Fatalf("%v exited with %d before listening: %s", args, code, s.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v did not print where it listens: %s", args, s.errOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the command (as SIGINT does) and checks it exits 0.
func (s *server) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case code := <-s.done:
		if code != exitOK {
			t.Errorf("server exited with %d: %s", code, s.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Error("server did not shut down")
	}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}

// appReports randomizes values with the published plan's k-RR metric and
// seals each to the published key, as an app would.
func appReports(t *testing.T, base, metric string, values []string) []report.Envelope {
	t.Helper()
	var p plan.Plan
	if code := getJSON(t, base+"/v1/plan", &p); code != http.StatusOK {
		t.Fatalf("GET /v1/plan: %d", code)
	}
	pk := servertest.KeyOf(t, &p, p.ReportPeriod(time.Now()))
	m := p.Metric(metric)
	r, err := builtin.Open(context.Background(), m.Plugin, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	reps, err := r.Randomize(context.Background(), m.Eps0, sdk.Inputs{Categories: values})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Binding(m.Name)
	b.Period = p.ReportPeriod(time.Now())
	key := report.PeriodPoolKey(metric, p.Epoch(), b.Period)
	envs := make([]report.Envelope, len(reps))
	for i, rep := range reps {
		sealed, err := report.Seal(pk, b, rep)
		if err != nil {
			t.Fatal(err)
		}
		envs[i] = report.Envelope{ID: report.NewID(), Metric: key, Suite: report.SuiteX25519ChaCha, Sealed: sealed}
	}
	return envs
}

func upload(t *testing.T, base string, envs []report.Envelope) shuffler.UploadResult {
	t.Helper()
	resp, err := http.Post(base+"/v1/reports", "application/octet-stream", bytes.NewReader(report.EncodeEnvelopes(envs)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res shuffler.UploadResult
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// closePeriods closes, on the shuffler of server s (its admin listener:
// POST /v1/pools/close), the periods of its pooled reports ending in the
// next two days, so that it releases them whole as at their deadline:
// while a period is open the shuffler keeps its last n_min reports.
func closePeriods(t *testing.T, s *server) {
	t.Helper()
	through := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	resp, err := http.Post(s.adminURL(t)+"/v1/pools/close?force=true&through="+through, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out shuffler.ClosedPeriods
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Closed) == 0 {
		t.Fatalf("closing the periods: %s, %+v, %v", resp.Status, out, err)
	}
}

// values returns n category values: home 40%, search 30%, settings 20%,
// elsewhere (the other bucket) 10%.
func values(n int) ([]string, map[string]int) {
	out := make([]string, n)
	truth := map[string]int{}
	for i := range out {
		switch r := i % 10; {
		case r < 4:
			out[i] = "home"
		case r < 7:
			out[i] = "search"
		case r < 9:
			out[i] = "settings"
		default:
			out[i] = "elsewhere"
		}
		label := out[i]
		if label == "elsewhere" {
			label = "other"
		}
		truth[label]++
	}
	return out, truth
}

// checkEstimate waits until the metric has n reports and checks each
// estimate against the truth at the z of a 1e-6 false-failure rate split
// over the buckets (the estimates are unbiased, approximately normal with
// the reported variance).
func checkEstimate(t *testing.T, base, metric string, n int, truth map[string]int) collector.PeriodEstimate {
	t.Helper()
	var d collector.MetricDetail
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code := getJSON(t, base+"/v1/metrics/"+metric, &d); code == http.StatusOK && len(d.Periods) == 1 && d.Periods[0].N == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric never reached %d reports: %+v", n, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := d.Periods[0]
	z := distuv.UnitNormal.Quantile(1 - 1e-6/float64(2*len(e.Estimates)))
	for _, it := range e.Estimates {
		if dev := math.Abs(it.Value - float64(truth[it.Label])); dev > z*math.Sqrt(it.Variance) {
			t.Errorf("%s: estimate %.1f, truth %d, sd %.1f", it.Label, it.Value, truth[it.Label], math.Sqrt(it.Variance))
		}
	}
	if e.Guarantee == nil || !(e.Guarantee.Eps > 0) || e.Guarantee.N < 1000 {
		t.Errorf("guarantee %+v", e.Guarantee)
	}
	return e
}

// TestServe runs 'blanket serve' on the calibrated test plan, uploads
// 1000 sealed k-RR reports (one batch of n_min) as apps do, and reads the
// estimate back; a restart on the same data directory keeps the plan
// epoch, the key and the data.
// TestServeCalibratesAtStart (make audit) runs it on the uncalibrated plan,
// which serve calibrates at start (as OpenCollector does in
// TestCollectorKeyAndCalibrationPersist), with 3000 reports.
func TestServe(t *testing.T) {
	planFile, _ := calibratedTestPlan(t)
	checkServe(t, planFile, 1000)
}

// checkServe runs 'blanket serve' on planFile with n reports (a multiple
// of 1000, the plan's n_min).
func checkServe(t *testing.T, planFile string, n int) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"serve", "--data", dir, "--plan", planFile, "--addr", "127.0.0.1:0", "--release-interval", "50ms", "--log-level", "warn", "--admission", "open"}
	s := startServer(t, args...)
	vals, truth := values(n)
	envs := appReports(t, s.url, "ui/screen", vals)
	for i := 0; i < n; i += 1000 {
		if res := upload(t, s.url, envs[i:i+1000]); res.Accepted != 1000 {
			t.Fatalf("upload: %+v", res)
		}
	}
	if res := upload(t, s.url, envs[:10]); res.Duplicates != 10 {
		t.Fatalf("retried upload: %+v", res)
	}
	closePeriods(t, s)
	e := checkEstimate(t, s.url, "ui/screen", n, truth)
	checkOps(t, s, `{"collector":true,"shuffler":false}`, `{"collector":true,"shuffler":true}`,
		fmt.Sprintf(`blanket_shuffler_envelopes_total{result="accepted"} %d`, n),
		`blanket_shuffler_envelopes_total{result="duplicate"} 10`,
		fmt.Sprintf(`blanket_collector_reports_total{pool="ui/screen",result="valid"} %d`, n),
		`blanket_plugin_restarts_total{plugin="krr"} 0`, "go_goroutines", "process_resident_memory_bytes")
	var p1 plan.Plan
	getJSON(t, s.url+"/v1/plan", &p1)
	// --admission open: said in the plan's header and in the scope.
	resp, err := http.Get(s.url + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var list collector.MetricList
	getJSON(t, s.url+"/v1/metrics", &list)
	if got := resp.Header.Get(admission.AdmissionHeader); got != admission.AdmissionOpen || list.Scope.Admission != admission.AdmissionOpen {
		t.Errorf("serve --admission open: %s %q, scope admission %q; want open", admission.AdmissionHeader, got, list.Scope.Admission)
	}
	s.stop(t)

	s2 := startServer(t, args...)
	var p2 plan.Plan
	getJSON(t, s2.url+"/v1/plan", &p2)
	if p1.Digest() != p2.Digest() {
		t.Fatal("restart changed the published plan")
	}
	var d collector.MetricDetail
	getJSON(t, s2.url+"/v1/metrics/ui/screen", &d)
	if len(d.Periods) != 1 || d.Periods[0].Epoch != e.Epoch || d.Periods[0].N != int64(n) {
		t.Fatalf("after restart: %+v", d)
	}
}

// TestShufflerAndCollectorCommands runs the two roles as separate
// commands with separate data directories, on the calibrated test plan,
// the shuffler given a dead collector URL before the live one.
func TestShufflerAndCollectorCommands(t *testing.T) {
	planFile, _ := calibratedTestPlan(t)
	cdir, sdir := t.TempDir(), t.TempDir()
	c := startServer(t, "collector", "--data", cdir, "--plan", planFile, "--addr", "127.0.0.1:0", "--log-level", "warn", "--shuffler-admission", "open")
	token := mustRead(t, filepath.Join(cdir, secrets.TokenFile))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two collector URLs, the first dead (connection refused): the plan
	// and the batches go to the second (several collectors, failing over).
	s := startServer(t, "shuffler", "--data", sdir, "--plan", planFile, "--addr", "127.0.0.1:0", "--collector", "http://127.0.0.1:1", "--collector", c.url, "--token-file", tokenFile, "--release-interval", "50ms", "--log-level", "warn", "--admission", "open")
	// Apps talk to the shuffler only: it relays the collector's plan.
	var viaShuffler, direct plan.Plan
	getJSON(t, s.url+"/v1/plan", &viaShuffler)
	getJSON(t, c.url+"/v1/plan", &direct)
	if len(viaShuffler.CollectorKeys) == 0 || viaShuffler.Digest() != direct.Digest() {
		t.Fatal("the shuffler does not relay the collector's plan")
	}
	// Signed by the key plan-key prints, as served and as relayed.
	key := planKeyOut(t, cdir)
	checkSignedPlan(t, c.url, key)
	checkSignedPlan(t, s.url, key)
	const n = 1000 // one batch of n_min
	vals, truth := values(n)
	if res := upload(t, s.url, appReports(t, s.url, "ui/screen", vals)); res.Accepted != n {
		t.Fatalf("upload: %+v", res)
	}
	closePeriods(t, s)
	checkEstimate(t, c.url, "ui/screen", n, truth)
	checkOps(t, c, `{"collector":true,"shuffler":false}`, `{"collector":true,"shuffler":false}`, `blanket_collector_batches_total{result="ingested"} 1`, "go_goroutines")
	checkOps(t, s, "", `{"collector":false,"shuffler":true}`, `blanket_shuffler_batches_acknowledged_total 1`, "go_goroutines")
	// The collector refuses batches without the token.
	resp, err := http.Post(c.url+"/v1/batches", "application/octet-stream", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("batch without token: %d", resp.StatusCode)
	}
	// The shuffler's data directory holds no key, the collector's no
	// reports.
	if _, err := os.Stat(filepath.Join(sdir, collector.ReportKeyFile(direct.CollectorKeys[0].ID))); err == nil {
		t.Error("shuffler directory holds a collector key")
	}
	if _, err := os.Stat(filepath.Join(cdir, shuffler.DBFile)); err == nil {
		t.Error("collector directory holds a shuffler database")
	}
}

// adminURL returns the URL of the command's admin listener, printed
// after the public one.
func (s *server) adminURL(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(s.out.String(), "\n") {
			if strings.Contains(line, " admin listening on ") {
				return line[strings.LastIndex(line, " ")+1:]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin listener printed: %s", s.out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkOps checks a server command's two listeners. Public: GET /healthz
// and /readyz answer 200 "ok", GET /metrics and GET /v1/pools are not
// served (pool counts and upload counters over time show when reports
// arrive), and GET / is the dashboard with publicRoles ("" for none). Admin:
// /readyz is 200, GET /metrics holds every line of want (series with their
// values, or names), GET / is the dashboard with adminRoles, and GET
// /v1/pools answers when the command runs a shuffler.
func checkOps(t *testing.T, s *server, publicRoles, adminRoles string, want ...string) {
	t.Helper()
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin := s.adminURL(t)
	for _, base := range []string{s.url, admin} {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body := get(base + path); code != http.StatusOK || body != "ok\n" {
				t.Errorf("GET %s%s = %d %q", base, path, code, body)
			}
		}
	}
	for _, path := range []string{"/metrics", "/v1/pools"} {
		if code, _ := get(s.url + path); code != http.StatusNotFound {
			t.Errorf("the public listener serves GET %s (%d)", path, code)
		}
	}
	if code, got := get(s.url + "/dashboard/roles.json"); publicRoles == "" && code != http.StatusNotFound || publicRoles != "" && got != publicRoles {
		t.Errorf("public dashboard roles %d %s, want %q", code, got, publicRoles)
	}
	_, metrics := get(admin + "/metrics")
	for _, w := range want {
		if !strings.Contains(metrics, w) {
			t.Errorf("GET /metrics lacks %q", w)
		}
	}
	if code, page := get(admin + "/"); code != http.StatusOK || !strings.Contains(page, "<title>Blanket</title>") {
		t.Errorf("admin GET / = %d, not the dashboard", code)
	}
	if _, got := get(admin + "/dashboard/roles.json"); got != adminRoles {
		t.Errorf("admin dashboard roles %s, want %s", got, adminRoles)
	}
	if strings.Contains(adminRoles, `"shuffler":true`) {
		if code, _ := get(admin + "/v1/pools"); code != http.StatusOK {
			t.Errorf("admin GET /v1/pools = %d", code)
		}
	}
}
