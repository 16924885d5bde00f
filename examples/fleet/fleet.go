package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// config is the fleet's flags.
type config struct {
	endpoint string
	// collector is the collector's base URL, for the plan and the
	// estimates, when it is not served at endpoint (the apps' endpoint
	// is then a shuffler, which relays only the plan); "" means endpoint.
	collector string
	// planKey is the collector's plan-signing key the first instance
	// pins (client.Config.PlanKey); the others report by the plan it
	// verified.
	planKey string
	n       int
	workers int
	seed    uint64
	zipfS   float64
	timeout time.Duration
	maxEps0 float64
	// days is the number of simulated reporting periods (the plan's
	// period), ending at the start of the current one; active is the
	// chance that an instance uses the app on a given day, records the
	// most Records of each metric on an active day.
	days    int
	active  float64
	records int
	// tokenPrefetch is the instances' client.Config.TokenPrefetch.
	tokenPrefetch int
	// wait is how long to wait for the server to answer at start.
	wait time.Duration
	// admin is the base URL of the shuffler's operator listener, where
	// the simulated days are closed once every report is sent (POST
	// /v1/pools/close). Defaults to endpoint.
	admin string
	// poll is the interval between polls of the collector. Defaults to
	// 250 ms.
	poll time.Duration
	// ids mints each instance's JWT (Config.Credential), so that the
	// instances get admission tokens; nil for a server run with
	// --admission open.
	ids *identities
}

// Roles of the plan's metrics in the simulation.
const (
	roleZipf    = iota // a categorical metric (not RAPPOR): the screen, Zipf-distributed
	roleFeature        // a RAPPOR metric: the favourite feature
	roleSum            // a real metric: bytes synced, summed
	numRoles
)

var roleNames = [numRoles]string{"categorical (Zipf)", "rappor", "summation"}

// fleet is one simulation run.
type fleet struct {
	cfg     config
	out     io.Writer
	log     io.Writer
	hc      *http.Client
	cache   *client.RandomizerCache
	plan    *plan.Plan
	metrics [numRoles]*plan.Metric
	pop     *population
	// first is the start of the first simulated day, period the plan's.
	first  time.Time
	period time.Duration

	mu    sync.Mutex
	truth [numRoles][]*truth // per role and day; guarded by mu

	next                                     atomic.Uint64 // instance numbers
	instances, retries, duplicates, messages atomic.Int64
	// tokens and tokensRefused count the admission tokens the instances
	// were granted and refused.
	tokens, tokensRefused atomic.Int64
}

// job is one instance to simulate: only >= 0 makes it a top-up instance
// active on that day alone, recording the roles in roles.
type job struct {
	only  int
	roles [numRoles]bool
}

// run simulates the fleet and reports; ok is false when an estimate is off.
func run(ctx context.Context, cfg config, out, log io.Writer) (ok bool, err error) {
	if cfg.poll == 0 {
		cfg.poll = 250 * time.Millisecond
	}
	f := &fleet{
		cfg: cfg,
		out: out,
		log: log,
		hc: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConns: cfg.workers, MaxIdleConnsPerHost: cfg.workers, IdleConnTimeout: time.Minute},
		},
		cache: client.NewRandomizerCache(nil),
	}
	defer f.cache.Close()
	if err := f.waitReady(ctx); err != nil {
		return false, err
	}
	if err := f.setup(ctx); err != nil {
		return false, err
	}
	start := time.Now()
	jobs := make([]job, cfg.n)
	for i := range jobs {
		jobs[i] = job{only: -1, roles: [numRoles]bool{true, true, true}}
	}
	if err := f.simulate(ctx, jobs); err != nil {
		return false, err
	}
	el := time.Since(start)
	fmt.Fprintf(out, "simulated %d instances over %d days in %.1fs (%.0f/s): %d messages sealed and acknowledged; %d upload retries, %d duplicates dropped by the shuffler\n",
		cfg.n, cfg.days, el.Seconds(), float64(cfg.n)/el.Seconds(), f.messages.Load(), f.retries.Load(), f.duplicates.Load())
	if cfg.ids != nil {
		fmt.Fprintf(out, "admission: the instances were granted %d tokens (%.2f per message) and refused %d\n",
			f.tokens.Load(), float64(f.tokens.Load())/float64(max(f.messages.Load(), 1)), f.tokensRefused.Load())
	}
	if err := f.awaitBatches(ctx); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "all reports estimated after %.1fs\n", time.Since(start).Seconds())
	return f.report(ctx)
}

// collectorURL returns the collector's base URL: collector, else
// endpoint.
func (c *config) collectorURL() string {
	if c.collector != "" {
		return c.collector
	}
	return c.endpoint
}

