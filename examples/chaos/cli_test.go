package chaos

// The CLI-shaped run of issue 23 (item 4's measurement): an app used now
// and then keeps its data. Each user runs a short-lived tool once per
// simulated day (a day is one reporting period of a couple of seconds, on
// the real clock). The tool, examples/chaos/clitool, is a real process: a
// fresh Provider on the user's own data directory (its SQLite outbox and
// cached plan) with the SDK's defaults as examples/app uses them
// (context.Background(), the default plan and shutdown timeouts, upload
// delay and HTTP client), a few Records, Shutdown. A report leaves only
// at a later run, once its day has closed, so a third of the users, who
// skip two or three days at a time, send theirs days late, within the
// plan's grace (8 periods). The server, `blanket serve` with its default
// flags, is SIGKILLed at the start of a day and stays down for a few days
// (less than the grace): the runs meanwhile fall back to the cached plan
// and keep their reports in the outbox. After the last day every user
// runs the tool once more (as they would the next day), and again, at
// once, while a report waits for upload in their outbox.
//
// Then the days are closed on the shuffler (POST /v1/pools/close, as
// their deadline would) and every report a user recorded must be
// acknowledged in its ledger and counted by the collector in its day:
// recorded = acknowledged = counted for every metric and day, and no run
// is told of a drop. A run against the dead server must cost about the
// plan timeout at most: measured (the whole process) and logged, and
// bounded generously (3 × PlanTimeout + 1 s) since the machine is shared.
//
// The tool holds its clock within the day the run started in (-hold),
// should a run outlast it on a loaded machine, so that the day a Record
// lands in is the day the test books it under.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// cliRunCfg sizes one CLI-shaped run.
type cliRunCfg struct {
	users  int
	days   int // days with Records; the tool runs once more after them
	nMin   int
	period time.Duration
	down   []outage
	seed   uint64
}

// outage: the server is SIGKILLed at the start of day from and restarted
// 0.4 periods before day from+days starts (runs start 0.05 to 0.85
// periods into their day: the last down day's latest runs may meet it up
// again).
type outage struct{ from, days int }

// TestCLIShaped is the CLI-shaped run at a small size: 20 users over 5
// days of 2 s, the server down for 2 of them.
func TestCLIShaped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs blanket serve for about 20 s; skipped in -short mode")
	}
	t.Parallel()
	runCLI(t, cliRunCfg{users: 20, days: 5, nMin: 3, period: 2 * time.Second, down: []outage{{from: 2, days: 2}}, seed: 2})
}

// cliUser is one user's habits: the days they run the tool and what each
// run records.
type cliUser struct {
	dir     string
	runs    []int // days, increasing; the last is the run after the last day
	screens map[int][]string
	bytes   map[int][]float64
	skips   bool
}

// cliSchedule draws every user's days and Records, and checks the
// scenario's premises: every metric and day gets at least n_min reports,
// and each day a user records in is followed, within the grace less a
// period, by a run while the server is up (a user who ran while it was
// down runs again the next day, so that a skip and an outage add up to
// at most 4 + the outage's days).
func cliSchedule(t *testing.T, cfg cliRunCfg, grace int, dir string) []*cliUser {
	t.Helper()
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	down := func(d int) bool {
		for _, o := range cfg.down {
			if d >= o.from && d < o.from+o.days {
				return true
			}
		}
		return false
	}
	planned := map[cell]int{}
	users := make([]*cliUser, cfg.users)
	for i := range users {
		u := &cliUser{dir: filepath.Join(dir, "users", fmt.Sprint(i)), screens: map[int][]string{}, bytes: map[int][]float64{}, skips: i%3 == 0}
		for d := 0; d < cfg.days; {
			u.runs = append(u.runs, d)
			if rng.Float64() < 0.9 {
				for range 1 + rng.IntN(3) {
					u.screens[d] = append(u.screens[d], screens[rng.IntN(len(screens))])
				}
				planned[cell{metricScreen, int64(d)}]++
			}
			if rng.Float64() < 0.7 {
				for range 1 + rng.IntN(3) {
					u.bytes[d] = append(u.bytes[d], float64(rng.IntN(1000)))
				}
				planned[cell{metricBytes, int64(d)}]++
			}
			gap := 1
			if u.skips && rng.Float64() < 0.5 && !down(d) {
				gap = 3 + rng.IntN(2) // skips two or three days
			}
			d += gap
		}
		u.runs = append(u.runs, cfg.days) // the run after the last day
		for k, d := range u.runs[:len(u.runs)-1] {
			next := slices.IndexFunc(u.runs[k+1:], func(r int) bool { return !down(r) })
			if r := u.runs[k+1+next]; r-d > grace-1 {
				t.Fatalf("schedule: user %d records on day %d and next runs with the server up on day %d, beyond the grace of %d days", i, d, r, grace)
			}
		}
		users[i] = u
	}
	for _, m := range metrics {
		for d := range cfg.days {
			if n := planned[cell{m, int64(d)}]; n < cfg.nMin {
				t.Fatalf("schedule: %s on day %d gets %d reports, below n_min %d: pick another seed", m, d, n, cfg.nMin)
			}
		}
	}
	return users
}

