package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

// flakyOutbox fails Stage while fail returns true.
type flakyOutbox struct {
	client.Outbox
	mu   sync.Mutex
	fail func(v client.Value) bool
}

var errFlaky = errors.New("flaky: disk I/O error")

func (o *flakyOutbox) setFail(f func(v client.Value) bool) {
	o.mu.Lock()
	o.fail = f
	o.mu.Unlock()
}

func (o *flakyOutbox) Stage(ctx context.Context, v client.Value) (client.Value, error) {
	o.mu.Lock()
	f := o.fail
	o.mu.Unlock()
	if f != nil && f(v) {
		return client.Value{}, errFlaky
	}
	return o.Outbox.Stage(ctx, v)
}

func stagedOf(t *testing.T, o client.Outbox, metric string) []client.Value {
	t.Helper()
	vals, err := o.Staged(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Value
	for _, v := range vals {
		if v.Metric == metric {
			out = append(out, v)
		}
	}
	return out
}

// TestBufferedStateOrderAfterFailure: a state metric's value of period
// P0 whose Stage failed before P0 closed is filed into P1 when it is
// staged late (stageStateLater). P1's own later Record must still win:
// the pass holds P1's value back behind P0's (stageBuffered). Before
// that, P1's value staged first and the older P0 value replaced it.
// (Found by a review, helper-44.)
func TestBufferedStateOrderAfterFailure(t *testing.T) {
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.StageInterval = time.Hour // only explicit passes
	fo := &flakyOutbox{Outbox: sqliteOutbox(t, dir)}
	cfg.Outbox = fo
	var spy stepSpy
	cfg.Randomizers = spy.cache(t)
	p := newProvider(t, cfg)
	ctx := context.Background()
	st := p.Meter("app").Categorical("enabled")
	// A first period, so that the metric has a state.
	if err := st.Record(ctx, "false"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	flush(t, p)
	// P0: "true", whose Stage fails (a transient error) once.
	if err := st.Record(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	fo.setFail(func(v client.Value) bool {
		return v.Metric == stateMetric && v.Category == "true" && n.Add(1) == 1
	})
	clk.Advance(day)
	// P1: the app's state is "false" from now on.
	if err := st.Record(ctx, "false"); err != nil {
		t.Fatal(err)
	}
	flush(t, p) // stages P1 "false", fails P0 "true", closes P0
	fo.setFail(nil)
	flush(t, p) // stages P0 "true": late, filed into P1, over "false"
	for _, v := range stagedOf(t, fo, stateMetric) {
		t.Logf("staged %v %q count %d", v.Period, v.Category, v.Count)
		if v.Category != "false" {
			t.Errorf("state metric staged %q for period %v, though the app's last Record (in that period) was \"false\"", v.Category, v.Period)
		}
	}
}

// TestBufferedShutdownRace: every Record that returned nil before or
// during Shutdown is staged (Count), with 8 goroutines recording and the
// stager running passes throughout.
func TestBufferedShutdownRace(t *testing.T) {
	for iter := range 20 {
		f := newMeanServer(t, "separate")
		dir := t.TempDir()
		cfg, _ := clockConfig(f, dir) // the clock stands: the period stays open
		cfg.StageInterval = time.Microsecond
		cfg.Randomizers = withLaplace(t)
		p, err := client.NewProvider(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s := p.Meter("app").Sum("bytes")
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if err := s.Record(ctx, 1); err != nil {
						if !errors.Is(err, client.ErrShutdown) {
							t.Error(err)
						}
						return
					}
					ok.Add(1)
				}
			}()
		}
		time.Sleep(time.Duration(iter%5) * 3 * time.Millisecond)
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		var count int64
		var sum float64
		for _, v := range stagedOf(t, sqliteOutbox(t, dir), "app/bytes") {
			count += v.Count
			sum += v.Sum
		}
		if count != ok.Load() || sum != float64(ok.Load()) {
			t.Fatalf("iter %d: %d Records returned nil, %d staged (sum %v)", iter, ok.Load(), count, sum)
		}
	}
}
