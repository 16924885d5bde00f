package client_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// hangingServer returns the base URL of a listener on loopback that
// accepts connections and never answers, as a server stuck behind a full
// accept queue or a dead backend does.
func hangingServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// refusingServer returns the base URL of a loopback port nothing listens
// on: every connection is refused.
func refusingServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// cachePlan writes pl into dir as the plan the collector at base served
// last (what a run that reached it leaves).
func cachePlan(t testing.TB, dir, base string, pl *plan.Plan) {
	t.Helper()
	b, err := json.Marshal(pl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sig, _ := plan.SignPlan(testPlanSigner, b, nil).Headers()
	if err := os.WriteFile(filepath.Join(dir, client.PlanCacheFile(base)), client.CachedPlanFile(b, sig), 0o600); err != nil {
		t.Fatal(err)
	}
}

// deadRun is one run of a short-lived tool against a server that does not
// answer: NewProvider under ctx, a Record, Shutdown with a 5 s deadline
// (as examples/app does), on a plan cached by an earlier run and with a
// report of an earlier period pending in the outbox.
type deadRun struct {
	start, stop time.Duration // NewProvider's and Shutdown's
	err         error         // NewProvider's
	recorded    int64
}

// runDead makes the run with cfg.
func runDead(ctx context.Context, cfg client.Config) deadRun {
	var r deadRun
	t0 := time.Now()
	p, err := client.NewProvider(ctx, cfg)
	r.start, r.err = time.Since(t0), err
	if err != nil {
		return r
	}
	_ = p.Meter("app").Categorical("screen").Record(ctx, "home")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t1 := time.Now()
	_ = p.Shutdown(sctx)
	r.stop = time.Since(t1)
	// The Record waited in memory (the default StageInterval): Shutdown
	// staged it.
	r.recorded = p.Stats().Recorded
	return r
}

// deadConfig returns a ModeOn configuration against endpoint on dir, with
// the plan of f cached for it and a clock at t0 + days.
func deadConfig(t testing.TB, f *fakeServer, endpoint, dir string, days int) client.Config {
	cachePlan(t, dir, endpoint, f.pl)
	clk := newTestClock()
	clk.Advance(time.Duration(days) * day)
	return client.Config{
		Mode:     client.ModeOn,
		Endpoint: endpoint,
		PlanKey:  testPlanKey,
		DataDir:  dir,
		MaxEps0:  8,
		Now:      clk.Now,
	}
}

// TestDeadServerShortRun runs a short-lived tool twice (so that the second
// run starts with a report pending) against a server that accepts
// connections and never answers, and one that refuses them, under
// context.Background() and under a 2 s deadline: NewProvider falls back
// to the cached plan after the plan timeout (the default, 1 s) and the
// Record is staged; Shutdown does not wait on the server again, and the
// pending report stays in the outbox. The durations are logged (they are
// measured in BenchmarkDeadServerShortRun); the test asserts only a
// generous bound, the plan timeout plus 2 s, as a sanity check.
func TestDeadServerShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the plan timeout")
	}
	f := newFakeServer(t, nil)
	const bound = client.DefaultPlanTimeout + 2*time.Second
	for _, server := range []string{"hanging", "refusing"} {
		for _, deadline := range []time.Duration{0, 2 * time.Second} {
			name := server + "/background"
			if deadline > 0 {
				name = server + "/deadline 2s"
			}
			t.Run(name, func(t *testing.T) {
				endpoint := hangingServer(t)
				if server == "refusing" {
					endpoint = refusingServer(t)
				}
				dir := t.TempDir()
				for run := range 2 {
					ctx := context.Background()
					if deadline > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, deadline)
						defer cancel()
					}
					r := runDead(ctx, deadConfig(t, f, endpoint, dir, run))
					if r.err != nil {
						t.Fatalf("run %d: NewProvider: %v, want the cached plan", run, r.err)
					}
					if r.recorded != 1 {
						t.Errorf("run %d: %d Records staged, want 1", run, r.recorded)
					}
					if total := r.start + r.stop; total > bound {
						t.Errorf("run %d took %v (NewProvider %v, Shutdown %v), more than %v", run, total, r.start, r.stop, bound)
					}
					t.Logf("run %d: NewProvider %v, Shutdown %v", run, r.start, r.stop)
				}
				o := sqliteOutbox(t, dir)
				if pending, err := o.Pending(context.Background(), 10); err != nil || len(pending) != 1 {
					t.Errorf("pending after the runs: %d, %v; want the first run's report", len(pending), err)
				}
			})
		}
	}
}

// TestShutdownOneAttempt checks that Shutdown makes one upload attempt,
// bounded by Config.ShutdownTimeout, when the collector answered the plan
// but the shuffler (another server) hangs or refuses connections: it
// returns the attempt's error well before its context's 5 s deadline, and
// the pending report stays in the outbox for the next run.
func TestShutdownOneAttempt(t *testing.T) {
	const shutdownTimeout = 200 * time.Millisecond
	for _, server := range []string{"hanging", "refusing"} {
		t.Run(server, func(t *testing.T) {
			f := newFakeServer(t, nil)
			endpoint := hangingServer(t)
			if server == "refusing" {
				endpoint = refusingServer(t)
			}
			dir := t.TempDir()
			cfg, clk := clockConfig(f, dir)
			cfg.Endpoint, cfg.PlanEndpoint = endpoint, f.URL
			cfg.UploadDelay = time.Hour // the background uploader waits
			cfg.ShutdownTimeout = shutdownTimeout
			p, err := client.NewProvider(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
				t.Fatal(err)
			}
			clk.Advance(day) // Shutdown closes the period
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err = p.Shutdown(ctx)
			took := time.Since(start)
			t.Logf("Shutdown took %v: %v", took, err)
			if err == nil {
				t.Error("Shutdown returned nil, want the failed upload's error")
			}
			if took > shutdownTimeout+2*time.Second {
				t.Errorf("Shutdown took %v, more than the shutdown timeout %v plus 2 s", took, shutdownTimeout)
			}
			o := sqliteOutbox(t, dir)
			if pending, err := o.Pending(context.Background(), 10); err != nil || len(pending) != 1 {
				t.Errorf("pending after Shutdown: %d, %v; want the report", len(pending), err)
			}
		})
	}
}

// BenchmarkDeadServerShortRun measures one run of a short-lived tool
// (NewProvider, a Record, Shutdown) against a server that hangs or
// refuses connections, with the default plan timeout, a cached plan and a
// report pending: about the plan timeout when hanging, a few milliseconds
// when refusing.
func BenchmarkDeadServerShortRun(b *testing.B) {
	f := newFakeServer(b, nil)
	for _, server := range []string{"hanging", "refusing"} {
		b.Run(server, func(b *testing.B) {
			endpoint := hangingServer(b)
			if server == "refusing" {
				endpoint = refusingServer(b)
			}
			dir := b.TempDir()
			if r := runDead(context.Background(), deadConfig(b, f, endpoint, dir, 0)); r.err != nil {
				b.Fatal(r.err)
			}
			var start, stop time.Duration
			b.ResetTimer()
			for i := range b.N {
				r := runDead(context.Background(), deadConfig(b, f, endpoint, dir, i+1))
				if r.err != nil {
					b.Fatal(r.err)
				}
				start, stop = start+r.start, stop+r.stop
			}
			b.ReportMetric(float64(start.Microseconds())/1e3/float64(b.N), "start-ms/op")
			b.ReportMetric(float64(stop.Microseconds())/1e3/float64(b.N), "shutdown-ms/op")
		})
	}
}
