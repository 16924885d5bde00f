package collector

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Ingest errors.
var (
	// ErrBadBatch reports batch bytes that do not decode (HTTP 400).
	ErrBadBatch = errors.New("collector: malformed batch")
	// ErrBatchRefused reports a well-formed batch the collector will not
	// ingest: a metric not in its plan, an unsupported suite, or fewer
	// than n_min reports (HTTP 422).
	ErrBatchRefused = errors.New("collector: batch refused")
)

// DefaultMaxBatchBytes bounds a batch body.
const DefaultMaxBatchBytes = 1 << 30

// EpochLen is the length of an epoch id: hex digits of the published
// plan's digest (plan.Plan.Epoch).
const EpochLen = plan.EpochLen

// CollectorOptions configures a Collector.
type CollectorOptions struct {
	// Plan is the privacy plan. When it is not calibrated, OpenCollector
	// calibrates it, unless an earlier run in the same Dir already
	// published a calibration of the same plan, which is reused (plan
	// calibration is not bit-for-bit reproducible, and statistics of
	// different calibrations never merge). Required.
	Plan *plan.Plan
	// Dir is the data directory: collector.key and collector.db. Required.
	Dir string
	// Open opens the metrics' randomizers; it is called for every
	// statistic estimated, so it should cache (Plugins.Open does).
	// Required.
	Open plan.Opener
	// Token is the bearer token POST /v1/batches requires. Defaults to
	// none: anyone who can reach the collector may then post batches and
	// bypass the shuffler, so leave it empty only in tests.
	Token string
	// Logger receives the collector's logs. Defaults to discarding them.
	Logger *slog.Logger
	// MaxBatchBytes bounds a batch body; larger ones get 413. Defaults to
	// DefaultMaxBatchBytes.
	MaxBatchBytes int64
	// Workers is the number of goroutines opening the sealed reports of a
	// batch. Defaults to GOMAXPROCS.
	Workers int
	// Epsilon computes a batch's central eps. Defaults to
	// accountant.Epsilon.
	Epsilon func(m accountant.Mechanism, eps0 float64, n int, delta float64) (accountant.EpsilonResult, error)
}

// metricState is a metric of the current plan, ready to ingest.
type metricState struct {
	m       plan.Metric
	binding report.Binding
	r       sdk.Randomizer
	desc    *sdk.Description
}

// MaxOlderEpochs is how many earlier epochs (under the same collector key)
// the collector keeps open for reports sealed before an app fetched the
// current plan.
const MaxOlderEpochs = 8

// epochState is a published plan, ready to ingest: its metrics with their
// randomizers and bindings, and its pool with pooled travel.
type epochState struct {
	epoch   string
	plan    *plan.Plan
	metrics map[string]*metricState
	// pool is the plan's one shuffler pool with joint or parallel travel,
	// nil with separate travel.
	pool *poolState
}

// binding returns the binding reports of pool are sealed under in this
// epoch, the report length to expect (0: any), and whether the epoch has
// that pool at all.
func (e *epochState) binding(pool string) (report.Binding, int, bool) {
	if e.pool != nil {
		return e.pool.binding, 0, pool == e.pool.name
	}
	if ms := e.metrics[pool]; ms != nil {
		return ms.binding, ms.desc.ReportBytes, true
	}
	return report.Binding{}, 0, false
}

