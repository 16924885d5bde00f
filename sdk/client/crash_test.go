package client_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Environment of the child process of TestCrashRestart.
const (
	childEnv      = "BLANKET_CLIENT_TEST_CHILD" // the number of values to record, or "forever"
	childEndpoint = "BLANKET_CLIENT_TEST_ENDPOINT"
	childDir      = "BLANKET_CLIENT_TEST_DIR"
)

// TestMain runs the child process of TestCrashRestart when asked to;
// otherwise the tests, then removes the binaries they built (the plugin
// of TestPluginDir).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(crashChild())
	}
	os.Exit(testbuild.Main(m))
}

// crashStageInterval is the child's Config.StageInterval: what a crash
// may lose is the Records of the last one.
const crashStageInterval = 20 * time.Millisecond

// crashChild records values into the SQLite outbox in its data dir with
// uploads on, each in a reporting period of its own (Record i at t0 + i
// days), printing "ok" after each Record returns, "staged k" whenever
// the count of Records staged in the outbox (Stats.Recorded, counted once
// a Stage committed) reaches a new k, and "recorded" after the last
// Record; then it waits to be killed. Endless, it records one value
// every millisecond. The Records wait in memory for crashStageInterval
// before they are staged, and a Record does not close the period before
// it: the stager does, after staging (buffer.go).
func crashChild() int {
	ctx := context.Background()
	var clock atomic.Int64 // Unix nanoseconds
	clock.Store(t0.UnixNano())
	p, err := client.NewProvider(ctx, client.Config{
		Mode:          client.ModeOn,
		Endpoint:      os.Getenv(childEndpoint),
		PlanKey:       testPlanKey,
		DataDir:       os.Getenv(childDir),
		MaxEps0:       8,
		BatchSize:     10,
		UploadDelay:   time.Millisecond,
		RetryMin:      5 * time.Millisecond,
		RetryMax:      20 * time.Millisecond,
		StageInterval: crashStageInterval,
		PeriodGrace:   crashGrace,
		Now:           func() time.Time { return time.Unix(0, clock.Load()) },
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	n := -1
	if v := os.Getenv(childEnv); v != "forever" {
		if n, err = strconv.Atoi(v); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	go func() {
		var last int64
		for {
			if k := p.Stats().Recorded; k != last {
				fmt.Println("staged", k)
				last = k
			}
			time.Sleep(time.Millisecond)
		}
	}()
	screen := p.Meter("app").Categorical("screen")
	for i := 0; n < 0 || i < n; i++ {
		clock.Store(t0.Add(time.Duration(i) * day).UnixNano())
		if err := screen.Record(ctx, "home"); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ok")
		if n < 0 {
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Println("recorded")
	select {}
}

// crashGrace is the grace of the child's and the restarted Provider's
// periods: every period the child recorded in is within it at the
// restart, so that a period staged but not closed before the kill closes
// then instead of expiring.
const crashGrace = 100000 * day

// TestCrashRestart kills an app with SIGKILL while it uploads and checks
// that a restart on the same DataDir delivers the report of every period
// whose Record the app had staged, exactly once after the shuffler's
// deduplication: nothing staged is lost (a value staged for a period
// not yet closed is sealed at the restart), nothing doubled, and what
// the kill loses is only the Records still in memory, of the last
// StageInterval.
//
// The server fails the first upload (503), acknowledges the next two, and
// then stores each upload but holds its acknowledgement until the child is
// dead, so that the child dies with stored-but-unacknowledged reports in
// its outbox. The restarted Provider sends them again; the server counts
// the raw deliveries (more than N: retries happened) and the distinct ids
// (between the Records staged and the Records that returned, plus the one
// in flight).
//
// The child records 50 values (each in a period of its own) and is killed
// once all are staged; or it is killed while still recording, after at
// least 100 Records; TestCrashRestartDeep (make audit) records 200 and
// 300.
func TestCrashRestart(t *testing.T) {
	crashRestartBoth(t, 50, 100)
}

// crashRestartBoth runs TestCrashRestart's two cases: killed after n
// Records, and killed while recording after at least running Records.
func crashRestartBoth(t *testing.T, n, running int) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Run("after recording", func(t *testing.T) { crashRestart(t, n, 0) })
	// Killed while still recording: the Records staged before the kill
	// are all delivered, and at most the ones that returned plus the one
	// in flight.
	t.Run("while recording", func(t *testing.T) { crashRestart(t, -1, running) })
}

// crashRestart kills the child once its n Records (n > 0) are staged, or
// after at least running Records of an endless run (n < 0).
func crashRestart(t *testing.T, n, running int) {
	f := newFakeServer(t, nil)
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{}, 100)
	f.setHooks(func(k int, envs []report.Envelope) (int, http.Header, bool) {
		if k == 1 {
			return http.StatusServiceUnavailable, nil, false
		}
		return 0, nil, true
	}, func(k int) {
		if k <= 3 {
			return
		}
		held <- struct{}{}
		<-release // until the child is dead
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })

	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	count := "forever"
	if n > 0 {
		count = strconv.Itoa(n)
	}
	cmd.Env = append(os.Environ(), childEnv+"="+count, childEndpoint+"="+f.URL, childDir+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Count the Records that returned; kill once the child has recorded
	// (all n, or at least running in "forever" mode) and an upload is held.
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	acked, staged, done, isHeld := 0, 0, false, false
	readLine := func(l string) {
		switch {
		case l == "ok":
			acked++
			if n < 0 && acked >= running {
				done = true
			}
		case l == "recorded":
		case strings.HasPrefix(l, "staged "):
			k, err := strconv.Atoi(strings.TrimPrefix(l, "staged "))
			if err != nil || k < staged {
				t.Fatalf("child: %q after staged %d", l, staged)
			}
			staged = k
			if n > 0 && staged == n {
				done = true
			}
		default:
			t.Fatalf("child: %s", l)
		}
	}
	deadline := time.After(60 * time.Second)
	for !(done && isHeld) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("child exited early")
			}
			readLine(l)
		case <-held:
			isHeld = true
		case <-deadline:
			t.Fatalf("timeout: %d recorded, %d staged, held %v", acked, staged, isHeld)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// What the child printed between our read and the kill.
	for l := range lines {
		readLine(l)
	}
	once.Do(func() { close(release) })
	distinctBefore, rawBefore, _ := f.counts()
	if n > 0 && (acked != n || staged != n) {
		t.Fatalf("child confirmed %d Records, %d staged, want %d", acked, staged, n)
	}

	// Restart on the same data dir, in the period after the last Record's
	// (acked, or acked-1 when none was in flight), within the grace; the
	// server now acknowledges at once.
	f.setHooks(nil, nil)
	cfg, clk := clockConfig(f, dir)
	clk.Set(t0.Add(time.Duration(acked+1) * day))
	cfg.PeriodGrace = crashGrace
	p := newProvider(t, cfg)
	flush(t, p)
	ledger, err := p.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, e := range ledger {
		committed += e.Reports
	}
	distinct, raw, maxPerID := f.counts()
	t.Logf("child confirmed %d Records, %d staged, ledger %d; before restart the server held %d (from %d deliveries); after: %d distinct ids from %d deliveries; restarted provider %+v",
		acked, staged, committed, distinctBefore, rawBefore, distinct, raw, p.Stats())
	if int64(distinct) != committed {
		t.Errorf("server holds %d distinct reports, the ledger committed %d", distinct, committed)
	}
	if distinct < staged || distinct > acked+1 {
		t.Errorf("server holds %d distinct reports; the child staged %d Records and confirmed %d (at most one more may have been in flight)", distinct, staged, acked)
	}
	if raw <= distinct || maxPerID < 2 || p.Stats().Duplicates == 0 {
		t.Errorf("%d deliveries of %d reports, at most %d of one, %d duplicates acknowledged: the held upload was not sent again", raw, distinct, maxPerID, p.Stats().Duplicates)
	}
	f.checkReports(t, p.Plan())
}
