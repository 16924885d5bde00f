//go:build unix

package plugin_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// goneTimeout is how long a killed or orphaned plugin process may take to
// disappear: the orphan watcher polls once a second, and a loaded CI machine
// running the race detector may be slow to schedule it.
const goneTimeout = 15 * time.Second

// processGone reports whether pid no longer runs: it does not exist or is a
// zombie waiting to be reaped.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false // no procfs: the process exists
	}
	// The state follows the parenthesized command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(goneTimeout)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin process %d still running %v later", pid, goneTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func openTest(t *testing.T, params map[string]string, opts ...plugin.Option) host.Plugin {
	t.Helper()
	dir := buildPlugin(t, "testplugin")
	p, err := plugin.Open(context.Background(), "testplugin",
		sdk.Config{Categories: []string{"a", "b", "c"}, Params: params},
		append([]plugin.Option{plugin.WithPluginDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func randomizeABC(ctx context.Context, p sdk.Randomizer) error {
	reports, err := p.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"a", "b", "c", "a"}})
	if err == nil && len(reports) != 4 {
		err = fmt.Errorf("%d reports for 4 inputs", len(reports))
	}
	return err
}

func TestOpenBuiltin(t *testing.T) {
	ctx := context.Background()
	for _, pc := range pluginCases() {
		p, err := builtin.Open(ctx, pc.name, pc.cfg, plugin.WithPluginDir(""))
		if err != nil {
			t.Fatalf("%s: %v", pc.name, err)
		}
		if p.Path() != "" || p.Name() != pc.name {
			t.Errorf("%s: Path %q Name %q, want built-in", pc.name, p.Path(), p.Name())
		}
		d, err := p.Describe(ctx)
		if err != nil || d.Name != pc.name {
			t.Errorf("%s: Describe = %v, %v", pc.name, d, err)
		}
		if _, err := p.Randomize(ctx, 1, pc.inputs(10)); err != nil {
			t.Errorf("%s: Randomize: %v", pc.name, err)
		}
		_ = p.Close()
		if _, err := p.Describe(ctx); !errors.Is(err, sdk.ErrClosed) {
			t.Errorf("%s: Describe after Close: %v, want ErrClosed", pc.name, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	empty := t.TempDir()
	notExec := t.TempDir()
	if err := os.WriteFile(filepath.Join(notExec, "blanket-krr"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  sdk.Config
		opts []plugin.Option
		want error
	}{
		{"../krr", sdk.Config{}, nil, sdk.ErrBadConfig},
		{"Krr", sdk.Config{}, nil, sdk.ErrBadConfig},
		{"", sdk.Config{}, nil, sdk.ErrBadConfig},
		{"krr", sdk.Config{}, []plugin.Option{plugin.WithPluginDir("")}, sdk.ErrPluginNotFound},
		{"krr", sdk.Config{}, []plugin.Option{plugin.WithPluginDir(empty)}, sdk.ErrPluginNotFound},
		{"krr", sdk.Config{}, []plugin.Option{plugin.WithPluginDir(notExec)}, sdk.ErrPluginNotFound},
		{"krr", sdk.Config{}, []plugin.Option{plugin.WithBuiltins(builtin.Factories())}, sdk.ErrBadConfig},
		{"krr", sdk.Config{Categories: []string{"a", "b"}}, []plugin.Option{plugin.WithBuiltins(builtin.Factories()), plugin.WithChecksum([]byte{1})}, sdk.ErrBadConfig},
		{"krr", sdk.Config{Categories: []string{"a", "b"}}, []plugin.Option{plugin.WithBuiltins(builtin.Factories()), plugin.WithChecksum([]byte{})}, sdk.ErrBadConfig},
		{"krr", sdk.Config{Categories: []string{"a", "b"}}, []plugin.Option{plugin.WithBuiltins(builtin.Factories()), plugin.WithCallTimeout(0)}, sdk.ErrBadConfig},
	}
	for _, tc := range cases {
		p, err := plugin.Open(ctx, tc.name, tc.cfg, tc.opts...)
		if !errors.Is(err, tc.want) {
			t.Errorf("Open(%q, %+v): %v, want %v", tc.name, tc.cfg, err, tc.want)
		}
		if p != nil {
			t.Errorf("Open(%q) returned a plugin with an error", tc.name)
		}
	}
}

// TestOpenSubprocess loads each real plugin binary and checks it against
// the built-in randomizer of the same configuration.
func TestOpenSubprocess(t *testing.T) {
	ctx := context.Background()
	const eps0 = 2.0
	for _, pc := range pluginCases() {
		t.Run(pc.name, func(t *testing.T) {
			dir := buildPlugin(t, pc.name)
			p, err := plugin.Open(ctx, pc.name, pc.cfg, plugin.WithPluginDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Path() != filepath.Join(dir, "blanket-"+pc.name) {
				t.Errorf("Path = %q", p.Path())
			}
			local, err := builtin.Factories()[pc.name](pc.cfg)
			if err != nil {
				t.Fatal(err)
			}

			wantDesc, _ := local.Describe(ctx)
			gotDesc, err := p.Describe(ctx)
			if err != nil || !reflect.DeepEqual(gotDesc, wantDesc) {
				t.Fatalf("Describe = %+v, %v\nwant %+v", gotDesc, err, wantDesc)
			}
			wantDecl, _ := local.Declare(ctx, eps0)
			gotDecl, err := p.Declare(ctx, eps0)
			if err != nil {
				t.Fatal(err)
			}
			checkDeclarationBits(t, gotDecl, wantDecl)

			in := pc.inputs(4096)
			reports, err := p.Randomize(ctx, eps0, in)
			if err != nil || len(reports) != in.Len() {
				t.Fatalf("Randomize: %d reports, %v", len(reports), err)
			}
			stat, err := p.Accumulate(ctx, eps0, reports)
			if err != nil || stat.N != int64(len(reports)) || stat.Malformed != 0 {
				t.Fatalf("Accumulate of the plugin's own reports = %+v, %v", stat, err)
			}
			wantStat, _ := local.Accumulate(ctx, eps0, reports)
			if !reflect.DeepEqual(stat, wantStat) {
				t.Fatalf("Accumulate = %+v, in process %+v", stat, wantStat)
			}
			est, err := p.Estimate(ctx, stat)
			if err != nil {
				t.Fatal(err)
			}
			wantEst, _ := local.Estimate(ctx, wantStat)
			if !reflect.DeepEqual(est, wantEst) {
				t.Fatalf("Estimate = %+v, in process %+v", est, wantEst)
			}
			if _, err := p.Randomize(ctx, eps0, sdk.Inputs{Categories: []string{"no such"}, Reals: []float64{1}}); !errors.Is(err, sdk.ErrBadInput) {
				t.Errorf("Randomize of mixed inputs: %v, want ErrBadInput", err)
			}
			if _, err := p.Declare(ctx, -1); !errors.Is(err, sdk.ErrBadEps0) {
				t.Errorf("Declare(-1): %v, want ErrBadEps0", err)
			}
		})
	}
}

func TestOpenChecksum(t *testing.T) {
	ctx := context.Background()
	dir := buildPlugin(t, "krr")
	b, err := os.ReadFile(filepath.Join(dir, "blanket-krr"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	cfg := sdk.Config{Categories: []string{"a", "b"}}

	p, err := plugin.Open(ctx, "krr", cfg, plugin.WithPluginDir(dir), plugin.WithChecksum(sum[:]))
	if err != nil {
		t.Fatalf("Open with the right checksum: %v", err)
	}
	if err := randomizeABC(ctx, p); err == nil || !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("Randomize with c outside {a, b}: %v, want ErrBadInput", err)
	}
	_ = p.Close()

	sum[0] ^= 1
	p, err = plugin.Open(ctx, "krr", cfg, plugin.WithPluginDir(dir), plugin.WithChecksum(sum[:]))
	if !errors.Is(err, sdk.ErrPluginFailed) || !errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
		t.Fatalf("Open with a wrong checksum: %v, want ErrPluginFailed and ErrChecksumsDoNotMatch", err)
	}
	if p != nil {
		t.Fatal("Open with a wrong checksum returned a plugin")
	}
}

// TestCallTimeout: a plugin that hangs in Randomize fails that call after
// the call timeout and is replaced by a fresh process.
func TestCallTimeout(t *testing.T) {
	ctx := context.Background()
	const timeout = 500 * time.Millisecond
	p := openTest(t, map[string]string{"hang": "randomize"}, plugin.WithCallTimeout(timeout))
	pid := plugin.PID(p)
	start := time.Now()
	err := randomizeABC(ctx, p)
	if !errors.Is(err, sdk.ErrPluginFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Randomize on a hung plugin: %v, want ErrPluginFailed and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > goneTimeout {
		t.Errorf("Randomize took %v with a %v timeout", d, timeout)
	}
	waitGone(t, pid)
	if _, err := p.Describe(ctx); err != nil {
		t.Fatalf("Describe after the timeout: %v", err)
	}
	if got := plugin.PID(p); got == pid || got == 0 {
		t.Errorf("pid after restart = %d, was %d", got, pid)
	}
	if n := p.Restarts(); n != 1 {
		t.Errorf("Restarts() = %d after one hung process was replaced, want 1", n)
	}
}

func TestCallerDeadline(t *testing.T) {
	p := openTest(t, map[string]string{"hang": "randomize"})
	pid := plugin.PID(p)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := randomizeABC(ctx, p)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sdk.ErrPluginFailed) {
		t.Fatalf("Randomize past the caller's deadline: %v, want DeadlineExceeded only", err)
	}
	if plugin.PID(p) != pid || p.Restarts() != 0 {
		t.Errorf("the caller's own deadline restarted the plugin (Restarts() = %d)", p.Restarts())
	}
}

func TestStartHang(t *testing.T) {
	dir := buildPlugin(t, "testplugin")
	_, err := plugin.Open(context.Background(), "testplugin",
		sdk.Config{Categories: []string{"a", "b"}, Params: map[string]string{"hang": "configure"}},
		plugin.WithPluginDir(dir), plugin.WithCallTimeout(300*time.Millisecond))
	if !errors.Is(err, sdk.ErrPluginFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open of a plugin that hangs in Configure: %v, want ErrPluginFailed and DeadlineExceeded", err)
	}
}

// TestRestartAfterKill kills the plugin process; the next call starts a new
// one, whether or not the host has noticed the death yet.
func TestRestartAfterKill(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, nil)
	for i := range 3 {
		pid := plugin.PID(p)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			waitGone(t, pid) // noticed: restart before the call
		} // else: probably not noticed: the call fails and is retried
		if err := randomizeABC(ctx, p); err != nil {
			t.Fatalf("Randomize after kill %d: %v", i, err)
		}
		if got := plugin.PID(p); got == pid || got == 0 {
			t.Fatalf("pid after kill %d = %d, was %d", i, got, pid)
		}
		if n := p.Restarts(); n != int64(i+1) {
			t.Fatalf("Restarts() = %d after %d kills", n, i+1)
		}
	}
}

// TestRetryWithinCall: the plugin dies during the call; the call is retried
// on a new process and succeeds.
func TestRetryWithinCall(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, map[string]string{"crash_once": filepath.Join(t.TempDir(), "crashed")})
	pid := plugin.PID(p)
	if err := randomizeABC(ctx, p); err != nil {
		t.Fatalf("Randomize on a plugin that crashes once: %v", err)
	}
	if got := plugin.PID(p); got == pid {
		t.Error("the plugin was not restarted")
	}
	waitGone(t, pid)
}

// TestCrashEveryTime: a call that crashes the plugin twice fails; other
// calls still work.
func TestCrashEveryTime(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, map[string]string{"crash": "randomize"})
	if err := randomizeABC(ctx, p); !errors.Is(err, sdk.ErrPluginFailed) {
		t.Fatalf("Randomize on a plugin that always crashes: %v, want ErrPluginFailed", err)
	}
	if _, err := p.Describe(ctx); err != nil {
		t.Fatalf("Describe after the crashes: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPanicContained: a panic in the plugin's randomizer fails that call
// with codes.Internal, keeps the process, and reaches the host's logger as
// a structured error entry (the plugin logs hclog JSON on stderr; lines that
// are not JSON would arrive at debug level and be filtered out here).
func TestPanicContained(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info, JSONFormat: true})
	p := openTest(t, map[string]string{"panic": "declare"}, plugin.WithLogger(logger))
	pid := plugin.PID(p)
	_, err := p.Declare(ctx, 1)
	if status.Code(err) != codes.Internal || errors.Is(err, sdk.ErrPluginFailed) {
		t.Fatalf("Declare on a panicking plugin: %v, want codes.Internal", err)
	}
	if err := randomizeABC(ctx, p); err != nil || plugin.PID(p) != pid {
		t.Fatalf("after a panic: %v, pid %d, was %d", err, plugin.PID(p), pid)
	}
	_ = p.Close() // flushes the plugin's stderr
	var found bool
	for line := range strings.Lines(logs.String()) {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil &&
			entry["@level"] == "error" && entry["@message"] == "randomizer panicked" && entry["method"] == "Declare" {
			found = true
		}
	}
	if !found {
		t.Errorf("no structured panic report in the host's log:\n%s", logs.String())
	}
}

func TestPluginLies(t *testing.T) {
	dir := buildPlugin(t, "testplugin")
	_, err := plugin.Open(context.Background(), "testplugin",
		sdk.Config{Categories: []string{"a", "b"}, Params: map[string]string{"name": "krr"}}, plugin.WithPluginDir(dir))
	if !errors.Is(err, sdk.ErrPluginFailed) {
		t.Fatalf("Open of a plugin describing itself as another: %v, want ErrPluginFailed", err)
	}
	_, err = plugin.Open(context.Background(), "testplugin",
		sdk.Config{Categories: []string{"a", "a"}}, plugin.WithPluginDir(dir))
	if !errors.Is(err, sdk.ErrBadConfig) || errors.Is(err, sdk.ErrPluginFailed) {
		t.Fatalf("Open with duplicate categories: %v, want ErrBadConfig only", err)
	}
}

func TestCloseNoOrphan(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, nil)
	pid := plugin.PID(p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("plugin process %d still running after Close returned", pid)
	}
	if err := randomizeABC(ctx, p); !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("Randomize after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseDuringCall: Close stops a plugin hung in a call, and the call
// returns ErrClosed.
func TestCloseDuringCall(t *testing.T) {
	p := openTest(t, map[string]string{"hang": "randomize"})
	pid := plugin.PID(p)
	done := make(chan error, 1)
	go func() { done <- randomizeABC(context.Background(), p) }()
	time.Sleep(100 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("plugin process %d still running after Close returned", pid)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sdk.ErrClosed) {
			t.Errorf("call interrupted by Close: %v, want ErrClosed", err)
		}
	case <-time.After(goneTimeout):
		t.Fatal("call still blocked after Close")
	}
}

// TestBatchSplitting lowers the request size so that batches are split into
// many RPCs, and checks that results are reassembled in order.
func TestBatchSplitting(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, nil, plugin.WithMaxRequestBytes(64))
	in := make([]string, 1000)
	for i := range in {
		in[i] = []string{"a", "b", "c"}[i%3]
	}
	reports, err := p.Randomize(ctx, 8, sdk.Inputs{Categories: in})
	if err != nil || len(reports) != len(in) {
		t.Fatalf("Randomize: %d reports, %v", len(reports), err)
	}
	// At eps0 = 8 a report keeps its input with probability
	// e^8/(e^8+2) > 0.9993; 1000 inputs in fixed order yield the bucket
	// sequence 0,1,2,... except for about one flip. Reassembly out of order
	// would disagree in about 2/3 of positions.
	agree := 0
	for i, r := range reports {
		if len(r) == 1 && int(r[0]) == i%3 {
			agree++
		}
	}
	if agree < 900 {
		t.Errorf("only %d of 1000 reports match their input's bucket", agree)
	}
	stat, err := p.Accumulate(ctx, 8, append(reports, []byte{9, 9}))
	if err != nil || stat.N != 1000 || stat.Malformed != 1 {
		t.Fatalf("Accumulate = %+v, %v", stat, err)
	}
	in[900] = "zzz"
	if _, err := p.Randomize(ctx, 8, sdk.Inputs{Categories: in}); !errors.Is(err, sdk.ErrBadInput) {
		t.Fatalf("Randomize with a bad input in a later chunk: %v, want ErrBadInput", err)
	}
	// Blanket draws go in calls of at most 64 bytes' worth of reports too.
	draws, err := p.SampleBlanket(ctx, 8, 1000)
	if err != nil || len(draws) != 1000 {
		t.Fatalf("SampleBlanket: %d draws, %v", len(draws), err)
	}
	for i, r := range draws {
		if len(r) != 1 || r[0] >= 3 {
			t.Fatalf("draw %d is %x, not a report of 3 buckets", i, r)
		}
	}
}

// TestConcurrentCallsSurviveKill runs calls from several goroutines while
// the plugin process is killed once: every call succeeds.
func TestConcurrentCallsSurviveKill(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, nil)
	const workers, calls = 8, 25
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, workers*calls)
	for range workers {
		wg.Go(func() {
			<-start
			for range calls {
				errs <- randomizeABC(ctx, p)
			}
		})
	}
	pid := plugin.PID(p)
	close(start)
	time.Sleep(5 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a call failed across the kill: %v", err)
		}
	}
}