// openEpoch opens the randomizers of a calibrated plan and computes its
// bindings. The plan's metric versions must match the plugins'.
func (c *Collector) openEpoch(ctx context.Context, pub *plan.Plan) (*epochState, error) {
	e := &epochState{epoch: pub.Epoch(), plan: pub, metrics: map[string]*metricState{}}
	bs := pub.Bindings()
	for i, m := range pub.Metrics {
		r, err := c.o.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			return nil, fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		d, err := r.Describe(ctx)
		if err != nil {
			return nil, fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		if m.Version != d.Version {
			return nil, fmt.Errorf("collector: metric %q: the plan is for %s version %q, the plugin is version %q", m.Name, m.Plugin, m.Version, d.Version)
		}
		if m.Eps0 < d.Eps0Min || m.Eps0 > d.Eps0Max {
			return nil, fmt.Errorf("collector: metric %q: eps0 = %v outside the plugin's range [%v, %v]", m.Name, m.Eps0, d.Eps0Min, d.Eps0Max)
		}
		e.metrics[m.Name] = &metricState{m: m, binding: bs[i], r: r, desc: d}
	}
	if pub.Pooled() {
		ps := &poolState{name: pub.Pool(""), travel: pub.Travel, binding: report.PoolBinding(pub.Pool(""), pub.Travel, bs)}
		for _, m := range pub.Metrics {
			ps.metrics = append(ps.metrics, e.metrics[m.Name])
		}
		e.pool = ps
	}
	return e, nil
}

// poolState is the one shuffler pool of a plan with pooled travel: its
// messages carry the metrics (in plan order) inside the sealed bytes.
type poolState struct {
	name    string
	travel  string
	binding report.Binding
	metrics []*metricState
}

type epsKey struct {
	epoch, pool, mix string
	n                int64
}

type epsValue struct{ eps, delta float64 }

// epsCall is a guarantee being computed; concurrent ingests of batches of
// the same size wait for it instead of computing it again.
type epsCall struct {
	done chan struct{}
	v    epsValue
	ok   bool
}

type collectorCounters struct {
	batches, duplicates, bad, refused atomic.Int64
	reports, malformed                atomic.Int64
}

// Collector is the analyzer role: it publishes the calibrated plan with its
// public key (GET /v1/plan), ingests shuffled batches (POST /v1/batches):
// opens each report, accumulates the valid ones with the metric's plugin,
// and stores the merged statistic per metric and epoch, atomically and at
// most once per batch id; and it serves estimates with their central
// guarantee (GET /v1/metrics, GET /v1/metrics/{name}).
type Collector struct {
	o        CollectorOptions
	log      *slog.Logger
	key      *report.PrivateKey
	plan     *plan.Plan
	planJSON []byte
	epoch    string
	st       *store
	// cur is the current epoch; older are earlier epochs under the same
	// key, newest first, whose reports may still arrive from apps that
	// have not fetched the current plan yet.
	cur   *epochState
	older []*epochState

	epsMu       sync.Mutex
	epsCache    map[epsKey]epsValue
	epsInFlight map[epsKey]*epsCall

	plansMu sync.Mutex
	plans   map[string]*plan.Plan  // published plans by epoch
	opened  map[string]*epochState // earlier epochs open: older, and those epochByID loaded

	c         collectorCounters
	closeOnce sync.Once
}

// clonePlan deep-copies p.
func clonePlan(p *plan.Plan) (*plan.Plan, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var c plan.Plan
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// OpenCollector opens (creating) the collector's key and database in
// o.Dir, publishes the plan (calibrating it if needed) and opens the
// metrics' randomizers.
func OpenCollector(ctx context.Context, o CollectorOptions) (*Collector, error) {
	if o.Plan == nil {
		return nil, fmt.Errorf("%w: Plan is required", ErrOptions)
	}
	if o.Open == nil {
		return nil, fmt.Errorf("%w: Open is required", ErrOptions)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Epsilon == nil {
		o.Epsilon = accountant.Epsilon
	}
	if err := EnsureDir(o.Dir); err != nil {
		return nil, err
	}
	key, created, err := LoadOrCreateKey(o.Dir)
	if err != nil {
		return nil, err
	}
	if created {
		o.Logger.Info("generated collector key", "file", filepath.Join(o.Dir, KeyFile))
	}
	db, err := openDatabase(ctx, filepath.Join(o.Dir, CollectorDB), collectorSchema)
	if err != nil {
		return nil, err
	}
	if err := migrateStore(ctx, db); err != nil {
		db.close()
		return nil, err
	}
	c := &Collector{
		o:        o,
		log:      o.Logger,
		key:      key,
		st:       &store{db: db},
		epsCache: map[epsKey]epsValue{},

		epsInFlight: map[epsKey]*epsCall{},
		plans:       map[string]*plan.Plan{},
		opened:      map[string]*epochState{},
	}
	if err := c.publish(ctx); err != nil {
		db.close()
		return nil, err
	}
	return c, nil
}

// publish sets the published plan: a stored calibration of the same
// configured plan and key, or a new one.
func (c *Collector) publish(ctx context.Context) error {
	src, err := clonePlan(c.o.Plan)
	if err != nil {
		return err
	}
	if err := src.Validate(); err != nil {
		return err
	}
	src.CollectorKey = ""
	source := src.Digest()
	pubKey := base64.StdEncoding.EncodeToString(c.key.PublicKey().Bytes())

	var pub *plan.Plan
	var stored []byte
	err = c.st.db.r.QueryRowContext(ctx, `SELECT plan FROM epochs WHERE source = ? AND key = ? ORDER BY rowid DESC LIMIT 1`, source, pubKey).Scan(&stored)
	if err == nil {
		if pub, err = plan.Parse(stored); err != nil {
			return fmt.Errorf("collector: stored plan: %w", err)
		}
	} else {
		pub = src
	}
	// Check the plan against every metric's plugin before calibrating.
	for i := range pub.Metrics {
		m := &pub.Metrics[i]
		r, err := c.o.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			return fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		d, err := r.Describe(ctx)
		if err != nil {
			return fmt.Errorf("collector: metric %q: %w", m.Name, err)
		}
		if m.Version == "" && pub.Calibrated() {
			m.Version = d.Version
		}
		if m.Version != "" && m.Version != d.Version {
			return fmt.Errorf("collector: metric %q: the plan is for %s version %q, the plugin is version %q", m.Name, m.Plugin, m.Version, d.Version)
		}
	}
	if stored == nil {
		if !pub.Calibrated() {
			c.log.Info("calibrating the plan", "metrics", len(pub.Metrics), "n_min", pub.NMin, "target_eps", pub.Target.Eps, "target_delta", pub.Target.Delta)
			if err := pub.Calibrate(ctx, c.o.Open); err != nil {
				return err
			}
		}
		pub.CollectorKey = pubKey
		b, err := pub.JSON()
		if err != nil {
			return err
		}
		epoch := pub.Digest()[:EpochLen]
		if _, err := c.st.db.w.ExecContext(ctx, `INSERT OR IGNORE INTO epochs (epoch, source, key, plan) VALUES (?, ?, ?, ?)`, epoch, source, pubKey, b); err != nil {
			return fmt.Errorf("collector: storing plan: %w", err)
		}
		c.log.Info("published a new plan epoch", "epoch", epoch)
	}
	if c.cur, err = c.openEpoch(ctx, pub); err != nil {
		return err
	}
	c.plan = pub
	c.epoch = c.cur.epoch
	c.plans[c.epoch] = pub
	if c.planJSON, err = pub.JSON(); err != nil {
		return err
	}
	return c.openOlder(ctx, pubKey)
}

// EarlierPools returns the pools of the plans this collector published
// before the current one under its key (see ShufflerOptions.EarlierPools).
func (c *Collector) EarlierPools(ctx context.Context) ([]string, error) {
	key := base64.StdEncoding.EncodeToString(c.key.PublicKey().Bytes())
	rows, err := c.st.db.r.QueryContext(ctx, `SELECT plan FROM epochs WHERE key = ? AND epoch != ?`, key, c.epoch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	for _, p := range c.plan.Pools() {
		seen[p] = true
	}
	var out []string
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		p, err := plan.Parse(b)
		if err != nil {
			continue // an unreadable old plan: its pools are not taken
		}
		for _, pool := range p.Pools() {
			if !seen[pool] {
				seen[pool] = true
				out = append(out, pool)
			}
		}
	}
	return out, rows.Err()
}

// errUnknownEpoch reports an epoch whose reports this collector cannot
// open: not published under its key, or its plugins no longer open it.
var errUnknownEpoch = errors.New("unknown epoch")

// epochByID returns the epoch of id: the current one, an open earlier one,
// or one this collector published under its current key, opened from the
// database (and kept open).
func (c *Collector) epochByID(ctx context.Context, id string) (*epochState, error) {
	if id == c.epoch {
		return c.cur, nil
	}
	c.plansMu.Lock()
	defer c.plansMu.Unlock()
	if e := c.opened[id]; e != nil {
		return e, nil
	}
	var b []byte
	key := base64.StdEncoding.EncodeToString(c.key.PublicKey().Bytes())
	err := c.st.db.r.QueryRowContext(ctx, `SELECT plan FROM epochs WHERE epoch = ? AND key = ?`, id, key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q was not published by this collector (under its current key)", errUnknownEpoch, id)
	}
	if err != nil {
		return nil, err
	}
	e, err := c.openStored(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s no longer opens: %v", errUnknownEpoch, id, err)
	}
	return e, nil
}

// openStored opens an epoch from its stored plan and keeps it open. The
// caller holds plansMu (or is OpenCollector).
func (c *Collector) openStored(ctx context.Context, stored []byte) (*epochState, error) {
	p, err := plan.Parse(stored)
	if err != nil {
		return nil, fmt.Errorf("stored plan: %w", err)
	}
	e, err := c.openEpoch(ctx, p)
	if err != nil {
		return nil, err
	}
	c.opened[e.epoch] = e
	c.plans[e.epoch] = p
	return e, nil
}

// openOlder opens up to MaxOlderEpochs earlier epochs under key, newest
// first. An epoch that no longer opens (a plugin gone or of another
// version) is skipped with a warning: its late reports are malformed.
func (c *Collector) openOlder(ctx context.Context, key string) error {
	rows, err := c.st.db.r.QueryContext(ctx, `SELECT epoch, plan FROM epochs WHERE key = ? AND epoch != ? ORDER BY rowid DESC LIMIT ?`, key, c.epoch, MaxOlderEpochs)
	if err != nil {
		return fmt.Errorf("collector: earlier epochs: %w", err)
	}
	type stored struct {
		epoch string
		plan  []byte
	}
	var all []stored
	for rows.Next() {
		var st stored
		if err := rows.Scan(&st.epoch, &st.plan); err != nil {
			rows.Close()
			return fmt.Errorf("collector: earlier epochs: %w", err)
		}
		all = append(all, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("collector: earlier epochs: %w", err)
	}
	c.older = nil
	for _, st := range all {
		e, err := c.openStored(ctx, st.plan)
		if err == nil {
			c.older = append(c.older, e)
			continue
		}
		c.log.Warn("an earlier epoch cannot be opened; its late reports will count as malformed", "epoch", st.epoch, "error", err)
	}
	return nil
}

// Plan returns a copy of the published plan (calibrated, with the
// collector's key).
func (c *Collector) Plan() *plan.Plan {
	p, _ := clonePlan(c.plan)
	return p
}

// Epoch returns the current epoch: the first EpochLen hex digits of the
// published plan's digest. Statistics of different epochs never merge.
func (c *Collector) Epoch() string { return c.epoch }

// PublicKey returns the collector's public key bytes.
func (c *Collector) PublicKey() *report.PublicKey { return c.key.PublicKey() }

// Close closes the database. The randomizers belong to the caller's
// Opener. Close is idempotent.
func (c *Collector) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.st.db.close() })
	return err
}

// Register adds the collector's routes to mux: GET /v1/plan, POST
// /v1/batches, GET /v1/metrics and GET /v1/metrics/{name...}.
func (c *Collector) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/plan", c.handlePlan)
	mux.HandleFunc("POST /v1/batches", c.handleBatches)
	mux.HandleFunc("GET /v1/metrics", c.handleMetrics)
	mux.HandleFunc("GET /v1/metrics/{name...}", c.handleMetric)
}