// toolRun is what one run of the tool did.
type toolRun struct {
	user     int
	day      int64         // the period the run started in
	took     time.Duration // the process, from its start to its exit
	sdk      time.Duration // the tool's own: NewProvider to Shutdown
	down     bool          // the server was down from the run's start to its end
	recorded []string
	err      string // NewProvider's or a Record's, or the process's
	shutdown string // Shutdown's (why it made no upload, or how it failed)
	drops    []string
	warnings string // the SDK's log (warnings), the end of it
}

// tool runs the tool (examples/chaos/clitool) once as a process.
func tool(ctx context.Context, bin, dataDir, endpoint, planKey string, pl *plan.Plan, screens []string, sums []float64) toolRun {
	args := []string{"-endpoint", endpoint, "-plan-key", planKey, "-data", dataDir, "-hold", pl.PeriodLength().String()}
	for _, s := range screens {
		args = append(args, "-screen", s)
	}
	for _, b := range sums {
		args = append(args, "-bytes", fmt.Sprint(b))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := toolRun{took: time.Since(start), day: pl.PeriodOf(start), warnings: stderr.String()}
	if len(r.warnings) > 2<<10 {
		r.warnings = "…" + r.warnings[len(r.warnings)-2<<10:]
	}
	var out struct {
		PeriodStart int64    `json:"period_start"`
		Recorded    []string `json:"recorded"`
		Took        int64    `json:"took_ns"`
		Error       string   `json:"error"`
		Shutdown    string   `json:"shutdown"`
		Drops       []string `json:"drops"`
	}
	if err == nil {
		err = json.Unmarshal(stdout.Bytes(), &out)
	}
	if err != nil {
		r.err = fmt.Sprintf("%v: %s", err, stderr.String())
		return r
	}
	r.day = pl.PeriodOf(time.Unix(out.PeriodStart, 0))
	r.recorded, r.err, r.shutdown, r.drops, r.sdk = out.Recorded, out.Error, out.Shutdown, out.Drops, time.Duration(out.Took)
	return r
}

func runCLI(t *testing.T, cfg cliRunCfg) {
	began := time.Now()
	testbuild.Start(toolPkg) // beside blanket's build; testbuild.Binary waits for it
	dir := t.TempDir()
	srv := newServer(t, dir, planYAML(cfg.period, cfg.nMin, 0)) // builds blanket: outside the run's deadline
	bin := testbuild.Binary(t, toolPkg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv.start(ctx)
	pl := srv.servedPlan(ctx)
	grace := int(pl.GraceLength() / pl.PeriodLength())
	users := cliSchedule(t, cfg, grace, dir)

	// Day 0 is the first period starting at least a fifth of a period
	// from now.
	day0 := pl.PeriodOf(time.Now().Add(cfg.period/5)) + 1
	dayStart := func(d int) time.Time { return pl.PeriodStart(day0 + int64(d)) }
	t.Logf("%v: blanket serve up, plan epoch %s (n_min %d, period %v, grace %d periods); %d users over %d days from %s, the server down %+v",
		time.Since(began).Round(time.Millisecond), pl.Epoch(), pl.NMin, pl.PeriodLength(), grace, len(users), cfg.days, dayStart(0).UTC().Format("15:04:05"), cfg.down)

	var up atomic.Bool
	up.Store(true)
	var runsMu sync.Mutex
	var runs []toolRun
	run := func(i int, u *cliUser, d int) {
		wasUp := up.Load()
		r := tool(ctx, bin, u.dir, srv.url, srv.planKey(), pl, u.screens[d], u.bytes[d])
		r.user, r.down = i, !wasUp && !up.Load()
		runsMu.Lock()
		runs = append(runs, r)
		runsMu.Unlock()
	}
	var wg sync.WaitGroup
	for i, u := range users {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)+1))
		wg.Go(func() {
			for _, d := range u.runs {
				off := cfg.period/20 + time.Duration(rng.Int64N(int64(cfg.period*4/5)))
				if !sleepUntil(ctx, dayStart(d).Add(off)) {
					return
				}
				run(i, u, d)
			}
		})
	}
	// The outages, on this goroutine (which may fail the test).
	for _, o := range cfg.down {
		sleepUntil(ctx, dayStart(o.from))
		up.Store(false)
		srv.kill(fmt.Sprintf("at the start of day %d, down for %d days", o.from, o.days))
		sleepUntil(ctx, dayStart(o.from+o.days).Add(-cfg.period*2/5))
		srv.start(ctx)
		up.Store(true)
	}
	wg.Wait()
	t.Logf("%v: %d runs over %d days", time.Since(began).Round(time.Millisecond), len(runs), cfg.days+1)

	// A user runs the tool again while a report waits for upload in its
	// outbox (a Shutdown makes one attempt only), or while a day it
	// recorded in has not closed (its last run was in that day: on a
	// loaded machine a run may start late, in the day of the next). A
	// report in another state (refused, unknown) is final: the books
	// show it.
	waiting := func() map[int]string {
		out := map[int]string{}
		runsMu.Lock()
		last, rec := map[int]int64{}, map[int]int64{}
		for _, r := range runs {
			last[r.user] = max(last[r.user], r.day)
			if len(r.recorded) > 0 {
				rec[r.user] = max(rec[r.user], r.day)
			}
		}
		runsMu.Unlock()
		for i, u := range users {
			if d, ok := rec[i]; ok && last[i] <= d {
				out[i] += fmt.Sprintf(" day %d not closed;", d-day0)
			}
			bk := newBooks(pl)
			bk.addOutbox(ctx, t, u.dir)
			for c, st := range bk.notAcked {
				if st[client.UploadPending] > 0 {
					out[i] += fmt.Sprintf(" %s of day %d waits;", c.metric, c.period-day0)
				}
			}
		}
		return out
	}
	for again := 0; ; again++ {
		w := waiting()
		if len(w) == 0 {
			break
		}
		if again == 3 {
			t.Errorf("users still wait to send reports after %d more runs: %v", again, w)
			break
		}
		t.Logf("%d users run the tool once more: %v", len(w), w)
		sleepUntil(ctx, pl.PeriodStart(pl.PeriodOf(time.Now())+1).Add(cfg.period/20))
		for i := range w {
			run(i, users[i], -1)
		}
	}

	// The books: what each user recorded, what the ledgers say, what the
	// collector counted once the days are closed.
	bk := newBooks(pl)
	bk.recorded = map[cell]int64{}
	type userCell struct {
		user int
		cell
	}
	seen := map[userCell]bool{} // a user sends one report per metric and day
	var downRuns, downProcs, upRuns, upProcs []time.Duration
	var failed []toolRun
	for _, r := range runs {
		if r.err != "" || len(r.drops) > 0 {
			failed = append(failed, r)
		}
		for _, m := range r.recorded {
			c := cell{m, r.day}
			if k := (userCell{r.user, c}); !seen[k] {
				seen[k] = true
				bk.recorded[c]++
			}
		}
		if r.down {
			downRuns, downProcs = append(downRuns, r.sdk), append(downProcs, r.took)
		} else {
			upRuns, upProcs = append(upRuns, r.sdk), append(upProcs, r.took)
		}
	}
	for _, u := range users {
		bk.addOutbox(ctx, t, u.dir)
	}
	// Through every period that has ended: on a loaded machine a run may
	// start late, in a later day than planned, and record there.
	closed := srv.closeThrough(ctx, pl.PeriodStart(pl.PeriodOf(time.Now())))
	srv.awaitDrained(ctx, time.Minute)
	bk.addCollector(ctx, srv)
	t.Logf("%v: closed %d days on the shuffler; it drained", time.Since(began).Round(time.Millisecond), len(closed.Closed))

	for _, r := range failed {
		t.Errorf("user %d, run on day %d: error %q, drops %q", r.user, r.day-day0, r.err, r.drops)
	}
	bk.report(t)

	// What a run against the dead server costs: the tool's own time
	// (NewProvider to Shutdown) is bounded, the process's logged.
	bound := 3*client.DefaultPlanTimeout + time.Second
	t.Logf("runs with the server up: %s; as processes: %s", durations(upRuns), durations(upProcs))
	t.Logf("runs with the server down: %s (bound %v); as processes: %s", durations(downRuns), bound, durations(downProcs))
	slices.SortFunc(runs, func(a, b toolRun) int { return int(b.sdk - a.sdk) })
	for _, r := range runs[:min(3, len(runs))] {
		t.Logf("a slowest run: user %d, day %d, server down %v, %v (process %v; Shutdown: %q)", r.user, r.day-day0, r.down, r.sdk.Round(time.Millisecond), r.took.Round(time.Millisecond), r.shutdown)
	}
	if len(downRuns) == 0 {
		t.Error("no run met the dead server")
	}
	for _, d := range downRuns {
		if d > bound {
			t.Errorf("a run against the dead server took %v, more than %v", d.Round(time.Millisecond), bound)
		}
	}
	t.Logf("%v: done", time.Since(began).Round(time.Millisecond))
}

// durations summarises run times for the log.
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%d runs, min %v, median %v, max %v", len(s), s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
