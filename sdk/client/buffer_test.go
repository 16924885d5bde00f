package client_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

// The Records in memory (buffer.go): these tests run the default path,
// where a Record returns before its value is staged, against the path
// where every Record stages itself (Config.StageInterval < 0), which the
// other tests of the package run (fastConfig).

// bufferedConfig is clockConfig with the default StageInterval.
func bufferedConfig(f *fakeServer, dir string) (client.Config, *testClock) {
	cfg, clk := clockConfig(f, dir)
	cfg.StageInterval = 0
	return cfg, clk
}

// outboxState is what two Providers fed the same Records must agree on:
// the values staged in clear, the ledger, and the counters.
func outboxState(t *testing.T, p *client.Provider, o client.Outbox) string {
	t.Helper()
	ctx := context.Background()
	staged, err := o.Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := ""
	for _, v := range staged {
		s += fmt.Sprintf("staged %s %s %v %q sum %v count %d\n", v.Pool, v.Metric, v.Period, v.Category, v.Sum, v.Count)
	}
	for _, e := range ledger {
		s += fmt.Sprintf("ledger %s %v %s reports %d\n", e.Metric, e.Start, e.Epoch, e.Reports)
	}
	st := p.Stats()
	return s + fmt.Sprintf("recorded %d late %d messages %d incomplete %d expired %d", st.Recorded, st.Late, st.Messages, st.Incomplete, st.Expired)
}

// TestBufferedMatchesImmediate feeds the same random Records (four
// metrics: two categorical, a sum and a mean; the clock moving on within a
// period, to the next, and back into a closed one) to a Provider whose
// Records stage themselves and one whose Records wait in memory, and
// checks after each period that both outboxes hold the same: the values
// staged in clear (last category, total, count), the ledger of sealed
// reports, and the counts of Records recorded and late. Separate and
// joint travel; the real values are integers, so that the totals are
// exact whatever the order of addition.
func TestBufferedMatchesImmediate(t *testing.T) {
	for _, travel := range []string{"separate", "joint"} {
		t.Run(travel, func(t *testing.T) {
			f := newMeanServer(t, travel)
			cache := withLaplace(t)
			dirA, dirB := t.TempDir(), t.TempDir()
			cfgA, clk := clockConfig(f, dirA)
			cfgB := cfgA
			cfgA.Outbox, cfgA.Randomizers = sqliteOutbox(t, dirA), cache
			cfgB.DataDir, cfgB.Outbox, cfgB.Randomizers = dirB, sqliteOutbox(t, dirB), cache
			cfgB.StageInterval = 20 * time.Millisecond // passes run between the Records too
			a, b := newProvider(t, cfgA), newProvider(t, cfgB)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			screens := []string{"home", "search", "settings", "elsewhere"}
			start := t0
			for period := range 6 {
				// The period before closes in both before the Records,
				// so that the clock going back finds it closed in both:
				// a Record that stages itself closes it at once, one in
				// memory at the next pass, and in between a Record into
				// it counts in it (it is not closed yet).
				clk.Set(start)
				flush(t, a)
				flush(t, b)
				for i := range 60 {
					clk.Set(start.Add(time.Duration(i) * time.Minute))
					if period > 0 && i%25 == 24 {
						clk.Set(start.Add(-day)) // back into the closed period: late
					}
					j, c, x := rng.IntN(4), screens[rng.IntN(len(screens))], float64(rng.IntN(200)-50)
					for _, p := range []*client.Provider{a, b} {
						m := p.Meter("app")
						var err error
						switch j {
						case 0:
							err = m.Categorical("screen").Record(ctx, c)
						case 1:
							err = m.Sum("bytes").Record(ctx, x)
						case 2:
							err = m.Categorical("feature").Record(ctx, []string{"a", "b", "c", "d"}[int(x+50)%4])
						default:
							err = m.Mean("latency").Record(ctx, x+50)
						}
						if err != nil {
							t.Fatal(err)
						}
					}
				}
				flush(t, a)
				flush(t, b)
				if sa, sb := outboxState(t, a, cfgA.Outbox), outboxState(t, b, cfgB.Outbox); sa != sb {
					t.Fatalf("period %d: the outboxes differ:\nimmediate:\n%s\nbuffered:\n%s", period, sa, sb)
				}
				start = start.Add(day)
			}
			st := b.Stats()
			if st.Late == 0 || st.Messages == 0 || st.Recorded == 0 {
				t.Fatalf("stats %+v: the script did not exercise late Records and closings", st)
			}
			t.Logf("%+v", st)
		})
	}
}