func (c *Collector) handlePlan(w http.ResponseWriter, r *http.Request) {
	etag := `"` + c.plan.Digest() + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(c.planJSON)
}

// etagMatch reports whether an If-None-Match header value matches etag
// (RFC 9110 13.1.2, weak comparison).
func etagMatch(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}

// IngestResult is the JSON body of a 200 answer to POST /v1/batches.
type IngestResult struct {
	// Batch is the batch id (hex).
	Batch string `json:"batch"`
	// Metric is the batch's metric.
	Metric string `json:"metric"`
	// Epoch is the plan epoch the batch was counted in.
	Epoch string `json:"epoch"`
	// Duplicate is true when the batch was already ingested; nothing was
	// counted again.
	Duplicate bool `json:"duplicate"`
	// Reports is the number of sealed reports in the batch.
	Reports int `json:"reports"`
	// N is the number of valid reports counted, Malformed the number
	// dropped (unopenable or undecodable). Zero for a duplicate.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	// Parts counts the valid reports of each metric of a pooled batch
	// (joint or parallel travel), where N counts messages. Absent for a
	// batch of one metric.
	Parts map[string]int64 `json:"parts,omitempty"`
	// Earlier counts, per earlier epoch, the valid reports (or messages)
	// of the batch sealed under that epoch's plan by apps that had not
	// fetched the current one: they count in that epoch. N includes them.
	Earlier map[string]int64 `json:"earlier,omitempty"`
	// Eps and Delta are the central guarantee of the batch's valid
	// reports of the current epoch; null when none is known.
	Eps   *float64 `json:"eps"`
	Delta *float64 `json:"delta"`
}

