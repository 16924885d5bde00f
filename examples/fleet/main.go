// Command fleet simulates a fleet of app instances reporting telemetry
// through the real Blanket SDK (package sdk/client) to a Blanket server over
// several reporting periods, and checks the server's private per-period
// estimates against the known ground truth.
//
// Each simulated instance is its own client.Provider on its own simulated
// clock (client.Config.Now): over the last -days days it uses the app on a
// day with probability -active and then records each metric one to
// -records times (a screen for the categorical metric, a favourite feature
// for the RAPPOR metric, bytes synced for the summed metric; the ground
// truth trends from day to day). The SDK sends one report per metric and
// day: the day's last category, or the day's clamped total, sealed once the
// day has closed. Instances share what a real process would not need to
// repeat (one RandomizerCache and one http.Client) and keep their outbox in
// memory (client.MemoryOutbox, not durable: a simulated instance never
// restarts).
//
// The shuffler releases a pool (a metric's reports of one day) only in
// batches of at least n_min, so up to n_min-1 reports can wait in it after
// the fleet is done. The fleet then tops the day up with just enough fresh
// instances to release that last batch; every report sent is then
// estimated, and the ground truth is exact.
//
//	blanket serve --data /tmp/blanket --plan examples/plan.yaml --addr 127.0.0.1:8080 --period-grace 192h --admission open &
//	go run ./examples/fleet -endpoint http://127.0.0.1:8080 -n 100000
//
// It prints per day each metric's estimate of its trending category (or
// sum) next to the truth, with the confidence interval and the central
// (eps, delta) of the day's weakest batch, checks every estimate of every
// day, prints the per-user guarantee over the plan's horizon the collector
// computes, and the mean absolute error of the last day's categorical
// estimates at the plan's eps0 against the error at the smaller eps0 the
// generic clone bound would allow for the same target. It exits 1 when a
// metric is missing or an estimate is off by more than chance allows (see
// check), 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.endpoint, "endpoint", "http://127.0.0.1:8080", "base URL the apps upload to: blanket serve, a shuffler, or a load balancer in front of shufflers")
	flag.StringVar(&cfg.collector, "collector", "", "base URL of the collector (its plan, signed, and the estimates) when it is not served at -endpoint; default -endpoint")
	flag.StringVar(&cfg.planKey, "plan-key", "", "the collector's plan-signing key, as `blanket collector plan-key --data DIR` prints it (required): the plan is refused unless it signed it")
	flag.IntVar(&cfg.n, "n", 100000, "number of simulated app instances")
	flag.IntVar(&cfg.workers, "workers", 32*runtime.GOMAXPROCS(0), "instances running at once (they mostly wait for the shuffler's durable commits)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the ground truth (the randomizers use crypto randomness)")
	flag.Float64Var(&cfg.zipfS, "zipf", 1.1, "Zipf exponent s (> 1) of the categorical metric")
	flag.DurationVar(&cfg.timeout, "timeout", 0, "give up after this long (0: never; the run prints its progress, Ctrl-C stops it)")
	flag.Float64Var(&cfg.maxEps0, "max-eps0", 8, "the simulated app's local ceiling on eps0")
	flag.DurationVar(&cfg.wait, "wait", 0, "wait up to this long for the server to serve its plan (it calibrates at start)")
	flag.IntVar(&cfg.days, "days", 7, "simulated reporting periods (the plan's period), ending where the current one starts (the server's --period-grace must cover them)")
	flag.Float64Var(&cfg.active, "active", 0.15, "chance that an instance uses the app on a given day")
	flag.IntVar(&cfg.records, "records", 3, "most Records of each metric by an instance on an active day (1 to this many)")
	flag.IntVar(&cfg.tokenPrefetch, "token-prefetch", -1, "client.Config.TokenPrefetch of the instances: periods after the current one whose admission tokens an instance fetches ahead (-1: none; 0: the SDK's default, 1). An instance here runs its week in milliseconds and ends after its last active day, so tokens fetched ahead would mostly go unspent; a real app that runs every day keeps the SDK's default (1)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the fleet to this file")
	jwtKey := flag.String("jwt-key", "", "the demo identity provider's private key (as -write-jwt-key writes it): each instance gets a JWT signed with it (iss and aud "+demoIssuer+") and with it admission tokens; leave empty for a server run with --admission open")
	writeKey := flag.String("write-jwt-key", "", "create the demo identity provider's key in this file and its public key set in the -write-jwks file, then exit")
	writeJWKS := flag.String("write-jwks", "", "with -write-jwt-key: where to write the public JSON Web Key Set (blanket serve --jwks)")
	shot := flag.String("screenshot", "", "after the run, write a PNG of the server's dashboard to this file (needs Chromium; prints the dashboard's URL without it)")
	dash := flag.String("dashboard", "", "base URL of blanket serve's admin listener: the dashboard to screenshot, and where the simulated days are closed once every report is sent; defaults to -endpoint")
	flag.Parse()
	if *writeKey != "" || *writeJWKS != "" {
		if *writeKey == "" || *writeJWKS == "" {
			fmt.Fprintln(os.Stderr, "fleet: -write-jwt-key and -write-jwks go together")
			os.Exit(2)
		}
		if err := writeIdentityKeys(*writeKey, *writeJWKS); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			os.Exit(1)
		}
		return
	}
	if *jwtKey != "" {
		ids, err := loadIdentities(*jwtKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet: -jwt-key:", err)
			os.Exit(2)
		}
		cfg.ids = ids
	}
	cfg.admin = *dash
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			os.Exit(2)
		}
	}
	if flag.NArg() != 0 || cfg.planKey == "" || cfg.n < 1 || cfg.workers < 1 || !(cfg.zipfS > 1) || cfg.days < 1 || !(cfg.active > 0 && cfg.active <= 1) || cfg.records < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	ok, err := run(ctx, cfg, os.Stdout, os.Stderr)
	pprof.StopCPUProfile()
	if err == nil && *shot != "" {
		// Not under the run's -timeout: the run may have used most of it.
		sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		at := *dash
		if at == "" {
			at = cfg.endpoint
		}
		if serr := screenshot(sctx, at, *shot, os.Stdout); serr != nil {
			fmt.Fprintln(os.Stderr, "fleet: dashboard screenshot:", serr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "fleet: estimates are off, see above")
		os.Exit(1)
	}
}
