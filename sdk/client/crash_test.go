package client_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
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

// crashChild records values into the SQLite outbox in its data dir with
// uploads on, each in a reporting period of its own (Record i at t0 + i
// days, so that it closes the period of Record i-1), printing "ok" after
// each Record returns and "recorded" after the last; then it waits to be
// killed.
func crashChild() int {
	ctx := context.Background()
	var clock atomic.Int64 // Unix nanoseconds
	clock.Store(t0.UnixNano())
	p, err := client.NewProvider(ctx, client.Config{
		Mode:        client.ModeOn,
		Endpoint:    os.Getenv(childEndpoint),
		PlanKey:     testPlanKey,
		DataDir:     os.Getenv(childDir),
		MaxEps0:     8,
		BatchSize:   10,
		UploadDelay: time.Millisecond,
		RetryMin:    5 * time.Millisecond,
		RetryMax:    20 * time.Millisecond,
		Now:         func() time.Time { return time.Unix(0, clock.Load()) },
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
	screen := p.Meter("app").Categorical("screen")
	for i := 0; n < 0 || i < n; i++ {
		clock.Store(t0.Add(time.Duration(i) * day).UnixNano())
		if err := screen.Record(ctx, "home"); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ok")
	}
	fmt.Println("recorded")
	select {}
}

// TestCrashRestart kills an app with SIGKILL while it uploads and checks
// that a restart on the same DataDir delivers the report of every period
// the app recorded in exactly once after the shuffler's deduplication:
// nothing lost (the value staged for the last period is sealed at the
// restart), nothing doubled.
//
// The server fails the first upload (503), acknowledges the next two, and
// then stores each upload but holds its acknowledgement until the child is
// dead, so that the child dies with stored-but-unacknowledged reports in
// its outbox. The restarted Provider sends them again; the server counts
// the raw deliveries (more than N: retries happened) and the distinct ids
// (exactly N).
//
// The child records 50 values (each in a period of its own, so each
// Record seals a report), or at least 100 before the kill while still
// recording; TestCrashRestartDeep (make audit) records 200 and 300.
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
	// Killed while still recording: the Records that returned before the
	// kill are all delivered, plus at most the one in flight, which is
	// committed entirely or not at all.
	t.Run("while recording", func(t *testing.T) { crashRestart(t, -1, running) })
}

// crashRestart kills the child after its n Records (n > 0), or after at
// least running Records of an endless run (n < 0).
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
	acked, done, isHeld := 0, false, false
	deadline := time.After(60 * time.Second)
	for !(done && isHeld) {
		select {
		case l, ok := <-lines:
			switch {
			case !ok:
				t.Fatal("child exited early")
			case l == "ok":
				acked++
				if n < 0 && acked >= running {
					done = true
				}
			case l == "recorded":
				done = true
			default:
				t.Fatalf("child: %s", l)
			}
		case <-held:
			isHeld = true
		case <-deadline:
			t.Fatalf("timeout: %d recorded, held %v", acked, isHeld)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for range lines { // Records that returned between our read and the kill
		acked++
	}
	once.Do(func() { close(release) })
	distinctBefore, rawBefore, _ := f.counts()
	if n > 0 && acked != n {
		t.Fatalf("child confirmed %d Records, want %d", acked, n)
	}

	// Restart on the same data dir, in the period after the last Record's
	// (acked, or acked-1 when none was in flight), within the grace; the
	// server now acknowledges at once.
	f.setHooks(nil, nil)
	cfg, clk := clockConfig(f, dir)
	clk.Set(t0.Add(time.Duration(acked+1) * day))
	cfg.PeriodGrace = 7 * day
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
	t.Logf("child confirmed %d Records, ledger %d; before restart the server held %d (from %d deliveries); after: %d distinct ids from %d deliveries; restarted provider %+v",
		acked, committed, distinctBefore, rawBefore, distinct, raw, p.Stats())
	if int64(distinct) != committed {
		t.Errorf("server holds %d distinct reports, the ledger committed %d", distinct, committed)
	}
	if distinct < acked || distinct > acked+1 {
		t.Errorf("server holds %d distinct reports; the child confirmed %d Records (at most one more may have committed)", distinct, acked)
	}
	if raw <= distinct || maxPerID < 2 || p.Stats().Duplicates == 0 {
		t.Errorf("%d deliveries of %d reports, at most %d of one, %d duplicates acknowledged: the held upload was not sent again", raw, distinct, maxPerID, p.Stats().Duplicates)
	}
	f.checkReports(t, p.Plan())
}
