// Command fleet simulates a fleet of app instances reporting telemetry
// through the real Blanket SDK (package sdk/client) to a Blanket server, and
// checks the server's private estimates against the known ground truth.
//
// Each simulated instance is its own client.Provider: it verifies the plan
// (fetched once, by the first instance), records one value of each metric (a Zipf-distributed
// screen for the categorical metric, a favourite feature for the RAPPOR
// metric, bytes synced for the summed metric), seals and uploads them, and
// shuts down. Instances share what a real process would not need to repeat
// (one RandomizerCache and one http.Client) and keep their outbox in memory
// (client.MemoryOutbox, not durable: a simulated instance never restarts).
//
// The shuffler releases a metric's reports only in batches of at least
// n_min, so up to n_min-1 reports can wait in its pool after the fleet is
// done. The fleet then tops the metric up with just enough fresh instances
// to release that last batch; every report sent is then estimated, and the
// ground truth is exact.
//
//	blanket serve --data /tmp/blanket --plan examples/plan.yaml --addr 127.0.0.1:8080 &
//	go run ./examples/fleet -endpoint http://127.0.0.1:8080 -n 100000
//
// It prints every estimate next to the truth with its confidence interval
// and the central (eps, delta) the collector records for it, and the mean
// absolute error of the categorical estimates at the plan's eps0 against the
// error at the smaller eps0 the generic clone bound would allow for the same
// target. It exits 1 when a metric is missing or an estimate is off by more
// than chance allows (see check), 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.endpoint, "endpoint", "http://127.0.0.1:8080", "base URL of the Blanket server (shuffler and collector)")
	flag.IntVar(&cfg.n, "n", 100000, "number of simulated app instances")
	flag.IntVar(&cfg.workers, "workers", 32*runtime.GOMAXPROCS(0), "instances running at once (they mostly wait for the shuffler's durable commits)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the ground truth (the randomizers use crypto randomness)")
	flag.Float64Var(&cfg.zipfS, "zipf", 1.1, "Zipf exponent s (> 1) of the categorical metric")
	flag.DurationVar(&cfg.timeout, "timeout", 150*time.Second, "give up after this long")
	flag.Float64Var(&cfg.maxEps0, "max-eps0", 8, "the simulated app's local ceiling on eps0")
	flag.DurationVar(&cfg.wait, "wait", 0, "wait up to this long for the server to serve its plan (it calibrates at start)")
	flag.Parse()
	if flag.NArg() != 0 || cfg.n < 1 || cfg.workers < 1 || !(cfg.zipfS > 1) {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	ok, err := run(ctx, cfg, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "fleet: estimates are off, see above")
		os.Exit(1)
	}
}