func (c *Collector) authorized(r *http.Request) bool {
	if c.o.Token == "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	want := []byte("Bearer " + c.o.Token)
	return subtle.ConstantTimeCompare(got, want) == 1
}

func (c *Collector) handleBatches(w http.ResponseWriter, r *http.Request) {
	if !c.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="blanket collector"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	body, status, err := readBody(w, r, c.o.MaxBatchBytes)
	if err != nil {
		c.c.bad.Add(1)
		writeError(w, status, "%v", err)
		return
	}
	res, err := c.Ingest(r.Context(), body)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, ErrBadBatch):
		writeError(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, ErrBatchRefused):
		writeError(w, http.StatusUnprocessableEntity, "%v", err)
	case r.Context().Err() != nil:
		// The sender is gone; nothing was committed.
	default:
		c.log.Error("ingesting batch", "error", err)
		writeError(w, http.StatusInternalServerError, "ingesting batch failed; retry")
	}
}

// Ingest decodes a batch (report.EncodeBatch bytes), opens its reports,
// accumulates the valid ones and stores the statistic with the batch's
// central guarantee, in one transaction. A batch id already ingested is
// acknowledged with Duplicate set and not counted again. Reports that do
// not open with the metric's binding or do not decode are counted in
// Malformed and dropped; the rest of the batch is kept. Errors wrap
// ErrBadBatch or ErrBatchRefused for the sender's mistakes; any other
// error means nothing was stored and the batch may be retried.
//
// With joint or parallel travel a batch is of the plan's one pool
// (plan.Plan.Pool): each report is a sealed message (report.EncodeMessage)
// carrying every metric (joint) or one (parallel). A message that does not
// carry what its travel mode says is malformed as a whole; the valid ones
// feed every metric's statistic, and the batch's guarantee is the
// accountant's for the plan's mechanism at the number of valid messages.
func (c *Collector) Ingest(ctx context.Context, body []byte) (IngestResult, error) {
	b, err := report.DecodeBatch(body)
	if err != nil {
		c.c.bad.Add(1)
		return IngestResult{}, fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	res := IngestResult{Batch: b.ID.String(), Metric: b.Metric, Epoch: c.epoch, Reports: len(b.Sealed)}
	// A batch of a tagged pool (report.PoolKey) holds reports of that
	// epoch only; an untagged one is opened under the current epoch, then
	// the earlier ones.
	pool, tag := report.SplitPoolKey(b.Metric)
	var epochs []*epochState
	if tag != "" {
		e, err := c.epochByID(ctx, tag)
		switch {
		case errors.Is(err, errUnknownEpoch):
			// Nothing in it can open here: every report is malformed.
			// Acknowledging it (once) keeps a shuffler from retrying a
			// batch no configuration change would deliver.
			return c.ingestUnopenable(ctx, b, pool, tag, res, err)
		case err != nil:
			return res, err
		}
		epochs, res.Epoch = []*epochState{e}, e.epoch
	} else {
		// The epochs that have the pool, current first.
		for _, e := range append([]*epochState{c.cur}, c.older...) {
			if _, _, ok := e.binding(pool); ok {
				epochs = append(epochs, e)
			}
		}
	}
	var ok bool
	if len(epochs) > 0 {
		_, _, ok = epochs[0].binding(pool)
	}
	switch {
	case !ok:
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: %q is not a pool of the plan (pools: %q)", ErrBatchRefused, pool, c.plan.Pools())
	case b.Suite != report.SuiteX25519ChaCha:
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: suite %d is not supported", ErrBatchRefused, b.Suite)
	case len(b.Sealed) < c.plan.NMin:
		c.c.refused.Add(1)
		return res, fmt.Errorf("%w: %d reports, fewer than n_min = %d", ErrBatchRefused, len(b.Sealed), c.plan.NMin)
	}
	if dup, err := c.st.hasBatch(ctx, b.ID); err != nil {
		return res, err
	} else if dup {
		c.c.duplicates.Add(1)
		res.Duplicate = true
		return res, nil
	}
	// Open every report under the current epoch's binding, and those
	// that do not open under the earlier epochs' in turn (apps that have
	// not fetched the current plan yet). Each epoch's reports count in
	// that epoch, with the guarantee of that epoch's plan at their own
	// number: the other reports of the batch are independent of them, so
	// leaving them out of the count is sound.
	rest := b.Sealed
	b.Sealed = nil
	var parts []metricBatch
	first := epochs[0]
	res.Epoch = first.epoch
	for _, e := range epochs {
		binding, reportBytes, ok := e.binding(pool)
		if !ok || (len(rest) == 0 && e != first) {
			continue
		}
		var plain [][]byte
		plain, rest = c.openAll(binding, reportBytes, rest)
		if len(plain) == 0 && e != first {
			continue
		}
		eParts, n, err := c.accumulate(ctx, e, pool, plain)
		if err != nil {
			return res, err
		}
		var counts []int64 // the batch's mix, with parallel travel
		if e.pool != nil && e.pool.travel == string(accountant.TravelParallel) {
			counts = make([]int64, len(e.plan.Metrics))
			for _, p := range eParts {
				counts[e.plan.MetricIndex(p.rec.metric)] = p.rec.n
			}
		}
		g, ok := c.guarantee(ctx, e, pool, n, counts)
		if !ok {
			if err := ctx.Err(); err != nil {
				// Not a missing guarantee: the sender is gone. Store nothing.
				return res, err
			}
		}
		for i := range eParts {
			r := &eParts[i].rec
			r.id, r.epoch, r.messages = b.ID, e.epoch, n
			if ok {
				r.eps, r.delta = &g.eps, &g.delta
			}
		}
		parts = append(parts, eParts...)
		res.N += n
		if e == first {
			if ok {
				res.Eps, res.Delta = &g.eps, &g.delta
			}
		} else {
			if res.Earlier == nil {
				res.Earlier = map[string]int64{}
			}
			res.Earlier[e.epoch] = n
		}
		if e.pool != nil {
			if res.Parts == nil {
				res.Parts = map[string]int64{}
			}
			for _, p := range eParts {
				res.Parts[p.rec.metric] += p.rec.n
			}
		}
	}
	res.Malformed = int64(res.Reports) - res.N
	if len(parts) == 0 || parts[0].rec.epoch != first.epoch {
		// No valid report in the batch's epoch: a row of the pool keeps
		// the batch from being ingested twice.
		parts = append([]metricBatch{{rec: batchRecord{id: b.ID, metric: pool, epoch: first.epoch, malformed: int64(res.Reports) - res.N}}}, parts...)
	}
	if first.pool == nil {
		// The metric's current row (and statistic) count as malformed
		// every report no epoch counted: unopenable, of the wrong length,
		// or refused by the plugin.
		elsewhere := int64(0)
		for _, p := range parts[1:] {
			elsewhere += p.rec.n + p.rec.malformed
		}
		cur := &parts[0]
		cur.rec.malformed = int64(res.Reports) - cur.rec.n - elsewhere
		if cur.stat != nil {
			cur.stat.Malformed = cur.rec.malformed
		}
	}
	dup, err := c.st.commitBatch(ctx, parts)
	if err != nil {
		return res, fmt.Errorf("collector: storing batch %s: %w", b.ID, err)
	}
	if dup {
		c.c.duplicates.Add(1)
		return IngestResult{Batch: res.Batch, Metric: res.Metric, Epoch: res.Epoch, Reports: res.Reports, Duplicate: true}, nil
	}
	c.c.batches.Add(1)
	c.c.reports.Add(res.N)
	c.c.malformed.Add(res.Malformed)
	c.log.Info("batch ingested", "batch", res.Batch, "metric", b.Metric, "n", res.N, "malformed", res.Malformed, "eps", fmtOptional(res.Eps), "earlier_epochs", len(res.Earlier))
	return res, nil
}

// ingestUnopenable records batch b, tagged with an epoch whose reports
// cannot open here (why), as all malformed, once.
func (c *Collector) ingestUnopenable(ctx context.Context, b report.Batch, pool, tag string, res IngestResult, why error) (IngestResult, error) {
	res.Epoch, res.Malformed = tag, int64(len(b.Sealed))
	rec := batchRecord{id: b.ID, metric: pool, epoch: tag, malformed: res.Malformed}
	dup, err := c.st.commitBatch(ctx, []metricBatch{{rec: rec}})
	if err != nil {
		return res, fmt.Errorf("collector: storing batch %s: %w", b.ID, err)
	}
	if dup {
		c.c.duplicates.Add(1)
		return IngestResult{Batch: res.Batch, Metric: res.Metric, Epoch: res.Epoch, Reports: res.Reports, Duplicate: true}, nil
	}
	c.c.batches.Add(1)
	c.c.malformed.Add(res.Malformed)
	c.log.Warn("batch of an epoch whose reports cannot open here: all counted malformed", "batch", res.Batch, "metric", b.Metric, "reports", len(b.Sealed), "why", why)
	return res, nil
}

// accumulate accumulates the opened reports of pool in epoch e: a
// metric's reports, or pooled messages. It returns the metrics' rows and
// statistics, and the number of valid reports or messages.
func (c *Collector) accumulate(ctx context.Context, e *epochState, pool string, plain [][]byte) ([]metricBatch, int64, error) {
	if e.pool != nil {
		return c.accumulatePool(ctx, e.pool, plain)
	}
	ms := e.metrics[pool]
	stat, err := ms.r.Accumulate(ctx, ms.m.Eps0, plain)
	if err != nil {
		return nil, 0, fmt.Errorf("collector: metric %q: accumulating: %w", ms.m.Name, err)
	}
	if err := checkAccumulated(stat, ms, len(plain)); err != nil {
		return nil, 0, err
	}
	return []metricBatch{{rec: batchRecord{metric: pool, n: stat.N, malformed: stat.Malformed}, stat: stat}}, stat.N, nil
}

// accumulatePool splits pooled messages into their parts and accumulates
// them per metric. It returns the metrics' contributions (those with at
// least one report) and the number of valid messages: those that decode,
// carry what the travel mode says, and none of whose parts a plugin
// dropped. (A message with a dropped part still went through the
// shuffle, so not counting it understates the batch: the guarantee can
// only come out weaker.)
func (c *Collector) accumulatePool(ctx context.Context, ps *poolState, plain [][]byte) ([]metricBatch, int64, error) {
	per := make([][][]byte, len(ps.metrics))
	valid := int64(0)
	for _, pt := range plain {
		msg, err := report.DecodeMessage(pt)
		if err != nil || !ps.valid(msg) {
			continue
		}
		valid++
		for _, p := range msg {
			per[p.Metric] = append(per[p.Metric], p.Report)
		}
	}
	var out []metricBatch
	for i, ms := range ps.metrics {
		if len(per[i]) == 0 {
			continue
		}
		stat, err := ms.r.Accumulate(ctx, ms.m.Eps0, per[i])
		if err != nil {
			return nil, 0, fmt.Errorf("collector: metric %q: accumulating: %w", ms.m.Name, err)
		}
		if err := checkAccumulated(stat, ms, len(per[i])); err != nil {
			return nil, 0, err
		}
		valid -= stat.Malformed
		out = append(out, metricBatch{rec: batchRecord{metric: ms.m.Name, n: stat.N, malformed: stat.Malformed}, stat: stat})
	}
	return out, max(valid, 0), nil
}

// valid reports whether a decoded message carries what the pool's travel
// mode says: every metric once, in plan order (joint), or exactly one
// metric (parallel), each part of its plugin's report length.
func (ps *poolState) valid(msg []report.Part) bool {
	switch accountant.Travel(ps.travel) {
	case accountant.TravelJoint:
		if len(msg) != len(ps.metrics) {
			return false
		}
		for i, p := range msg {
			if p.Metric != i {
				return false
			}
		}
	case accountant.TravelParallel:
		if len(msg) != 1 || msg[0].Metric >= len(ps.metrics) {
			return false
		}
	default:
		return false
	}
	for _, p := range msg {
		if rb := ps.metrics[p.Metric].desc.ReportBytes; rb > 0 && len(p.Report) != rb {
			return false
		}
	}
	return true
}

func fmtOptional(v *float64) any {
	if v == nil {
		return "unknown"
	}
	return *v
}

// checkAccumulated checks a plugin's statistic for a batch of n reports:
// it must be of the metric's plugin, configuration and eps0 and count each
// report once. A plugin that lies is an error, not data.
func checkAccumulated(s *sdk.Statistic, ms *metricState, n int) error {
	ref := &sdk.Statistic{Plugin: ms.desc.Name, Digest: ms.desc.Digest, Eps0: ms.m.Eps0}
	if s == nil {
		return fmt.Errorf("collector: metric %q: plugin returned no statistic", ms.m.Name)
	}
	ref.Counts = make([]int64, len(s.Counts))
	if err := ref.Compatible(s); err != nil {
		return fmt.Errorf("collector: metric %q: plugin statistic: %w", ms.m.Name, err)
	}
	if s.N < 0 || s.Malformed < 0 || s.N+s.Malformed != int64(n) {
		return fmt.Errorf("collector: metric %q: plugin counted N = %d and Malformed = %d for %d reports", ms.m.Name, s.N, s.Malformed, n)
	}
	return nil
}

// openAll opens the sealed reports of a batch with binding, in parallel.
// It returns the plaintexts of those that open and, when reportBytes > 0,
// have that length, and the sealed reports that do not open. Those that
// open with a wrong length are in neither.
func (c *Collector) openAll(binding report.Binding, reportBytes int, sealed [][]byte) (plain, unopened [][]byte) {
	out := make([][]byte, len(sealed))
	failed := make([]bool, len(sealed))
	workers := max(1, min(c.o.Workers, len(sealed)/64))
	var wg sync.WaitGroup
	chunk := (len(sealed) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min(len(sealed), (w+1)*chunk)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				pt, err := report.Open(c.key, binding, sealed[i])
				switch {
				case err != nil:
					failed[i] = true
				case reportBytes > 0 && len(pt) != reportBytes:
				default:
					out[i] = pt
				}
			}
		})
	}
	wg.Wait()
	plain = out[:0]
	for i, pt := range out {
		if pt != nil {
			plain = append(plain, pt)
		} else if failed[i] {
			unopened = append(unopened, sealed[i])
		}
	}
	return plain, unopened
}

