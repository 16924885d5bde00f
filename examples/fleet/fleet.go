package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
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
	n        int
	workers  int
	seed     uint64
	zipfS    float64
	timeout  time.Duration
	maxEps0  float64
	// wait is how long to wait for the server to answer at start.
	wait time.Duration
	// poll is the interval between polls of the collector. Defaults to
	// 250 ms.
	poll time.Duration
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

	mu    sync.Mutex
	truth [numRoles]*truth // guarded by mu

	instances, retries, duplicates, messages atomic.Int64
}

// instance is one simulated app instance: the value of each metric it
// records (has[r] false: it records no value of role r).
type instance struct {
	has    [numRoles]bool
	cat    [numRoles]string
	amount float64
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
	jobs := make([]instance, cfg.n)
	for i := range jobs {
		jobs[i] = f.pop.draw([numRoles]bool{true, true, true})
	}
	if err := f.simulate(ctx, jobs); err != nil {
		return false, err
	}
	el := time.Since(start)
	fmt.Fprintf(out, "simulated %d instances in %.1fs (%.0f/s): %d messages sealed and acknowledged; %d upload retries, %d duplicates dropped by the shuffler\n",
		cfg.n, el.Seconds(), float64(cfg.n)/el.Seconds(), f.messages.Load(), f.retries.Load(), f.duplicates.Load())
	if err := f.awaitBatches(ctx); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "all reports estimated after %.1fs\n", time.Since(start).Seconds())
	return f.report(ctx)
}

// waitReady polls GET /v1/plan until it answers 200, for up to cfg.wait.
func (f *fleet) waitReady(ctx context.Context) error {
	if f.cfg.wait <= 0 {
		return nil
	}
	u, err := url.JoinPath(f.cfg.endpoint, client.PlanPath)
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

// setup fetches the plan through a first Provider (which verifies it) and
// assigns the metrics their roles.
func (f *fleet) setup(ctx context.Context) error {
	p, err := client.NewProvider(ctx, f.providerConfig())
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
		f.truth[r] = newTruth(m)
	}
	f.pop = newPopulation(f.cfg.seed, f.cfg.zipfS, f.metrics[roleZipf], f.metrics[roleFeature], f.metrics[roleSum])
	g := f.plan.Guarantee
	fmt.Fprintf(f.out, "plan: target (eps, delta) = (%g, %g) per user, %s travel, n_min = %d; the plan proves (%.4g, %.3g)\n",
		f.plan.Target.Eps, f.plan.Target.Delta, f.plan.Travel, f.plan.NMin, g.Eps, g.Delta)
	for r, m := range f.metrics {
		fmt.Fprintf(f.out, "  %-18s %-10s eps0 = %.4f  (%s)\n", m.Name, m.Plugin, m.Eps0, roleNames[r])
	}
	// The collector must start empty, or the truth would not match.
	for _, m := range f.metrics {
		d, err := f.detail(ctx, m.Name)
		if err != nil {
			return err
		}
		if n := d.total(); n != 0 {
			return fmt.Errorf("the server already holds %d reports of %q; run the fleet against a fresh data dir", n, m.Name)
		}
	}
	return nil
}

// providerConfig is the configuration of every simulated instance.
func (f *fleet) providerConfig() client.Config {
	return client.Config{
		Mode:        client.ModeOn,
		Endpoint:    f.cfg.endpoint,
		MaxEps0:     f.cfg.maxEps0,
		Plan:        f.plan,                   // fetched by the first instance; nil for it
		Outbox:      client.NewMemoryOutbox(), // not durable: fine for a simulation
		Randomizers: f.cache,
		HTTPClient:  f.hc,
		UploadDelay: time.Hour, // upload once, in Flush
		RetryMin:    50 * time.Millisecond,
		RetryMax:    2 * time.Second,
	}
}

