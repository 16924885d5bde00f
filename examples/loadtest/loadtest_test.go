//go:build loadtest

package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

func TestMain(m *testing.M) {
	// Commits synced as in production (SQLite's are too).
	pgtest.Durable = true
	code := pgtest.Main(m)
	testbuild.Remove()
	os.Exit(code)
}

// planYAML is the load's plan: one k-RR metric, daily periods.
const planYAML = `version: 1
target: {eps: 1, delta: 1.0e-6}
n_min: 10000
period: 24h
horizon: 1
travel: separate
metrics:
  - name: load/screen
    plugin: krr
    categories: [home, search, settings, profile, inbox, compose, thread, contacts, calendar, files,
                 photos, share, notifications, help, about, login, logout, billing, upgrade, onboarding]
`

const metric = "load/screen"

// sealedPool is the number of distinct sealed reports the apps cycle
// through (each envelope has its own id).
const sealedPool = 4096

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// setup is what every configuration shares.
type setup struct {
	bin, planFile string
	n, conns, per int
	nMin          int
}

// result is one configuration's measurement.
type result struct {
	name                string
	ingested            int64
	elapsed, uploadTime time.Duration
	p50, p99            time.Duration
	retries             int64
	procs               []procStat
	postgresCPU         time.Duration
	postgresRSS         uint64
	loadCPU             time.Duration
}

type procStat struct {
	name string
	cpu  time.Duration
	hwm  uint64 // bytes
}

func TestLoad(t *testing.T) {
	s := setup{
		n:     envInt(t, "LOAD_N", 1_000_000),
		conns: envInt(t, "LOAD_CONNS", 64),
		per:   envInt(t, "LOAD_PER", 10),
	}
	configs := strings.Fields(os.Getenv("LOAD_CONFIGS"))
	if len(configs) == 0 {
		configs = []string{"sqlite", "pg1", "pg2", "pg4"}
	}
	s.bin = os.Getenv("BLANKET_BIN")
	if s.bin == "" {
		s.bin = testbuild.Binary(t, "github.com/blanket-dp/blanket/cmd/blanket")
	}
	s.planFile, s.nMin = calibratedPlan(t)
	var results []result
	for _, c := range configs {
		var r result
		switch {
		case c == "sqlite":
			r = runSQLite(t, s)
		case strings.HasPrefix(c, "pg"):
			k, err := strconv.Atoi(strings.TrimPrefix(c, "pg"))
			if err != nil || k < 1 {
				t.Fatalf("LOAD_CONFIGS: %q, want sqlite or pgN", c)
			}
			r = runPG(t, s, k)
		default:
			t.Fatalf("LOAD_CONFIGS: %q, want sqlite or pgN", c)
		}
		results = append(results, r)
		t.Logf("%s: %.0f reports/s", r.name, float64(r.ingested)/r.elapsed.Seconds())
	}
	printResults(os.Stdout, s, results)
}

// calibratedPlan writes the plan, calibrated once, to a file: every
// configuration then publishes the same eps0.
func calibratedPlan(t *testing.T) (string, int) {
	p, err := plan.Parse([]byte(planYAML))
	if err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		return builtin.Open(ctx, name, cfg)
	}
	if err := accounting.Calibrate(context.Background(), p, open); err != nil {
		t.Fatal(err)
	}
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, p.NMin
}

// proc is a blanket process.
type proc struct {
	name       string
	cmd        *exec.Cmd
	url, admin string
	done       chan struct{}
}