// guarantee returns the central (eps, delta) of a batch of n valid
// reports of pool (a metric, with separate travel) under epoch e's plan,
// from the accountant, cached by n. With parallel travel counts is the
// batch's mix (valid messages per metric), and the guarantee is the weaker
// of the plan's weights and that mix (plan.ParallelMechanism): a batch
// skewed toward some metrics gives the others less cover.
func (c *Collector) guarantee(ctx context.Context, e *epochState, pool string, n int64, counts []int64) (epsValue, bool) {
	if n < 1 {
		return epsValue{}, false
	}
	k := epsKey{epoch: e.epoch, pool: pool, n: n}
	if counts != nil {
		k.mix = fmt.Sprint(counts)
	}
	c.epsMu.Lock()
	if v, ok := c.epsCache[k]; ok {
		c.epsMu.Unlock()
		return v, true
	}
	if call := c.epsInFlight[k]; call != nil {
		c.epsMu.Unlock()
		select {
		case <-call.done:
			if call.ok {
				return call.v, true
			}
			// The other computation failed, perhaps for its own
			// context: try once more with ours.
			return c.computeGuarantee(ctx, e, pool, n, counts)
		case <-ctx.Done():
			return epsValue{}, false
		}
	}
	call := &epsCall{done: make(chan struct{})}
	c.epsInFlight[k] = call
	c.epsMu.Unlock()

	call.v, call.ok = c.computeGuarantee(ctx, e, pool, n, counts)
	c.epsMu.Lock()
	// A parallel batch's mix rarely repeats: only sizes are kept, so the
	// cache stays as small as the set of batch sizes.
	if call.ok && counts == nil {
		c.epsCache[k] = call.v
	}
	delete(c.epsInFlight, k)
	c.epsMu.Unlock()
	close(call.done)
	return call.v, call.ok
}

