//go:build audit

package ksubset_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestMain removes the binaries the tests built (the blanket CLI and the
// plugin blanket-ksubset).
// TestMain removes the binaries the walkthrough builds.
func TestMain(m *testing.M) { os.Exit(testbuild.Main(m)) }

// The walkthrough of docs/plugins.md that TestDocsWalkthrough runs.
const (
	docsFile = "../../docs/plugins.md"
	// walkthrough is the section's heading.
	walkthrough = "## Writing a plugin: k-subset from nothing to blanket serve"
	// mark is the line before each fenced block whose commands the test
	// runs.
	mark   = "<!-- docs_audit_test.go runs this block -->"
	module = "github.com/blanket-dp/blanket"
	// docAddr is the address the section's serve and curl use; the test
	// serves on a free port instead.
	docAddr = "127.0.0.1:8080"
)

// section returns the walkthrough section of docs/plugins.md: from its
// heading to the next heading of its level.
func section(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n"+walkthrough+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", docsFile, walkthrough)
	}
	s := doc[i+1:]
	if j := strings.Index(s[len(walkthrough):], "\n## "); j >= 0 {
		s = s[:len(walkthrough)+j+1]
	}
	return s
}

// commands returns the command lines of the section's marked blocks
// (```sh fences after the mark), each split into words. The commands
// use no quoting, variables or continuations, so that splitting at
// spaces is how a shell reads them; a line that does fails the test.
func commands(t *testing.T, sec string) [][]string {
	t.Helper()
	lines := strings.Split(sec, "\n")
	var out [][]string
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != mark {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			t.Fatalf("%s: the line after %q is not a ```sh fence", docsFile, mark)
		}
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			line := strings.TrimSpace(lines[i])
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.ContainsAny(line, "\"'\\$`|;&<>*") {
				t.Fatalf("%s: %q needs a shell to run; keep the walkthrough's commands plain", docsFile, line)
			}
			out = append(out, strings.Fields(line))
		}
	}
	return out
}

// reader is the reader of the walkthrough: a working directory standing
// for the repository's root, with the binaries built where the section
// builds them and examples/ linked to the repository's.
type reader struct {
	t      *testing.T
	dir    string
	outs   map[string]string // stdout of each command run, by its line
	server string            // the serve command's public URL
	admin  string            // its admin URL
}

// TestDocsWalkthrough runs the commands of the walkthrough in
// docs/plugins.md as a reader would, in order, from a directory that
// stands for the repository's root: go build (the CLI and the plugin,
// through internal/testbuild), blanket plugin verify, account eps and
// calibrate, plan, serve (on a free port instead of 8080, until the test
// ends) and curl (an HTTP GET, after 10,000 apps have reported as the
// section says). Every command must exit 0, a command the test does not
// know fails it (so the section gains no untested command), and the
// outputs must say what the section says they say: verify's bare PASS,
// the numbers quoted in its prose, and estimates near the truth.
func TestDocsWalkthrough(t *testing.T) {
	sec := section(t)
	cmds := commands(t, sec)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{t: t, dir: t.TempDir(), outs: map[string]string{}}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(r.dir, "examples")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		line := strings.Join(c, " ")
		switch {
		case len(c) == 5 && c[0] == "go" && c[1] == "build" && c[2] == "-o" && strings.HasPrefix(c[4], "./"):
			r.build(c[3], c[4])
		case c[0] == "bin/blanket" && len(c) > 1 && c[1] == "serve":
			r.serve(c[1:])
		case c[0] == "bin/blanket":
			r.outs[line] = r.run(c[1:])
		case len(c) == 3 && c[0] == "curl" && c[1] == "-s":
			r.curl(c[2])
		default:
			t.Fatalf("the walkthrough runs %q, which this test does not know how to run", line)
		}
	}
	checkOutputs(t, sec, r.outs)
	if r.server == "" {
		t.Error("the walkthrough never runs blanket serve")
	}
}

// build makes out (relative to the reader's directory) the binary of the
// main package pkg (./path in the repository).
func (r *reader) build(out, pkg string) {
	bin := testbuild.Named(r.t, module+"/"+strings.TrimPrefix(pkg, "./"), path.Base(out))
	dst := filepath.Join(r.dir, out)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Symlink(bin, dst); err != nil {
		r.t.Fatal(err)
	}
}

// blanket returns the command bin/blanket args in the reader's directory.
func (r *reader) blanket(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(r.dir, "bin", "blanket"), args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "BLANKET_PLUGIN_DIR=") // the section names --plugin-dir
	return cmd
}