// waitReady polls GET /v1/plan until it answers 200, for up to cfg.wait.
func (f *fleet) waitReady(ctx context.Context) error {
	if f.cfg.wait <= 0 {
		return nil
	}
	u, err := url.JoinPath(f.cfg.collectorURL(), client.PlanPath)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(f.cfg.wait)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := f.hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not serve its plan within %v: %w", f.cfg.wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// setup fetches the plan through a first Provider (which verifies it),
// assigns the metrics their roles and places the simulated days.
func (f *fleet) setup(ctx context.Context) error {
	p, err := client.NewProvider(ctx, f.providerConfig(nil, 0))
	if err != nil {
		return err
	}
	f.plan = p.Plan()
	if err := p.Shutdown(ctx); err != nil {
		return err
	}
	for i := range f.plan.Metrics {
		m := &f.plan.Metrics[i]
		_, d, err := f.cache.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			return err
		}
		r := roleZipf
		switch {
		case d.Input == sdk.InputReal:
			r = roleSum
		case m.Plugin == "rappor":
			r = roleFeature
		}
		if f.metrics[r] == nil {
			f.metrics[r] = m
		}
	}
	for r, m := range f.metrics {
		if m == nil {
			return fmt.Errorf("the plan has no %s metric; the fleet needs one of each (see examples/plan.yaml)", roleNames[r])
		}
		for range f.cfg.days {
			f.truth[r] = append(f.truth[r], newTruth(m))
		}
	}
	f.pop = newPopulation(f.cfg, f.metrics[roleZipf], f.metrics[roleFeature], f.metrics[roleSum])
	f.period = f.plan.PeriodLength()
	f.first = f.plan.PeriodStart(f.plan.PeriodOf(time.Now()) - int64(f.cfg.days))
	g := f.plan.Guarantee
	fmt.Fprintf(f.out, "plan: target (eps, delta) = (%g, %g) per user over any %d periods of %v, %s travel, n_min = %d; the plan proves (%.4g, %.3g)\n",
		f.plan.Target.Eps, f.plan.Target.Delta, f.plan.HorizonPeriods(), f.period, f.plan.Travel, f.plan.NMin, g.Eps, g.Delta)
	for r, m := range f.metrics {
		fmt.Fprintf(f.out, "  %-18s %-10s eps0 = %.4f  (%s)\n", m.Name, m.Plugin, m.Eps0, roleNames[r])
	}
	fmt.Fprintf(f.out, "simulating %d days from %s (each instance active on a day with probability %g, 1 to %d Records per metric then)\n",
		f.cfg.days, f.first.Format(time.DateOnly), f.cfg.active, f.cfg.records)
	// The collector must start empty, or the truth would not match.
	for _, m := range f.metrics {
		d, err := f.detail(ctx, m.Name, false)
		if err != nil {
			return err
		}
		if n := d.total(); n != 0 {
			return fmt.Errorf("the server already holds %d reports of %q; run the fleet against a fresh data dir", n, m.Name)
		}
	}
	return nil
}

// providerConfig is the configuration of every simulated instance, on the
// clock now (nil: the real one). The grace of a staged period covers the
// whole simulation: an instance that skips days reports its last active
// day at its next Record (or at the end), days later in simulated time.
func (f *fleet) providerConfig(now func() time.Time, id uint64) client.Config {
	grace := time.Duration(0) // the first Provider, before the plan is known
	if f.plan != nil {
		grace = time.Duration(f.cfg.days+1) * f.plan.PeriodLength()
	}
	var cred func(context.Context) (string, error)
	if f.cfg.ids != nil {
		cred = func(context.Context) (string, error) { return f.cfg.ids.mint(id) }
	}
	return client.Config{
		Credential:    cred,
		TokenPrefetch: f.cfg.tokenPrefetch,
		Mode:          client.ModeOn,
		Endpoint:      f.cfg.endpoint,
		PlanEndpoint:  f.cfg.collector,
		PlanKey:       f.cfg.planKey,
		MaxEps0:       f.cfg.maxEps0,
		Plan:          f.plan,                   // fetched by the first instance; nil for it
		Outbox:        client.NewMemoryOutbox(), // not durable: fine for a simulation
		Randomizers:   f.cache,
		HTTPClient:    f.hc,
		UploadDelay:   time.Hour, // upload once, in Flush
		RetryMin:      50 * time.Millisecond,
		RetryMax:      2 * time.Second,
		Now:           now,
		PeriodGrace:   grace,
	}
}