func (c *Collector) computeGuarantee(ctx context.Context, e *epochState, pool string, n int64, counts []int64) (epsValue, bool) {
	mech, eps0, delta, err := e.plan.BatchMechanism(ctx, c.o.Open, pool)
	if err != nil {
		c.log.Error("batch guarantee", "pool", pool, "error", err)
		return epsValue{}, false
	}
	mechs := []accountant.Mechanism{mech}
	if counts != nil {
		// Parallel travel: the plan's weights and the batch's own mix,
		// whichever gives the weaker guarantee (see plan.ParallelMechanism).
		mix, _, err := e.plan.ParallelMechanism(ctx, c.o.Open, counts)
		if err != nil {
			c.log.Error("batch guarantee", "pool", pool, "error", err)
			return epsValue{}, false
		}
		mechs = append(mechs, mix)
	}
	var worst float64
	for _, m := range mechs {
		r, err := c.o.Epsilon(m, eps0, int(n), delta)
		if err != nil || math.IsNaN(r.Upper) || math.IsInf(r.Upper, 0) {
			c.log.Error("batch guarantee", "pool", pool, "n", n, "error", err, "eps", r.Upper)
			return epsValue{}, false
		}
		worst = math.Max(worst, r.Upper)
	}
	return epsValue{eps: worst, delta: delta}, true
}