const hostHelperEnv = "BLANKET_TEST_HOST_HELPER"

// TestHostHelper is not a test: TestHostDeathNoOrphan runs the test binary
// as a host process that opens a plugin, prints its pid and waits to be
// killed.
func TestHostHelper(t *testing.T) {
	dir := os.Getenv(hostHelperEnv)
	if dir == "" {
		t.Skip("helper process for TestHostDeathNoOrphan")
	}
	p, err := plugin.Open(context.Background(), "testplugin", sdk.Config{Categories: []string{"a", "b"}}, plugin.WithPluginDir(dir))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("pid", plugin.PID(p))
	time.Sleep(time.Minute)
	os.Exit(1)
}

// TestHostDeathNoOrphan kills a host with SIGKILL, so that it cannot clean
// up, and checks that its plugin process exits by itself.
func TestHostDeathNoOrphan(t *testing.T) {
	dir := buildPlugin(t, "testplugin")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), hostHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	pidStr, ok := strings.CutPrefix(strings.TrimSpace(line), "pid ")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		t.Fatalf("helper host said %q", line)
	}
	if processGone(pid) {
		t.Fatalf("plugin process %d is not running", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, pid)
}

// TestSubprocessEstimateFloor: a statistic with the shuffler's draws
// crosses to a plugin process and back: its EstimateFloor gives what
// k-RR's gives in process, its Estimate refuses the statistic, and a
// panic in EstimateFloor fails that call with codes.Internal and keeps
// the process.
func TestSubprocessEstimateFloor(t *testing.T) {
	ctx := context.Background()
	p := openTest(t, nil)
	in := make([]string, 300)
	for i := range in {
		in[i] = []string{"a", "b", "c"}[i%3]
	}
	reports, err := p.Randomize(ctx, 1, sdk.Inputs{Categories: in})
	if err != nil {
		t.Fatal(err)
	}
	draws, err := p.SampleBlanket(ctx, 1, 200)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := p.Accumulate(ctx, 1, append(reports, draws...))
	if err != nil {
		t.Fatal(err)
	}
	stat.Draws = 200
	got, err := p.EstimateFloor(ctx, stat)
	if err != nil {
		t.Fatal(err)
	}
	local, err := krr.FromConfig(sdk.Config{Categories: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := local.EstimateFloor(ctx, stat)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.N != 300 {
		t.Errorf("EstimateFloor in the plugin process %+v, in process %+v (N = 300 apps' reports)", got, want)
	}
	if _, err := p.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("Estimate of a statistic with draws in the plugin process: %v, want sdk.ErrBadStatistic", err)
	}
	panicking := openTest(t, map[string]string{"panic": "estimate"})
	pid := plugin.PID(panicking)
	if _, err := panicking.EstimateFloor(ctx, stat); status.Code(err) != codes.Internal || errors.Is(err, sdk.ErrPluginFailed) {
		t.Errorf("EstimateFloor on a panicking plugin: %v, want codes.Internal", err)
	}
	if err := randomizeABC(ctx, panicking); err != nil || plugin.PID(panicking) != pid {
		t.Errorf("after a panic in EstimateFloor: %v, pid %d, was %d", err, plugin.PID(panicking), pid)
	}
}