// start runs blanket with args and waits until it prints its listeners.
func start(t *testing.T, s setup, name string, args ...string) *proc {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stderr = logf
	// Dies with the test process, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	urls := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var u [2]string
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 4 && f[0] == "blanket" && f[len(f)-3] == "listening" {
				if f[len(f)-4] == "admin" {
					u[1] = f[len(f)-1]
				} else {
					u[0] = f[len(f)-1]
				}
				if u[0] != "" && u[1] != "" {
					urls <- u
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	select {
	case u := <-urls:
		p.url, p.admin = u[0], u[1]
	case <-p.done:
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("%s exited at start:\n%s", name, b)
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s did not start", name)
	}
	return p
}

// stop ends p gracefully (SIGTERM), killing it after 20 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func runSQLite(t *testing.T, s setup) result {
	dir := t.TempDir()
	// Without admission: the load is reports, not tokens.
	serve := start(t, s, "serve", "serve", "--data", dir, "--plan", s.planFile, "--addr", "127.0.0.1:0", "--log-level", "warn", "--settle", "1ms", "--admission", "open")
	return measure(t, s, "sqlite (blanket serve)", []*proc{serve}, []string{serve.url}, serve.url, nil)
}

func runPG(t *testing.T, s setup, k int) result {
	dir := t.TempDir()
	token := filepath.Join(dir, "batch.token")
	if _, _, err := secrets.LoadOrCreateToken(token); err != nil {
		t.Fatal(err)
	}
	sdb, cdb := pgtest.URL(t), pgtest.URL(t)
	var procs []*proc
	var collectors, shufflers []string
	for i := range k {
		c := start(t, s, fmt.Sprintf("collector-%d", i+1), "collector", "--data", filepath.Join(dir, fmt.Sprint("c", i)), "--plan", s.planFile,
			"--store", cdb, "--token-file", token, "--addr", "127.0.0.1:0", "--log-level", "warn", "--shuffler-admission", "open")
		procs, collectors = append(procs, c), append(collectors, c.url)
	}
	for i := range k {
		sh := start(t, s, fmt.Sprintf("shuffler-%d", i+1), "shuffler", "--data", filepath.Join(dir, fmt.Sprint("s", i)), "--plan", s.planFile,
			"--store", sdb, "--token-file", token, "--collector", collectors[i%k], "--addr", "127.0.0.1:0", "--log-level", "warn", "--settle", "1ms", "--admission", "open")
		procs, shufflers = append(procs, sh), append(shufflers, sh.url)
	}
	return measure(t, s, fmt.Sprintf("postgres, %d+%d replicas", k, k), procs, shufflers, collectors[0], postgresPIDs)
}

// measure uploads s.n reports to the shufflers and waits until the
// collectors counted all but what the pool keeps while the period is open
// (fewer than 2·n_min).
func measure(t *testing.T, s setup, name string, procs []*proc, shufflers []string, collector string, pgPIDs func() []int) result {
	ctx := context.Background()
	var raw0 json.RawMessage
	if err := getJSON(collector+"/v1/plan", &raw0); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse(raw0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	period := report.Period{Start: now / 86400 * 86400, Length: 86400}
	pk := servertest.KeyOf(t, p, period)
	key := report.PeriodPoolKey(metric, p.Epoch(), period)
	m := p.Metric(metric)
	r, err := krr.New(krr.Options{Categories: m.Categories, Other: m.Other})
	if err != nil {
		t.Fatal(err)
	}
	values := make([]string, sealedPool)
	for i := range values {
		values[i] = m.Categories[rand.IntN(len(m.Categories))]
	}
	reps, err := r.Randomize(ctx, m.Eps0, sdk.Inputs{Categories: values})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Binding(metric)
	b.Period = period
	sealed := make([][]byte, len(reps))
	for i, rep := range reps {
		if sealed[i], err = report.Seal(pk, b, rep); err != nil {
			t.Fatal(err)
		}
	}
	before := ingested(t, collector)
	pg0 := cpuOf(pgPIDs)
	var load0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &load0)

	var next, retries atomic.Int64
	lat := make([][]time.Duration, s.conns)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range s.conns {
		wg.Go(func() {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: time.Minute}
			url := shufflers[w%len(shufflers)] + "/v1/reports"
			envs := make([]report.Envelope, 0, s.per)
			for {
				lo := int(next.Add(int64(s.per))) - s.per
				if lo >= s.n {
					return
				}
				envs = envs[:0]
				for i := lo; i < min(lo+s.per, s.n); i++ {
					envs = append(envs, report.Envelope{ID: report.NewID(), Metric: key, Suite: report.SuiteX25519ChaCha, Sealed: sealed[i%sealedPool]})
				}
				body := report.EncodeEnvelopes(envs)
				for {
					t0 := time.Now()
					resp, err := hc.Post(url, "application/octet-stream", bytes.NewReader(body))
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusAccepted {
							lat[w] = append(lat[w], time.Since(t0))
							break
						}
						err = fmt.Errorf("%s", resp.Status)
					}
					// As the SDK's outbox: retry the same envelopes.
					retries.Add(1)
					if retries.Load() > int64(s.n/s.per) {
						t.Errorf("upload: %v (too many retries)", err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	uploadTime := time.Since(start)
	// Everything but what the pool keeps while its period is open (n_min
	// to 2·n_min−1 reports: the shufflers release as reports arrive,
	// --settle 1ms) reaches the collectors.
	want := before + int64(s.n-2*s.nMin)
	var got int64
	deadline := time.Now().Add(30 * time.Minute)
	for {
		got = ingested(t, collector)
		if got > want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d reports ingested after 30 min", name, got-before, s.n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	var load1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &load1)
	res := result{name: name, ingested: got - before, elapsed: elapsed, uploadTime: uploadTime, retries: retries.Load(),
		loadCPU: tv(load1.Utime) + tv(load1.Stime) - tv(load0.Utime) - tv(load0.Stime)}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		res.p50, res.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	for _, pr := range procs {
		cpu, hwm := procCPU(pr.cmd.Process.Pid), procHWM(pr.cmd.Process.Pid)
		res.procs = append(res.procs, procStat{name: pr.name, cpu: cpu, hwm: hwm})
	}
	if pgPIDs != nil {
		res.postgresCPU = cpuOf(pgPIDs) - pg0
		for _, pid := range pgPIDs() {
			res.postgresRSS = max(res.postgresRSS, procHWM(pid))
		}
	}
	for _, pr := range procs {
		pr.stop()
	}
	return res
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// ingested returns the valid reports the collectors counted.
func ingested(t *testing.T, collector string) int64 {
	var list struct {
		Metrics []struct {
			Name string `json:"name"`
			N    int64  `json:"n"`
		} `json:"metrics"`
	}
	if err := getJSON(collector+"/v1/metrics", &list); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range list.Metrics {
		n += m.N
	}
	return n
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// procCPU returns the user and system time of process pid (Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

// procHWM returns the peak resident set of process pid (VmHWM).
func procHWM(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// postgresPIDs lists the processes named postgres (the test server's).
func postgresPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == "postgres" {
			out = append(out, pid)
		}
	}
	return out
}

// cpuOf sums the CPU time of the processes pids lists (0 for nil).
func cpuOf(pids func() []int) time.Duration {
	if pids == nil {
		return 0
	}
	var d time.Duration
	for _, pid := range pids() {
		d += procCPU(pid)
	}
	return d
}

func printResults(w io.Writer, s setup, rs []result) {
	fmt.Fprintf(w, "\n%d reports, %d connections uploading %d reports each time, n_min %d\n\n", s.n, s.conns, s.per, s.nMin)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "configuration\treports/s\tupload reports/s\tupload p50\tupload p99\tretries\tpeak RSS per process (MB)\tCPU ms per 1000 reports")
	per1k := func(d time.Duration, n int64) string {
		return fmt.Sprintf("%.0f", float64(d.Milliseconds())*1000/float64(n))
	}
	for _, r := range rs {
		var rss, cpu []string
		for _, p := range r.procs {
			rss = append(rss, fmt.Sprintf("%s %.0f", p.name, float64(p.hwm)/(1<<20)))
			cpu = append(cpu, p.name+" "+per1k(p.cpu, r.ingested))
		}
		if r.postgresCPU > 0 {
			rss = append(rss, fmt.Sprintf("postgres (largest) %.0f", float64(r.postgresRSS)/(1<<20)))
			cpu = append(cpu, "postgres "+per1k(r.postgresCPU, r.ingested))
		}
		cpu = append(cpu, "apps "+per1k(r.loadCPU, r.ingested))
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%v\t%v\t%d\t%s\t%s\n", r.name, float64(r.ingested)/r.elapsed.Seconds(), float64(s.n)/r.uploadTime.Seconds(),
			r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.retries, strings.Join(rss, ", "), strings.Join(cpu, ", "))
	}
	tw.Flush()
}
