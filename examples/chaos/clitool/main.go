// Command clitool is the short-lived tool of the chaos package's
// CLI-shaped test (examples/chaos/cli_test.go): one run records a few
// values of the test plan's two metrics through the SDK and exits, as a
// command-line tool used once a day would. It uses the SDK as
// examples/app does: context.Background(), the default plan and shutdown
// timeouts, upload delay and HTTP client, and a Shutdown under a 5 s
// deadline; the SDK bounds its own waits. It prints what it did as one
// JSON object on stdout (toolResult) for the test to book.
//
// One affordance for the test: with -hold PERIOD, the SDK's clock is held
// at the last instant of the period (of that length) the run started in,
// should the run outlast it on a loaded machine, so that the period a
// Record lands in is the one the test books it under.
//
//	clitool -endpoint http://127.0.0.1:8080 -data DIR -hold 2s -screen home -bytes 120 -bytes 40
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

// toolResult is what a run did (the test decodes the same fields).
type toolResult struct {
	// PeriodStart is the start of the period the run started in (Unix
	// seconds, with -hold; 0 without).
	PeriodStart int64 `json:"period_start"`
	// Recorded are the metrics the run recorded a value of.
	Recorded []string `json:"recorded"`
	// Took is how long the run took, from before NewProvider to after
	// Shutdown.
	Took time.Duration `json:"took_ns"`
	// Error is NewProvider's or a Record's error; Shutdown is
	// Shutdown's (why it made no upload, or how it failed).
	Error    string `json:"error,omitempty"`
	Shutdown string `json:"shutdown,omitempty"`
	// Drops are the Drops the SDK told of.
	Drops []string `json:"drops,omitempty"`
	// Stats are the Provider's counters.
	Stats client.Stats `json:"stats"`
}

// multi is a repeatable flag.
type multi []string

func (s *multi) String() string     { return fmt.Sprint(*s) }
func (s *multi) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	endpoint := flag.String("endpoint", "", "the Blanket server")
	planKey := flag.String("plan-key", "", "the collector's plan-signing key (blanket collector plan-key)")
	dataDir := flag.String("data", "", "the user's telemetry data dir")
	hold := flag.Duration("hold", 0, "hold the clock within the period of this length the run started in")
	var screens, bytes multi
	flag.Var(&screens, "screen", "a screen to record (repeatable)")
	flag.Var(&bytes, "bytes", "bytes to record (repeatable)")
	flag.Parse()

	ctx := context.Background()
	start := time.Now()
	var res toolResult
	now := time.Now
	if *hold > 0 {
		ns := start.UnixNano() // periods start at multiples of their length since the Unix epoch
		p := time.Unix(0, ns-ns%int64(*hold))
		end := p.Add(*hold)
		res.PeriodStart = p.Unix()
		now = func() time.Time {
			if n := time.Now(); n.Before(end) {
				return n
			}
			return end.Add(-time.Millisecond)
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := client.NewProvider(ctx, client.Config{
		Mode:     client.ModeOn,
		Endpoint: *endpoint,
		PlanKey:  *planKey,
		DataDir:  *dataDir,
		MaxEps0:  10,
		Logger:   logger,
		OnDrop: func(d client.Drop) {
			res.Drops = append(res.Drops, fmt.Sprintf("%s %s of period %s: %s", d.Reason, d.Metric, d.Start.Format(time.RFC3339), d.Detail))
		},
		Now: now,
	})
	if err != nil {
		res.Error = err.Error()
	}
	m := p.Meter("")
	record := func(metric string, f func() error) {
		if p == nil {
			return // telemetry disabled: nothing recorded
		}
		if err := f(); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
		if len(res.Recorded) == 0 || res.Recorded[len(res.Recorded)-1] != metric {
			res.Recorded = append(res.Recorded, metric)
		}
	}
	for _, s := range screens {
		record("chaos/screen", func() error { return m.Categorical("chaos/screen").Record(ctx, s) })
	}
	for _, b := range bytes {
		v, err := strconv.ParseFloat(b, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		record("chaos/bytes", func() error { return m.Sum("chaos/bytes").Record(ctx, v) })
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := p.Shutdown(sctx); err != nil {
		res.Shutdown = err.Error()
	}
	cancel()
	res.Took = time.Since(start)
	res.Stats = p.Stats() // Shutdown waited for the last Drop
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(1)
	}
}