// epochPlan returns the published plan of epoch.
func (c *Collector) epochPlan(ctx context.Context, epoch string) (*plan.Plan, error) {
	c.plansMu.Lock()
	p := c.plans[epoch]
	c.plansMu.Unlock()
	if p != nil {
		return p, nil
	}
	b, err := c.st.epochPlan(ctx, epoch)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("collector: no plan stored for epoch %s", epoch)
	}
	if p, err = plan.Parse(b); err != nil {
		return nil, fmt.Errorf("collector: stored plan of epoch %s: %w", epoch, err)
	}
	c.plansMu.Lock()
	c.plans[epoch] = p
	c.plansMu.Unlock()
	return p, nil
}

// IngestStats are the collector's ingest counters since it was opened.
type IngestStats struct {
	// Batches counts batches ingested; Duplicates, batches acknowledged
	// again without counting; Bad, bodies that did not decode; Refused,
	// well-formed batches refused.
	Batches    int64 `json:"batches"`
	Duplicates int64 `json:"duplicates"`
	Bad        int64 `json:"bad"`
	Refused    int64 `json:"refused"`
	// Reports and Malformed count valid and dropped reports.
	Reports   int64 `json:"reports"`
	Malformed int64 `json:"malformed"`
}

// Stats returns the collector's ingest counters.
func (c *Collector) Stats() IngestStats {
	return IngestStats{
		Batches: c.c.batches.Load(), Duplicates: c.c.duplicates.Load(), Bad: c.c.bad.Load(),
		Refused: c.c.refused.Load(), Reports: c.c.reports.Load(), Malformed: c.c.malformed.Load(),
	}
}

// MetricList is the JSON body of GET /v1/metrics.
type MetricList struct {
	// Epoch is the current plan epoch.
	Epoch string `json:"epoch"`
	// Metrics are the plan's metrics and any other metric with stored
	// data, by name.
	Metrics []MetricSummary `json:"metrics"`
	// Ingest are the ingest counters since the collector started.
	Ingest IngestStats `json:"ingest"`
}

// MetricSummary is one metric in GET /v1/metrics.
type MetricSummary struct {
	// Name and Plugin identify the metric.
	Name   string `json:"name"`
	Plugin string `json:"plugin"`
	// InPlan reports whether the metric is in the current plan.
	InPlan bool `json:"in_plan"`
	// Epochs are the epochs with data, oldest first.
	Epochs []string `json:"epochs"`
	// N and Malformed are the valid and dropped reports over all epochs.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	// Batches is the number of batches over all epochs.
	Batches int64 `json:"batches"`
}

func (c *Collector) handleMetrics(w http.ResponseWriter, r *http.Request) {
	rows, err := c.st.statistics(r.Context(), "")
	if err != nil {
		c.log.Error("listing metrics", "error", err)
		writeError(w, http.StatusInternalServerError, "listing metrics failed")
		return
	}
	byName := map[string]*MetricSummary{}
	for _, m := range c.plan.Metrics {
		byName[m.Name] = &MetricSummary{Name: m.Name, Plugin: m.Plugin, InPlan: true, Epochs: []string{}}
	}
	for _, row := range rows {
		s := byName[row.metric]
		if s == nil {
			s = &MetricSummary{Name: row.metric, Plugin: row.stat.Plugin, Epochs: []string{}}
			byName[row.metric] = s
		}
		s.Epochs = append(s.Epochs, row.epoch)
		s.N += row.stat.N
		s.Malformed += row.stat.Malformed
		s.Batches += row.batches
	}
	out := MetricList{Epoch: c.epoch, Metrics: []MetricSummary{}, Ingest: c.Stats()}
	for _, s := range byName {
		out.Metrics = append(out.Metrics, *s)
	}
	sort.Slice(out.Metrics, func(i, j int) bool { return out.Metrics[i].Name < out.Metrics[j].Name })
	writeJSON(w, http.StatusOK, out)
}

// MetricDetail is the JSON body of GET /v1/metrics/{name}.
type MetricDetail struct {
	// Name is the metric.
	Name string `json:"name"`
	// InPlan reports whether the metric is in the current plan.
	InPlan bool `json:"in_plan"`
	// Epochs are the estimates of each epoch with data, oldest first.
	Epochs []EpochEstimate `json:"epochs"`
}

// EpochEstimate is a metric's estimate from the batches of one epoch.
type EpochEstimate struct {
	// Epoch is the plan epoch; Current reports whether it is the current
	// one.
	Epoch   string `json:"epoch"`
	Current bool   `json:"current"`
	// Plugin, Version and Eps0 are the metric's randomizer in that epoch.
	Plugin  string  `json:"plugin"`
	Version string  `json:"version"`
	Eps0    float64 `json:"eps0"`
	// N and Malformed count valid and dropped reports; Batches the batches.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	Batches   int64 `json:"batches"`
	// Confidence is the nominal coverage of the intervals.
	Confidence float64 `json:"confidence,omitempty"`
	// Estimates are the plugin's estimates: one per category, or sum and
	// mean. Null when no estimate can be made (EstimateError says why).
	Estimates     []ItemEstimate `json:"estimates"`
	EstimateError string         `json:"estimate_error,omitempty"`
	// Guarantee is the weakest central guarantee among the batches: that
	// of the batch with the largest eps (the smallest one). Null when a
	// batch with valid reports has no known guarantee.
	Guarantee *BatchGuarantee `json:"guarantee"`
	// BatchList lists every batch, oldest first.
	BatchList []BatchInfo `json:"batch_list"`
}