// simulate runs jobs with cfg.workers at a time. Each is its own
// Provider: plan verified, values recorded day by day, flushed, shut down.
func (f *fleet) simulate(ctx context.Context, jobs []job) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	step := int64(max(len(jobs)/10, 1))
	for range min(f.cfg.workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				if err := f.runInstance(ctx, jobs[i]); err != nil {
					cancel(fmt.Errorf("instance %d: %w", i, err))
					return
				}
				f.instances.Add(1)
				if d := done.Add(1); len(jobs) >= 1000 && d%step == 0 {
					fmt.Fprintf(f.log, "  %d/%d instances done\n", d, len(jobs))
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// runInstance simulates one instance over the days on its own clock: on
// each active day it records its values at a random time of the day; the
// SDK keeps one report per metric and period and seals a period once it
// has closed (at the next day's first Record, or at the Flush after the
// last day), so the shuffler gets one report per metric per active day.
func (f *fleet) runInstance(ctx context.Context, j job) error {
	id := f.next.Add(1)
	days := f.pop.instance(id, j.only)
	first := slices.IndexFunc(days, func(d day) bool { return d.active })
	if first < 0 {
		return nil // not used this week: the app never runs, so no Provider
	}
	// The instance starts on its first active day (the app is opened
	// then), so that it fetches no admission tokens for the days before.
	var clock atomic.Int64
	clock.Store(f.first.Add(time.Duration(first) * f.period).UnixNano())
	p, err := client.NewProvider(ctx, f.providerConfig(func() time.Time { return time.Unix(0, clock.Load()) }, id))
	if err != nil {
		return err
	}
	defer p.Shutdown(ctx)
	if f.cfg.ids != nil {
		// The app runs a while on its first day: its Provider's first
		// round fetches that day's tokens before the simulated clock
		// moves on (else it would fetch a later day's, mostly unspent).
		waitFirstTokens(ctx, p)
	}
	m := p.Meter("")
	rng := id * 0x9e3779b97f4a7c15
	// sent[d][r]: the instance reports role r on day d.
	sent := make([][numRoles]bool, len(days))
	for d := range days {
		v := &days[d]
		if !v.active {
			continue
		}
		rng = rng*6364136223846793005 + 1442695040888963407
		offset := time.Duration(rng>>11) % f.period
		clock.Store(f.first.Add(time.Duration(d)*f.period + offset).UnixNano())
		for r, mm := range f.metrics {
			if !j.roles[r] {
				continue
			}
			if r == roleSum {
				sum := m.Sum(mm.Name)
				if !sum.Enabled(ctx) {
					continue
				}
				for _, a := range v.amounts {
					if err := sum.Record(ctx, a); err != nil {
						return err
					}
				}
			} else {
				cat := m.Categorical(mm.Name)
				if !cat.Enabled(ctx) {
					continue // parallel travel: another metric's period
				}
				for _, c := range v.cats[r] {
					if err := cat.Record(ctx, c); err != nil {
						return err
					}
				}
			}
			sent[d][r] = true
		}
	}
	// Past the last day: the last active day's period closes in Flush.
	clock.Store(f.first.Add(time.Duration(len(days))*f.period + time.Minute).UnixNano())
	if err := p.Flush(ctx); err != nil {
		return err
	}
	st := p.Stats()
	if st.Rejected != 0 || st.Dropped != 0 || st.Expired != 0 || st.Late != 0 || st.Incomplete != 0 {
		return fmt.Errorf("instance stats %+v: reports refused, expired, late or incomplete", st)
	}
	if st.Uploaded != st.Messages {
		return fmt.Errorf("%d of %d messages uploaded", st.Uploaded, st.Messages)
	}
	f.retries.Add(st.Retries)
	f.duplicates.Add(st.Duplicates)
	f.messages.Add(st.Messages)
	f.tokens.Add(st.Tokens)
	f.tokensRefused.Add(st.TokensRefused)
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := range days {
		for r, mm := range f.metrics {
			if sent[d][r] {
				cat, amount := days[d].value(r, mm.Lo, mm.Hi)
				f.truth[r][d].add(cat, amount, r == roleSum)
			}
		}
	}
	return nil
}

// waitFirstTokens waits until p's first round of admission has an answer
// (a token granted or refused), for at most 2 s: an issuer that does not
// answer only makes the instance fetch its tokens at Flush instead.
func waitFirstTokens(ctx context.Context, p *client.Provider) {
	deadline := time.Now().Add(2 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if st := p.Stats(); st.Tokens+st.TokensRefused > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// errNoEstimate reports a metric without an estimate.
var errNoEstimate = errors.New("no estimate")
