package chaos

// A `blanket serve` process the tests start, SIGKILL and start again on
// the same data directory, as an operator's supervisor would after a
// crash. It runs with the server's default flags but for --data, --plan
// and --addr: the public address keeps one port across restarts, so that
// apps keep their endpoint, and the operator's listener (--admin-addr,
// loopback and a free port by default) is read from each start's output.
// The process's stderr goes through a small bash loop (stderrWatch), a
// process of its own, which copies it to the log and, once armed, SIGKILLs
// the server at the first line holding a pattern: the kill lands within
// the time the kernel takes to wake one process, not after the test's
// goroutines, busy under the race detector, get to run (a server forwards
// a released batch within milliseconds).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestMain removes the binaries the tests built.
func TestMain(m *testing.M) { os.Exit(testbuild.Main(m)) }

// blanketBin returns a blanket binary built from ./cmd/blanket, or
// $BLANKET_BIN when set (e.g. one built with go build -overlay, or from
// an earlier commit, to check that a fault is caught).
func blanketBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BLANKET_BIN"); bin != "" {
		return bin
	}
	return testbuild.Binary(t, blanketPkg)
}

// The packages the tests build.
const (
	blanketPkg = "github.com/blanket-dp/blanket/cmd/blanket"
	toolPkg    = "github.com/blanket-dp/blanket/examples/chaos/clitool"
)

// planYAML is the tests' plan: two metrics (a k-RR category and a summed
// value) of separate travel, a short real-clock period, a small n_min,
// and a grace of grace periods (0: the default, 8).
func planYAML(period time.Duration, nMin, grace int) string {
	g := ""
	if grace > 0 {
		g = fmt.Sprintf("grace: %d\n", grace)
	}
	return fmt.Sprintf(`version: 1
target: {eps: 1, delta: 1.0e-6}
n_min: %d
period: %s
horizon: 1
%stravel: separate
metrics:
  - name: %s
    plugin: krr
    categories: [home, search, settings, profile, inbox, compose]
  - name: %s
    plugin: summation
    lo: 0
    hi: 1000
    params: {k: "4"}
`, nMin, period, g, metricScreen, metricBytes)
}

// The plan's metrics.
const (
	metricScreen = "chaos/screen"
	metricBytes  = "chaos/bytes"
)

var metrics = []string{metricScreen, metricBytes}

var screens = []string{"home", "search", "settings", "profile", "inbox", "compose"}

// server is one blanket serve data directory and the process serving it,
// if any.
type server struct {
	t         *testing.T
	bin, dir  string
	data      string
	planFile  string
	url       string // the public listener, the same for every start
	addr      string
	mu        sync.Mutex
	proc      *proc // nil while down
	starts    int
	logs      []string // every start's log file
	killEvent []string // what each kill hit, for the failure output
}

// planKey returns the plan-signing key of the server's collector, which
// its apps pin, read from its data dir (generated there when it has not
// started yet, and then used by it), as an operator does with `blanket
// collector plan-key`.
func (s *server) planKey() string {
	s.t.Helper()
	k, err := collector.PlanSigningKey(context.Background(), s.data, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return plan.FormatSigningKey(k)
}

// proc is one process of a server.
type proc struct {
	cmd   *exec.Cmd
	watch *exec.Cmd     // stderrWatch, reading the server's stderr
	arm   string        // the file whose presence arms stderrWatch's kill
	admin string        // the operator's listener
	done  chan struct{} // closed once the server and its watcher have exited
}

// stderrWatch copies its stdin (a server's stderr) to its stdout, line by
// line. Once the file $1 exists it holds a pattern: the first line holding
// it SIGKILLs the process whose id is in $2, and is written to $1.line,
// provided the watcher creates $1.claimed first (noclobber: whoever
// creates it first, the watcher or the test disarming it, wins). bash's
// read, test, redirections and kill are builtins: a line costs no fork.
const stderrWatch = `set -C
pid=$(cat "$2")
pat=
while IFS= read -r line; do
  printf '%s\n' "$line"
  if [[ -z $pat && -e $1 ]]; then
    IFS= read -r pat <"$1"
  fi
  if [[ -n $pat && $line == *"$pat"* ]] && { : >"$1.claimed"; } 2>/dev/null; then
    kill -KILL "$pid"
    printf '%s\n' "$line" >"$1.line"
    pat=
  fi
done`

// newServer writes the plan into dir and returns its server, not started.
func newServer(t *testing.T, dir, planText string) *server {
	t.Helper()
	s := &server{t: t, bin: blanketBin(t), dir: dir, data: filepath.Join(dir, "data"), planFile: filepath.Join(dir, "plan.yaml")}
	if err := os.WriteFile(s.planFile, []byte(planText), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.url = "http://" + s.addr
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			s.dumpLogs()
		}
	})
	return s
}