// run runs bin/blanket args and returns its stdout; it must exit 0.
func (r *reader) run(args []string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := r.blanket(ctx, args)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("bin/blanket %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	r.t.Logf("bin/blanket %s: %.1f s", strings.Join(args, " "), time.Since(start).Seconds())
	return stdout.String()
}

// lines is a buffer of a process's output, safe for its writer and a
// reader.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve starts bin/blanket serve args, with the section's address
// replaced by a free port, until the test ends (SIGINT, as Ctrl-C, then
// it must exit 0), and waits until it prints where it listens.
func (r *reader) serve(args []string) {
	t := r.t
	args = slices.Clone(args)
	i := slices.Index(args, docAddr)
	if i < 1 || args[i-1] != "--addr" {
		t.Fatalf("blanket serve %v: the walkthrough serves on --addr %s, which the test replaces", args, docAddr)
	}
	args[i] = "127.0.0.1:0"
	cmd := r.blanket(context.Background(), args)
	out, errOut := &lines{}, &lines{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("blanket serve: %v\n%s", err, errOut)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("blanket serve did not stop on SIGINT\n%s", errOut)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for r.admin == "" {
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 5 && f[1] == "serve" && f[2] == "listening":
				r.server = strings.TrimPrefix(f[len(f)-1], "http://")
			case len(f) == 6 && f[2] == "admin" && f[3] == "listening":
				r.admin = f[len(f)-1]
			}
		}
		select {
		case err := <-done:
			t.Fatalf("blanket serve exited before listening: %v\n%s", err, errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("blanket serve did not say where it listens\n%s%s", out, errOut)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// curl plays the apps of the section (n_min of them report a browser
// each, through the app SDK's opener with ksubset linked as the section
// shows), has the shuffler release the period (as at its end), and reads
// url back (the section's address replaced by the server's), checking
// every estimate against the truth.
func (r *reader) curl(url string) {
	t := r.t
	if r.server == "" {
		t.Fatalf("curl %s before blanket serve", url)
	}
	url = "http://" + strings.Replace(strings.TrimPrefix(url, "http://"), docAddr, r.server, 1)
	var p plan.Plan
	getJSON(t, "http://"+r.server+"/v1/plan", &p)
	const metric = "web/browser"
	m := p.Metric(metric)
	if m == nil || m.Plugin != ksubset.Name {
		t.Fatalf("the served plan has no ksubset metric %s: %+v", metric, p.Metrics)
	}
	values, truth := browsers(p.NMin)

	// The app side, as the section shows it: the SDK's randomizers plus
	// ksubset, in process.
	f := client.DefaultRandomizers()
	f[ksubset.Name] = sdk.FactoryOf(ksubset.FromConfig)
	open := client.InProcess(f)
	rz, err := open(context.Background(), m.Plugin, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	reps, err := rz.Randomize(context.Background(), m.Eps0, sdk.Inputs{Categories: values})
	if err != nil {
		t.Fatal(err)
	}
	period := p.ReportPeriod(time.Now())
	key := servertest.KeyOf(t, &p, period)
	b := p.Binding(metric)
	b.Period = period
	envs := make([]report.Envelope, len(reps))
	for i, rep := range reps {
		sealed, err := report.Seal(key, b, rep)
		if err != nil {
			t.Fatal(err)
		}
		envs[i] = report.Envelope{ID: report.NewID(), Metric: report.PeriodPoolKey(metric, p.Epoch(), period), Suite: report.SuiteX25519ChaCha, Sealed: sealed}
	}
	for i := 0; i < len(envs); i += 1000 {
		post(t, "http://"+r.server+"/v1/reports", report.EncodeEnvelopes(envs[i:min(i+1000, len(envs))]), http.StatusAccepted)
	}
	through := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	post(t, r.admin+"/v1/pools/close?force=true&through="+through, nil, http.StatusOK)

	var d struct {
		Periods []struct {
			N         int64
			Estimates []struct {
				Label           string
				Value, Variance float64
			}
			Guarantee *struct{ Eps, Delta float64 }
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(d.Periods) != 1 || d.Periods[0].N != int64(len(values)) {
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never showed the %d reports: %+v", url, len(values), d)
		}
		time.Sleep(50 * time.Millisecond)
		getJSON(t, url, &d)
	}
	e := d.Periods[0]
	if len(e.Estimates) != len(m.Categories)+1 {
		t.Fatalf("%d estimates, want %d buckets", len(e.Estimates), len(m.Categories)+1)
	}
	// The estimates are unbiased and close to normal with the reported
	// variance: a z-test each, at a 1e-6 false-failure rate split over the
	// buckets.
	z := distuv.UnitNormal.Quantile(1 - 1e-6/float64(2*len(e.Estimates)))
	for _, it := range e.Estimates {
		if dev := math.Abs(it.Value - float64(truth[it.Label])); !(dev <= z*math.Sqrt(it.Variance)) {
			t.Errorf("%s: estimate %.0f, truth %d, sd %.0f", it.Label, it.Value, truth[it.Label], math.Sqrt(it.Variance))
		}
	}
	if g := e.Guarantee; g == nil || !(g.Eps > 0 && g.Eps <= p.Target.Eps) {
		t.Errorf("the period's guarantee %+v, want eps in (0, %g]", g, p.Target.Eps)
	}
	t.Logf("GET %s: %d reports at eps0 = %.4g, %s estimated %.0f ± %.0f (truth %d), central guarantee %+v",
		url, e.N, m.Eps0, e.Estimates[0].Label, e.Estimates[0].Value, math.Sqrt(e.Estimates[0].Variance), truth[e.Estimates[0].Label], e.Guarantee)
}

// browsers returns n browser names, chrome 50%, safari 25%, firefox 10%,
// edge 5% and netscape (the other bucket) 10%, and the true count of each
// bucket.
func browsers(n int) ([]string, map[string]int) {
	out := make([]string, n)
	truth := map[string]int{}
	for i := range out {
		switch j := i % 20; {
		case j < 10:
			out[i] = "chrome"
		case j < 15:
			out[i] = "safari"
		case j < 17:
			out[i] = "firefox"
		case j < 18:
			out[i] = "edge"
		default:
			out[i] = "netscape"
		}
		label := out[i]
		if label == "netscape" {
			label = "other"
		}
		truth[label]++
	}
	return out, truth
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func post(t *testing.T, url string, body []byte, want int) {
	t.Helper()
	resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s: %s", url, resp.Status, b)
	}
}

// checkOutputs checks what the section says of its commands' outputs.
func checkOutputs(t *testing.T, sec string, outs map[string]string) {
	t.Helper()
	find := func(words ...string) string {
		t.Helper()
		for line, out := range outs {
			if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
				return out
			}
		}
		t.Fatalf("the walkthrough runs no command with %q", words)
		return ""
	}
	// plugin verify, at the size it ships and on a small configuration
	// with --strict: a bare PASS, the sampler checked.
	for _, words := range [][]string{{"plugin verify", "--categories 100"}, {"plugin verify", "--categories 8", "--strict"}} {
		out := strings.TrimSpace(find(words...))
		if last := out[strings.LastIndex(out, "\n")+1:]; last != "PASS" || !strings.Contains(out, "PASS frequencies") {
			t.Errorf("%v: the report does not end in a bare PASS with the frequencies checked:\n%s", words, out)
		}
	}
	// account eps: 0 < lower <= upper < eps0.
	eps := find("account eps", "ksubset:k=100:s=12")
	lo, up := field(t, eps, "lower"), field(t, eps, "upper")
	if !(0 < lo && lo <= up && up < 4) {
		t.Errorf("account eps: lower %v, upper %v; want 0 < lower <= upper < eps0 = 4", lo, up)
	}
	// account calibrate: the eps0 of s = 12 and s = 1 and what they mean
	// for the variance, as the prose quotes them.
	e12 := field(t, find("account calibrate", "ksubset:k=100:s=12"), "this work")
	e1 := field(t, find("account calibrate", "ksubset:k=100:s=1 "), "this work")
	rare := func(s int, eps0 float64) float64 {
		r, err := ksubset.New(ksubset.Options{Categories: make100(), S: s})
		if err != nil {
			t.Fatal(err)
		}
		p := r.Pure(eps0)
		return p.Q * (1 - p.Q) / (p.Diff * p.Diff)
	}
	for _, want := range []string{
		fmt.Sprintf("%.1f times less variance", rare(1, 2)/rare(12, 2)),
		fmt.Sprintf("eps0 = %.2f with s = 12", e12),
		fmt.Sprintf("%.2f with s = 1", e1),
		fmt.Sprintf("%.1f times the variance", rare(12, e12)/rare(1, e1)),
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the walkthrough does not say %q, which the commands give", want)
		}
	}
	if !(e1 > e12) || !(rare(12, e12) > rare(1, e1)) {
		t.Errorf("calibrated eps0 %v (s = 12), %v (s = 1): the walkthrough says k-RR calibrates higher and estimates better", e12, e1)
	}
}

// field returns the number after name at the start of a line of a
// command's table.
func field(t *testing.T, out, name string) float64 {
	t.Helper()
	for l := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), name+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	t.Fatalf("no %q in\n%s", name, out)
	return 0
}

func make100() []string {
	out := make([]string, 100)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}