// simulate runs the instances with cfg.workers at a time. Each is its own
// Provider: plan fetched and verified, values recorded, flushed, shut down.
func (f *fleet) simulate(ctx context.Context, jobs []instance) error {
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
				if err := f.runInstance(ctx, &jobs[i]); err != nil {
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
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

func (f *fleet) runInstance(ctx context.Context, in *instance) error {
	p, err := client.NewProvider(ctx, f.providerConfig())
	if err != nil {
		return err
	}
	defer p.Shutdown(ctx)
	m := p.Meter("")
	// With parallel travel the round's metric is the only one Enabled;
	// the others would report nothing, so they are not recorded (nor
	// counted in the truth). Recording it ends the round, and an instance
	// simulates one round: it stops there.
	var sent [numRoles]bool
	for r, mm := range f.metrics {
		if !in.has[r] {
			continue
		}
		if f.plan.Travel == "parallel" && slices.Contains(sent[:], true) {
			break
		}
		if r == roleSum {
			sum := m.Sum(mm.Name)
			if sent[r] = sum.Enabled(ctx); sent[r] {
				err = sum.Record(ctx, in.amount)
			}
		} else {
			cat := m.Categorical(mm.Name)
			if sent[r] = cat.Enabled(ctx); sent[r] {
				err = cat.Record(ctx, in.cat[r])
			}
		}
		if err != nil {
			return err
		}
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	st := p.Stats()
	if st.Rejected != 0 || st.Dropped != 0 {
		return fmt.Errorf("the shuffler refused %d reports", st.Rejected+st.Dropped)
	}
	if st.Uploaded != st.Messages {
		// Joint travel: an instance that records only some metrics leaves
		// them staged (the fleet's top-ups record every metric).
		return fmt.Errorf("%d of %d messages uploaded", st.Uploaded, st.Messages)
	}
	f.retries.Add(st.Retries)
	f.duplicates.Add(st.Duplicates)
	f.messages.Add(st.Messages)
	f.mu.Lock()
	for r := range f.metrics {
		if sent[r] {
			f.truth[r].add(in, r)
		}
	}
	f.mu.Unlock()
	return nil
}

// awaitBatches polls the collector until it has estimated every report the
// fleet sent. The shuffler never releases a batch below n_min, so when fewer
// than n_min reports of a pool are missing they all wait in it (any batch in
// flight holds at least n_min): the fleet then sends just enough fresh
// instances to release them. With separate travel each metric is its own
// pool and one instance covers every metric that needs topping up; with
// joint or parallel travel the plan's messages share one pool, each
// instance sends one message and records every metric.
func (f *fleet) awaitBatches(ctx context.Context) error {
	last := time.Now()
	lastTotal := int64(-1)
	for {
		done := true
		var total int64
		var need [numRoles]int64
		var missingMessages int64
		for r, m := range f.metrics {
			d, err := f.detail(ctx, m.Name)
			if err != nil {
				return err
			}
			got := d.total()
			total += got
			f.mu.Lock()
			sent := f.truth[r].n
			f.mu.Unlock()
			missing := sent - got
			if f.plan.Pooled() && missing > 0 {
				done = false
				if f.plan.Travel == "joint" {
					missingMessages = max(missingMessages, missing) // every message carries every metric
				} else {
					missingMessages += missing // a message carries one metric
				}
				continue
			}
			switch {
			case missing < 0:
				return fmt.Errorf("metric %q: the collector holds %d reports, the fleet sent %d", m.Name, got, sent)
			case missing == 0:
			case missing < int64(f.plan.NMin):
				done = false
				need[r] = int64(f.plan.NMin) - missing
				fmt.Fprintf(f.out, "%s: %d reports wait in the shuffler's pool (below n_min = %d); topping up with %d reports\n", m.Name, missing, f.plan.NMin, need[r])
			default:
				done = false // a batch is on its way
			}
		}
		if done {
			return nil
		}
		if missingMessages > 0 && missingMessages < int64(f.plan.NMin) {
			top := int64(f.plan.NMin) - missingMessages
			fmt.Fprintf(f.out, "%s: %d messages wait in the shuffler's pool (below n_min = %d); topping up with %d messages\n", f.plan.Pool(""), missingMessages, f.plan.NMin, top)
			for r := range need {
				need[r] = top
			}
		}
		var top int64
		for _, n := range need {
			top = max(top, n)
		}
		if top > 0 {
			jobs := make([]instance, top)
			for i := range jobs {
				var has [numRoles]bool
				for r := range has {
					has[r] = int64(i) < need[r]
				}
				jobs[i] = f.pop.draw(has)
			}
			if err := f.simulate(ctx, jobs); err != nil {
				return err
			}
			fmt.Fprintf(f.out, "topped up with %d more instances\n", top)
			continue
		}
		if total != lastTotal {
			last, lastTotal = time.Now(), total
		} else if time.Since(last) > 60*time.Second {
			return fmt.Errorf("no progress for a minute: the collector holds %d reports", total)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the batches: %w", ctx.Err())
		case <-time.After(f.cfg.poll):
		}
	}
}

// metricDetail is what the fleet reads of GET /v1/metrics/{name}.
type metricDetail struct {
	Name   string `json:"name"`
	Epochs []struct {
		Current       bool    `json:"current"`
		Plugin        string  `json:"plugin"`
		Eps0          float64 `json:"eps0"`
		N             int64   `json:"n"`
		Malformed     int64   `json:"malformed"`
		Batches       int64   `json:"batches"`
		Confidence    float64 `json:"confidence"`
		EstimateError string  `json:"estimate_error"`
		Estimates     []struct {
			Label    string  `json:"label"`
			Value    float64 `json:"value"`
			Variance float64 `json:"variance"`
			Lo       float64 `json:"lo"`
			Hi       float64 `json:"hi"`
		} `json:"estimates"`
		Guarantee *struct {
			Eps      float64 `json:"eps"`
			Delta    float64 `json:"delta"`
			N        int64   `json:"n"`
			Messages int64   `json:"messages"`
		} `json:"guarantee"`
	} `json:"periods"`
}

// total returns the reports of the current epoch, valid and malformed,
// over all its periods.
func (d *metricDetail) total() int64 {
	var n int64
	for _, e := range d.Epochs {
		if e.Current {
			n += e.N + e.Malformed
		}
	}
	return n
}

func (f *fleet) detail(ctx context.Context, name string) (*metricDetail, error) {
	u, err := url.JoinPath(f.cfg.endpoint, "/v1/metrics", name)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return &metricDetail{Name: name}, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", u, resp.Status, body)
	}
	var d metricDetail
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return &d, nil
}

// population draws simulated instances' values from a seeded generator.
type population struct {
	mu      sync.Mutex
	rng     *rand.Rand
	zipf    *rand.Zipf
	screens []string
	feats   []string
	featCDF []float64
	lo, hi  float64
}

// featureWeights is the popularity of the RAPPOR metric's categories, in
// plan order (cycled when the plan has more).
var featureWeights = []float64{30, 22, 15, 10, 8, 5, 4, 2, 1.5, 1, 0.8, 0.7, 0.5, 0.3, 0.2, 0.1}

func newPopulation(seed uint64, s float64, zipf, feat, sum *plan.Metric) *population {
	rng := rand.New(rand.NewPCG(seed, 0x626c616e6b6574))
	p := &population{
		rng:     rng,
		zipf:    rand.NewZipf(rng, s, 1, uint64(len(zipf.Categories)-1)),
		screens: zipf.Categories,
		feats:   feat.Categories,
		lo:      sum.Lo,
		hi:      sum.Hi,
	}
	var c float64
	for i := range feat.Categories {
		c += featureWeights[i%len(featureWeights)]
		p.featCDF = append(p.featCDF, c)
	}
	for i := range p.featCDF {
		p.featCDF[i] /= c
	}
	return p
}

// draw returns an instance recording the roles in has.
func (p *population) draw(has [numRoles]bool) instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := instance{has: has}
	in.cat[roleZipf] = p.screens[p.zipf.Uint64()]
	u := p.rng.Float64()
	in.cat[roleFeature] = p.feats[min(sort.SearchFloat64s(p.featCDF, u), len(p.feats)-1)]
	// Bytes synced: log-normal around an eighth of the range, clamped to
	// it as the randomizer does, so that the truth is what is estimated.
	v := (p.hi - p.lo) / 8 * math.Exp(p.rng.NormFloat64())
	in.amount = min(max(p.lo+v, p.lo), p.hi)
	return in
}

// truth is the exact aggregate of what the fleet sent for one metric.
type truth struct {
	n      int64
	index  map[string]int
	labels []string
	counts []float64
	sum    float64
}

func newTruth(m *plan.Metric) *truth {
	t := &truth{index: map[string]int{}}
	for i, c := range m.Categories {
		t.index[c] = i
		t.labels = append(t.labels, c)
	}
	t.counts = make([]float64, len(t.labels))
	return t
}

func (t *truth) add(in *instance, r int) {
	t.n++
	if r == roleSum {
		t.sum += in.amount
		return
	}
	t.counts[t.index[in.cat[r]]]++
}

// errNoEstimate reports a metric without an estimate.
var errNoEstimate = errors.New("no estimate")