// freePort returns a loopback port below the kernel's ephemeral range
// (32768 and up on Linux), free now: an outgoing connection never takes
// it while the server is down between a kill and its restart.
func freePort(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free loopback port in [20000, 32000)")
	return 0
}

// start starts the server and returns once it answers GET /readyz with
// 200.
func (s *server) start(ctx context.Context) {
	s.t.Helper()
	s.mu.Lock()
	if s.proc != nil {
		s.mu.Unlock()
		s.t.Fatal("server started twice")
	}
	s.starts++
	logPath := filepath.Join(s.dir, fmt.Sprintf("serve-%d.log", s.starts))
	s.logs = append(s.logs, logPath)
	s.mu.Unlock()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	p := &proc{done: make(chan struct{}), arm: filepath.Join(s.dir, fmt.Sprintf("kill-%d", s.starts))}
	admin := make(chan string, 1)
	// Without admission: the SDK's apps here fetch no tokens.
	p.cmd = exec.Command(s.bin, "serve", "--data", s.data, "--plan", s.planFile, "--addr", s.addr, "--admission", "open")
	p.cmd.Stdout = &lineWatcher{w: logf, onLine: func(line string) {
		// "blanket serve admin listening on URL"
		if f := strings.Fields(line); len(f) == 6 && f[2] == "admin" && f[3] == "listening" {
			select {
			case admin <- f[5]:
			default:
			}
		}
	}}
	pr, pw, err := os.Pipe()
	if err != nil {
		s.t.Fatal(err)
	}
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		s.t.Fatal(err)
	}
	pw.Close()
	pidFile := p.arm + ".pid"
	if err := os.WriteFile(pidFile, []byte(fmt.Sprint(p.cmd.Process.Pid)), 0o644); err != nil {
		s.t.Fatal(err)
	}
	p.watch = exec.Command("bash", "-c", stderrWatch, "stderr-watch", p.arm, pidFile)
	p.watch.Stdin, p.watch.Stdout, p.watch.Stderr = pr, logf, logf
	if err := p.watch.Start(); err != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		logf.Close()
		s.t.Fatalf("bash: %v", err)
	}
	pr.Close()
	go func() {
		p.cmd.Wait()
		p.watch.Wait() // at the end of the server's stderr
		logf.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	select {
	case p.admin = <-admin:
	case <-p.done:
		s.t.Fatalf("blanket serve exited at start %d:\n%s", s.starts, tail(logPath, 8<<10))
	case <-ctx.Done():
		s.t.Fatalf("blanket serve did not start: %v", ctx.Err())
	}
	servertest.Poll(ctx, s.t, 30*time.Second, "blanket serve ready", func() (bool, string) {
		code, body, err := get(ctx, s.url+"/readyz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
}

// kill SIGKILLs the server and waits until it has exited; why is logged.
func (s *server) kill(why string) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.cmd.Process.Kill() // fails only when it has exited
	<-p.done
	s.noteKill(why)
}

func (s *server) noteKill(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killEvent = append(s.killEvent, fmt.Sprintf("%s kill %d (start %d): %s", time.Now().UTC().Format("15:04:05.000"), len(s.killEvent)+1, s.starts, why))
}

// killOnLine arms a SIGKILL of the running process at the first line it
// logs containing substr (stderrWatch), and returns the process.
func (s *server) killOnLine(substr string) *proc {
	s.t.Helper()
	p := s.running()
	if p == nil {
		s.t.Fatal("killOnLine: the server is down")
	}
	if err := os.WriteFile(p.arm+".tmp", []byte(substr), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(p.arm+".tmp", p.arm); err != nil { // armed at once, whole
		s.t.Fatal(err)
	}
	return p
}

// fired waits until p, armed by killOnLine, has been killed, at most
// timeout, and returns the line that killed it. Past timeout it disarms
// the kill and returns "", unless the watcher claimed it first. A process
// that exited by itself fails the test.
func (s *server) fired(p *proc, timeout time.Duration) string {
	s.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		f, err := os.OpenFile(p.arm+".claimed", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return "" // disarmed
		}
		<-p.done // the watcher claimed it: the kill is on its way
	}
	s.mu.Lock()
	if s.proc == p {
		s.proc = nil
	}
	logPath := s.logs[len(s.logs)-1]
	s.mu.Unlock()
	b, err := os.ReadFile(p.arm + ".line")
	if err != nil {
		s.t.Fatalf("blanket serve exited by itself (%v):\n%s", p.cmd.ProcessState, tail(logPath, 8<<10))
	}
	return strings.TrimSpace(string(b))
}

// running returns the running process, or nil.
func (s *server) running() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// stop kills the server, if up, at the end of the test.
func (s *server) stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.cmd.Process.Kill()
		<-p.done
	}
}