// ItemEstimate is one estimated quantity.
type ItemEstimate struct {
	// Label is the category, "sum" or "mean".
	Label string `json:"label"`
	// Value is the unbiased estimate, Variance its estimated variance, and
	// [Lo, Hi] the confidence interval.
	Value    float64 `json:"value"`
	Variance float64 `json:"variance"`
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
	// Post is the post-processed (feasible, biased) estimate and
	// [PostLo, PostHi] an interval around it.
	Post   float64 `json:"post"`
	PostLo float64 `json:"post_lo"`
	PostHi float64 `json:"post_hi"`
}

// BatchGuarantee is the central guarantee of one batch.
type BatchGuarantee struct {
	// Eps and Delta: the batch's reports are (Eps, Delta)-DP.
	Eps   float64 `json:"eps"`
	Delta float64 `json:"delta"`
	// N is the batch's number of valid reports of the metric.
	N int64 `json:"n"`
	// Messages is the number of shuffled messages the guarantee is
	// computed for: N with separate travel; with joint or parallel travel
	// the valid messages of the batch, which carry every metric (joint) or
	// one each (parallel).
	Messages int64 `json:"messages"`
	// Batch is the batch id.
	Batch string `json:"batch"`
}

// BatchInfo is one ingested batch.
type BatchInfo struct {
	// ID is the batch id (hex).
	ID string `json:"id"`
	// N and Malformed count the metric's valid and dropped reports.
	N         int64 `json:"n"`
	Malformed int64 `json:"malformed"`
	// Messages is the number of shuffled messages its guarantee is for
	// (see BatchGuarantee).
	Messages int64 `json:"messages"`
	// Eps and Delta are its central guarantee; null when unknown.
	Eps   *float64 `json:"eps"`
	Delta *float64 `json:"delta"`
}

func (c *Collector) handleMetric(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" {
		writeError(w, http.StatusNotFound, "no metric name")
		return
	}
	ctx := r.Context()
	rows, err := c.st.statistics(ctx, name)
	if err != nil {
		c.log.Error("reading statistics", "metric", name, "error", err)
		writeError(w, http.StatusInternalServerError, "reading statistics failed")
		return
	}
	inPlan := c.plan.Metric(name) != nil
	if len(rows) == 0 && !inPlan {
		writeError(w, http.StatusNotFound, "no metric %q", name)
		return
	}
	out := MetricDetail{Name: name, InPlan: inPlan, Epochs: []EpochEstimate{}}
	for _, row := range rows {
		e, err := c.epochEstimate(ctx, row)
		if err != nil {
			c.log.Error("estimating", "metric", name, "epoch", row.epoch, "error", err)
			writeError(w, http.StatusInternalServerError, "estimating %s failed", name)
			return
		}
		out.Epochs = append(out.Epochs, e)
	}
	writeJSON(w, http.StatusOK, out)
}

// epochEstimate estimates one metric in one epoch from its statistic.
func (c *Collector) epochEstimate(ctx context.Context, row statRow) (EpochEstimate, error) {
	e := EpochEstimate{
		Epoch: row.epoch, Current: row.epoch == c.epoch, Plugin: row.stat.Plugin, Eps0: row.stat.Eps0,
		N: row.stat.N, Malformed: row.stat.Malformed, Batches: row.batches, BatchList: []BatchInfo{},
	}
	p, err := c.epochPlan(ctx, row.epoch)
	if err != nil {
		return e, err
	}
	m := p.Metric(row.metric)
	if m == nil {
		return e, fmt.Errorf("collector: metric %q is not in the plan of epoch %s", row.metric, row.epoch)
	}
	e.Version = m.Version
	r, err := c.o.Open(ctx, m.Plugin, m.Config())
	if err != nil {
		return e, err
	}
	est, err := r.Estimate(ctx, row.stat)
	switch {
	case errors.Is(err, sdk.ErrBadStatistic):
		e.EstimateError = err.Error()
	case err != nil:
		return e, err
	default:
		e.Confidence = est.Confidence
		e.Estimates = make([]ItemEstimate, len(est.Items))
		for i, it := range est.Items {
			e.Estimates[i] = ItemEstimate{it.Label, it.Value, it.Variance, it.Lo, it.Hi, it.Post, it.PostLo, it.PostHi}
		}
	}
	batches, err := c.st.batchList(ctx, row.metric, row.epoch)
	if err != nil {
		return e, err
	}
	unknown := false
	for _, b := range batches {
		e.BatchList = append(e.BatchList, BatchInfo{ID: hex.EncodeToString(b.id[:]), N: b.n, Malformed: b.malformed, Messages: b.messages, Eps: b.eps, Delta: b.delta})
		switch {
		case b.eps == nil || b.delta == nil:
			// A batch with valid reports and no guarantee makes the
			// weakest one unknown: no smaller eps is claimed.
			unknown = unknown || b.n > 0
		case e.Guarantee == nil || *b.eps > e.Guarantee.Eps:
			e.Guarantee = &BatchGuarantee{Eps: *b.eps, Delta: *b.delta, N: b.n, Messages: b.messages, Batch: hex.EncodeToString(b.id[:])}
		}
	}
	if unknown {
		e.Guarantee = nil
	}
	return e, nil
}