// TestBufferedConcurrentRecords records from 8 goroutines at once while
// the stager stages every millisecond: every Record is staged once, the
// sum and the count exact.
func TestBufferedConcurrentRecords(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, _ := bufferedConfig(f, dir)
	cfg.StageInterval = time.Millisecond
	p := newProvider(t, cfg)
	ctx := context.Background()
	bytes, screen := p.Meter("app").Sum("bytes"), p.Meter("app").Categorical("screen")
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := bytes.Record(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := screen.Record(ctx, []string{"home", "search"}[g%2]); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	flush(t, p)
	staged, err := sqliteOutbox(t, dir).Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.Value{}
	for _, v := range staged {
		got[v.Metric] = v
	}
	if v := got["app/bytes"]; v.Sum != goroutines*each || v.Count != goroutines*each {
		t.Errorf("bytes staged %+v, want the sum and count %d", v, goroutines*each)
	}
	if v := got["app/screen"]; v.Count != goroutines*each/10 || (v.Category != "home" && v.Category != "search") {
		t.Errorf("screen staged %+v, want %d Records of home or search", v, goroutines*each/10)
	}
	if st := p.Stats(); st.Recorded != goroutines*each*11/10 {
		t.Errorf("recorded %d, want %d", st.Recorded, goroutines*each*11/10)
	}
}

// TestRecordDoesNotWaitOnDisk holds the SQLite outbox's write lock from
// another connection (another process on the file, a stalled disk) while
// the app records: every Record returns while the lock is held, the
// stager waits on it, and once it is released the values are staged.
// With Records that stage themselves, the first Record would wait for the
// lock for the busy timeout (10 s) and fail.
func TestRecordDoesNotWaitOnDisk(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, _ := bufferedConfig(f, dir)
	cfg.StageInterval = time.Millisecond
	p := newProvider(t, cfg)
	ctx := context.Background()

	db, err := sql.Open("sqlite", filepath.Join(dir, client.OutboxFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const n = 200
	done := make(chan error, 1)
	go func() {
		bytes := p.Meter("app").Sum("bytes")
		for range n {
			if err := bytes.Record(ctx, 2); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(8 * time.Second): // below the busy timeout
		t.Fatal("Records waited on the outbox's write lock")
	}
	if st := p.Stats(); st.Recorded != 0 {
		t.Errorf("%d Records staged while the outbox was locked", st.Recorded)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	if st := p.Stats(); st.Recorded != n {
		t.Errorf("recorded %d after the lock was released, want %d", st.Recorded, n)
	}
}

// TestBufferedStagesByItself records without Flush or Shutdown: the value
// reaches the outbox file on its own, read from another connection.
func TestBufferedStagesByItself(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, _ := bufferedConfig(f, dir)
	cfg.StageInterval = 10 * time.Millisecond
	p := newProvider(t, cfg)
	ctx := context.Background()
	if err := p.Meter("app").Categorical("screen").Record(ctx, "search"); err != nil {
		t.Fatal(err)
	}
	o := sqliteOutbox(t, dir)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		staged, err := o.Staged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(staged) == 1 && staged[0].Category == "search" && staged[0].Count == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("staged %+v: the Record never reached the outbox", staged)
		}
	}
}

// TestBufferedShutdown: Shutdown stages the Records still in memory
// before it closes the outbox, and a Record after it fails with
// ErrShutdown and stages nothing.
func TestBufferedShutdown(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, _ := bufferedConfig(f, dir)
	cfg.StageInterval = time.Hour // only Shutdown stages
	p := newProvider(t, cfg)
	ctx := context.Background()
	screen := p.Meter("app").Categorical("screen")
	for _, c := range []string{"home", "settings"} {
		if err := screen.Record(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := screen.Record(ctx, "search"); !errors.Is(err, client.ErrShutdown) {
		t.Errorf("Record after Shutdown: %v, want ErrShutdown", err)
	}
	staged, err := sqliteOutbox(t, dir).Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(staged) != 1 || staged[0].Category != "settings" || staged[0].Count != 2 {
		t.Errorf("staged %+v, want the last of 2 Records, settings", staged)
	}
}

// TestBufferedParallel: with parallel travel the Records wait in memory
// whatever the period drew; staging keeps the drawn metric's and counts
// the others as skipped.
func TestBufferedParallel(t *testing.T) {
	f := newPooledServer(t, "parallel")
	dir := t.TempDir()
	cfg, _ := bufferedConfig(f, dir)
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	const n = 10
	for i := range n {
		err := errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Categorical("feature").Record(ctx, "a"), m.Sum("bytes").Record(ctx, float64(i)))
		if err != nil {
			t.Fatal(err)
		}
	}
	flush(t, p)
	staged, err := sqliteOutbox(t, dir).Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if len(staged) != 1 || staged[0].Count != n || st.Recorded != n || st.Skipped != 2*n {
		t.Fatalf("staged %+v, stats %+v: want the drawn metric's %d Records staged and %d skipped", staged, st, n, 2*n)
	}
}

// TestLocalFlush: in ModeLocal, Flush stages the Records and closes the
// periods that ended, sealing their reports, and uploads nothing.
func TestLocalFlush(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg, clk := bufferedConfig(f, t.TempDir())
	cfg.Mode, cfg.Plan = client.ModeLocal, f.pl
	p := newProvider(t, cfg)
	ctx := context.Background()
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	flush(t, p)
	if st := p.Stats(); st.Recorded != 1 || st.Messages != 1 || st.Uploaded != 0 {
		t.Errorf("stats %+v, want the Record staged and sealed, nothing uploaded", st)
	}
	if gets, posts := f.requests(); gets+posts != 0 {
		t.Errorf("ModeLocal made %d plan requests and %d uploads", gets, posts)
	}
}

// failingOutbox fails its first fails Stages, then stages.
type failingOutbox struct {
	client.Outbox
	fails atomic.Int64
}

func (o *failingOutbox) Stage(ctx context.Context, v client.Value) (client.Value, error) {
	if o.fails.Add(-1) >= 0 {
		return client.Value{}, errors.New("disk full (test)")
	}
	return o.Outbox.Stage(ctx, v)
}

// TestBufferedRetriesFailedStage: a pass whose Stage fails keeps the
// Records in memory and tries again a StageInterval later by itself,
// without another Record, Flush or closing.
func TestBufferedRetriesFailedStage(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, _ := bufferedConfig(f, dir)
	cfg.StageInterval = 5 * time.Millisecond
	o := &failingOutbox{Outbox: sqliteOutbox(t, dir)}
	o.fails.Store(3)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	ctx := context.Background()
	for _, c := range []string{"home", "search"} {
		if err := p.Meter("app").Categorical("screen").Record(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); p.Stats().Recorded != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v after 3 failed Stages: the Records were not tried again", p.Stats())
		}
	}
	staged, err := o.Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(staged) != 1 || staged[0].Category != "search" || staged[0].Count != 2 {
		t.Errorf("staged %+v, want the last of 2 Records, search", staged)
	}
}

// TestBufferedStateMatchesImmediate: a state metric recorded on a few
// days of a week, its Records in memory until one closing at the end,
// is stepped every day with the same values as when each Record staged
// itself (and closed the days before it): the days between Records step
// with the state carried from the Record before. Before stateGroups took
// the staged values into account, the buffered Provider stepped only the
// days with a Record.
func TestBufferedStateMatchesImmediate(t *testing.T) {
	f := stateServer(t)
	record := map[int]string{0: "false", 2: "true", 5: "false"}
	run := func(stageInterval time.Duration) []string {
		cfg, clk := clockConfig(f, t.TempDir())
		cfg.StageInterval = stageInterval
		cfg.PeriodGrace = 10 * day // the week's periods all close within it
		var spy stepSpy
		cfg.Randomizers = spy.cache(t)
		p := newProvider(t, cfg)
		ctx := context.Background()
		for d := range 7 {
			clk.Set(t0.Add(time.Duration(d) * day))
			if v, ok := record[d]; ok {
				if err := p.Meter("app").Categorical("enabled").Record(ctx, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		clk.Set(t0.Add(7 * day))
		flush(t, p)
		var steps []string
		for _, c := range spy.got() {
			steps = append(steps, fmt.Sprintf("%d:%s", c.period, c.value))
		}
		return steps
	}
	immediate, buffered := run(-1), run(time.Hour)
	if len(immediate) != 7 || !slices.Equal(immediate, buffered) {
		t.Errorf("steps (period:value): immediate %v, buffered %v; want the same 7", immediate, buffered)
	}
}