// dumpLogs logs the kills and the end of every start's log.
func (s *server) dumpLogs() {
	s.t.Logf("kills:\n%s", strings.Join(s.killEvent, "\n"))
	for _, l := range s.logs {
		s.t.Logf("%s:\n%s", l, tail(l, 12<<10))
	}
}

// serverLogs returns every start's log, in order.
func (s *server) serverLogs() []string {
	var out []string
	for _, l := range s.logs {
		b, _ := os.ReadFile(l)
		out = append(out, string(b))
	}
	return out
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}

// lineWatcher passes a process's output to w and each line to onLine.
type lineWatcher struct {
	w      io.Writer
	onLine func(string)
	line   []byte
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	l.w.Write(p)
	l.line = append(l.line, p...)
	for {
		i := bytes.IndexByte(l.line, '\n')
		if i < 0 {
			break
		}
		line := string(l.line[:i])
		l.line = l.line[i+1:]
		l.onLine(line)
	}
	return len(p), nil
}

// testHTTP is the tests' own client (not the apps').
var testHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}

// get GETs u and returns its status and body.
func get(ctx context.Context, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// getJSON GETs u into v; an answer other than 200 is an error.
func getJSON(ctx context.Context, u string, v any) error {
	code, b, err := get(ctx, u)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d: %.300s", u, code, b)
	}
	return json.Unmarshal(b, v)
}

// post POSTs body to u and returns its status and answer. A body of
// 1 MiB or more is sent only once the server asks for it (Expect:
// 100-continue): one it refuses by its length alone is answered before
// it is sent, not cut off while the client writes it.
func post(ctx context.Context, u string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if len(body) >= 1<<20 {
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// servedPlan returns the calibrated plan the collector serves.
func (s *server) servedPlan(ctx context.Context) *plan.Plan {
	s.t.Helper()
	code, b, err := get(ctx, s.url+"/v1/plan")
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("GET /v1/plan: %d %v %.200s", code, err, b)
	}
	pl, err := plan.Parse(b)
	if err != nil {
		s.t.Fatal(err)
	}
	return pl
}

// pools returns the shuffler's pools (its operator's listener).
func (s *server) pools(ctx context.Context) (shuffler.PoolsStatus, error) {
	var st shuffler.PoolsStatus
	p := s.running()
	if p == nil {
		return st, fmt.Errorf("the server is down")
	}
	return st, getJSON(ctx, p.admin+"/v1/pools", &st)
}

// closeThrough closes the periods ending by through on the shuffler (POST
// /v1/pools/close), as their deadline would: their pools go out whole.
func (s *server) closeThrough(ctx context.Context, through time.Time) shuffler.ClosedPeriods {
	s.t.Helper()
	var out shuffler.ClosedPeriods
	u := s.running().admin + "/v1/pools/close?through=" + url.QueryEscape(through.UTC().Format(time.RFC3339))
	code, b, err := post(ctx, u, nil)
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("POST %s: %d %v %.300s", u, code, err, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// awaitDrained waits until the shuffler holds no pooled report and no
// batch the collector has not acknowledged: everything it took is
// counted, or was deleted below n_min.
func (s *server) awaitDrained(ctx context.Context, timeout time.Duration) {
	s.t.Helper()
	servertest.Poll(ctx, s.t, timeout, "the shuffler drained (no pool, no outgoing batch)", func() (bool, string) {
		st, err := s.pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		b, _ := json.Marshal(st)
		return len(st.Pools) == 0 && st.Outgoing == 0, string(b)
	})
}

// metricDetail returns GET /v1/metrics/{name} without the horizon.
func (s *server) metricDetail(ctx context.Context, name string) collector.MetricDetail {
	s.t.Helper()
	var d collector.MetricDetail
	if err := getJSON(ctx, s.url+"/v1/metrics/"+name+"?horizon=0", &d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

// sleepUntil waits for the real clock to reach at: the scenario's clock,
// not a wait for an event.
func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
