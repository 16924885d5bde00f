package collector

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Shuffler defaults.
const (
	// DefaultMaxBodyBytes bounds an upload body.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultMaxEnvelopes bounds the envelopes of one upload.
	DefaultMaxEnvelopes = 10000
	// DefaultConnRate is the envelopes per second one connection may
	// upload, sustained.
	DefaultConnRate = 10000
	// DefaultMaxBatch bounds the reports of one released batch.
	DefaultMaxBatch = 1 << 20
	// DefaultDedupWindow is how many of the most recent report ids the
	// shuffler remembers at least, to drop retried uploads.
	DefaultDedupWindow = 1 << 22
	// DefaultMaxEpochsPerPool is the default of
	// ShufflerOptions.MaxEpochsPerPool.
	DefaultMaxEpochsPerPool = 8
	// DefaultReleaseInterval is how often pools are checked.
	DefaultReleaseInterval = time.Second
)

// MinSealedLen is the shortest sealed report that can open: the X25519
// encapsulated key (32 bytes) and the ChaCha20-Poly1305 tag (16 bytes).
const MinSealedLen = report.SealOverhead

// dedupGenerations is the number of full generations of ids kept besides
// the current one; a generation holds DedupWindow/dedupGenerations ids.
const dedupGenerations = 4

// groupMaxEnvelopes bounds the envelopes committed in one transaction.
const groupMaxEnvelopes = 100000

// ShufflerOptions configures a Shuffler.
type ShufflerOptions struct {
	// Plan gives the metrics the shuffler accepts and NMin, the smallest
	// batch it releases. It need not be calibrated. Required.
	Plan *plan.Plan
	// MaxEpochsPerPool bounds the plan epochs pooled apart at once for one
	// pool (report.PoolKey tags): an envelope of yet another epoch is
	// rejected until one of them is released. It bounds what a client can
	// make the shuffler hold with made-up epoch tags, each a pool that may
	// never reach n_min. Defaults to DefaultMaxEpochsPerPool.
	MaxEpochsPerPool int
	// EarlierPools are pools of earlier plans, besides Plan's, whose late
	// reports the shuffler still takes (Collector.EarlierPools gives those
	// of the plans a collector published), so that apps that have not yet
	// fetched a plan with another travel mode or without some metric do
	// not have their reports refused. Defaults to none.
	EarlierPools []string
	// Dir is the data directory; the pool lives in Dir/shuffler.db.
	// Required.
	Dir string
	// Collector is the collector's base URL; batches go to
	// Collector + "/v1/batches". Required.
	Collector string
	// Token is the bearer token presented to the collector. Defaults to
	// none.
	Token string
	// Logger receives the shuffler's logs; it never gets a client address,
	// header or arrival time. Defaults to discarding them.
	Logger *slog.Logger
	// ReleaseInterval is how often pools are checked for release. Defaults
	// to DefaultReleaseInterval.
	ReleaseInterval time.Duration
	// MaxBodyBytes bounds an upload body; larger bodies get 413. Defaults
	// to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxEnvelopes bounds the envelopes of one upload; more get 413.
	// Defaults to DefaultMaxEnvelopes.
	MaxEnvelopes int
	// ConnRate is the sustained envelopes per second one connection may
	// upload (with ConnContext installed); a faster connection gets 429
	// with Retry-After. Negative means no limit. Defaults to
	// DefaultConnRate.
	ConnRate float64
	// ConnBurst is the envelopes a connection may upload at once. Defaults
	// to the larger of MaxEnvelopes and ConnRate; raised to MaxEnvelopes if
	// below it, so that every admissible upload can pass.
	ConnBurst int
	// MaxBatch bounds the reports of one released batch. Must be >= NMin.
	// Defaults to the larger of DefaultMaxBatch and NMin.
	MaxBatch int
	// DedupWindow is how many of the most recent accepted report ids are
	// remembered at least (at most 25% more): an upload retried after more
	// than this many other reports may be counted twice. Defaults to
	// DefaultDedupWindow (about 50 bytes of SQLite per id: 260 MB at the
	// fullest with the default).
	DedupWindow int
	// Rand is the randomness of shuffles and batch ids; it is used by one
	// goroutine at a time. Defaults to crypto/rand (ldp.CryptoSource).
	Rand ldp.Source
	// Client sends batches to the collector. Defaults to a client without
	// overall timeout (ForwardTimeout bounds each attempt).
	Client *http.Client
	// ForwardTimeout bounds one attempt to deliver a batch. Defaults to
	// 10 minutes (opening a million reports takes the collector a while).
	ForwardTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff between delivery
	// attempts of one batch. Default to 200 ms and 1 minute.
	RetryMin, RetryMax time.Duration
}

// ShufflerStats are a shuffler's counters since it was opened.
type ShufflerStats struct {
	// Requests counts uploads answered 202.
	Requests int64 `json:"requests"`
	// Accepted, Duplicates and Rejected count envelopes of those uploads.
	Accepted   int64 `json:"accepted"`
	Duplicates int64 `json:"duplicates"`
	Rejected   int64 `json:"rejected"`
	// BadRequests counts uploads that did not decode (400, 415).
	BadRequests int64 `json:"bad_requests"`
	// TooLarge counts uploads over a size limit (413).
	TooLarge int64 `json:"too_large"`
	// RateLimited counts uploads refused with 429.
	RateLimited int64 `json:"rate_limited"`
	// BatchesReleased and ReportsReleased count released batches.
	BatchesReleased int64 `json:"batches_released"`
	ReportsReleased int64 `json:"reports_released"`
	// BatchesForwarded counts batches the collector acknowledged.
	BatchesForwarded int64 `json:"batches_forwarded"`
	// ForwardFailures counts failed delivery attempts.
	ForwardFailures int64 `json:"forward_failures"`
	// Pools is the number of pooled reports per metric.
	Pools map[string]int64 `json:"pools"`
	// Outgoing is the number of released batches not yet acknowledged.
	Outgoing int64 `json:"outgoing"`
}

type shufflerCounters struct {
	requests, accepted, duplicates, rejected atomic.Int64
	badRequests, tooLarge, rateLimited       atomic.Int64
	batchesReleased, reportsReleased         atomic.Int64
	batchesForwarded, forwardFailures        atomic.Int64
}

// Shuffler is the shuffler role: it takes sealed reports from apps (POST
// /v1/reports), keeps nothing about their senders, pools them in SQLite,
// and releases batches of at least NMin reports of one pool in
// a uniformly random order to the collector, retrying until acknowledged.
//
// It never holds a client's address, headers or arrival time: the pool
// rows are (row number, metric, suite, sealed bytes), and released batches
// carry only sealed bytes. Report ids are kept, keyed-hashed, only to drop
// duplicates.
//
// Pools are the plan's (plan.Plan.Pools): one per metric with separate
// travel, and one for the whole plan with joint or parallel travel, whose
// messages carry the metrics inside the sealed bytes. A batch thus holds
// what the accountant's mechanism for that travel mode assumes.
//
// Release policy: when a metric's pool holds at least NMin reports, all of
// them (up to MaxBatch per batch, and never a batch below NMin) go out as
// one batch. Releasing everything rather than exactly NMin makes batches
// larger, which only strengthens the central guarantee, and keeps no report
// waiting behind a full batch.
type Shuffler struct {
	o   ShufflerOptions
	log *slog.Logger
	// pools is the set of pools the shuffler takes (copied on write by
	// AddPools).
	pools   atomic.Pointer[map[string]bool]
	poolsMu sync.Mutex // serializes AddPools

	// epochsMu guards epochs: per pool, the epoch tags with reports
	// pooled (or admitted since Release last looked), for
	// MaxEpochsPerPool.
	epochsMu sync.Mutex
	epochs   map[string]map[string]bool
	db       *database
	salt     []byte
	genSize  int64

	reqs      chan *acceptReq
	closed    chan struct{}
	closeOnce sync.Once
	committer sync.WaitGroup
	kick      chan struct{}
	running   atomic.Bool
	runMu     sync.Mutex // guards isClosed and runs.Add
	isClosed  bool
	runs      sync.WaitGroup

	// poolDirty is set when reports were pooled since Release last looked:
	// Release skips the pool query otherwise.
	poolDirty atomic.Bool

	// gen and genCount are the current dedup generation and its size; the
	// committer goroutine owns them.
	gen, genCount int64

	c shufflerCounters
}

var shufflerSchema = []string{
	`CREATE TABLE IF NOT EXISTS meta (
		key TEXT PRIMARY KEY,
		value BLOB NOT NULL
	) WITHOUT ROWID`,
	// pool holds accepted reports until release. id is a row number
	// (never sent anywhere); there is no time column.
	`CREATE TABLE IF NOT EXISTS pool (
		id INTEGER PRIMARY KEY,
		metric TEXT NOT NULL,
		suite INTEGER NOT NULL,
		sealed BLOB NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS pool_metric ON pool (metric, suite, id)`,
	// seen holds HMAC-SHA256(salt, report id)[:16] of recently accepted
	// reports, by dedup generation.
	`CREATE TABLE IF NOT EXISTS seen (
		h BLOB PRIMARY KEY,
		gen INTEGER NOT NULL
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS seen_gen ON seen (gen)`,
	// pools holds the pools learned after start (AddPools: the pools of
	// plans the shuffler relayed), so that a restart keeps taking them.
	`CREATE TABLE IF NOT EXISTS pools (
		name TEXT PRIMARY KEY
	) WITHOUT ROWID`,
	// outgoing holds released batches (report.EncodeBatch bytes) until the
	// collector acknowledges them.
	`CREATE TABLE IF NOT EXISTS outgoing (
		id BLOB PRIMARY KEY,
		metric TEXT NOT NULL,
		n INTEGER NOT NULL,
		body BLOB NOT NULL
	)`,
}

// OpenShuffler opens (creating) the shuffler's database in o.Dir and starts
// its commit goroutine. Call Run to release and forward batches, Handler or
// Register to serve uploads, and Close when done.
func OpenShuffler(ctx context.Context, o ShufflerOptions) (*Shuffler, error) {
	if o.Plan == nil {
		return nil, fmt.Errorf("%w: Plan is required", ErrOptions)
	}
	if err := o.Plan.Validate(); err != nil {
		return nil, err
	}
	if o.Collector == "" {
		return nil, fmt.Errorf("%w: Collector URL is required", ErrOptions)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReleaseInterval <= 0 {
		o.ReleaseInterval = DefaultReleaseInterval
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxEnvelopes <= 0 {
		o.MaxEnvelopes = DefaultMaxEnvelopes
	}
	if o.ConnRate == 0 {
		o.ConnRate = DefaultConnRate
	}
	if math.IsNaN(o.ConnRate) || math.IsInf(o.ConnRate, 0) {
		return nil, fmt.Errorf("%w: ConnRate = %v, must be finite", ErrOptions, o.ConnRate)
	}
	if o.ConnBurst <= 0 {
		o.ConnBurst = max(o.MaxEnvelopes, int(min(o.ConnRate, 1<<30)))
	}
	o.ConnBurst = max(o.ConnBurst, o.MaxEnvelopes)
	if o.MaxBatch == 0 {
		o.MaxBatch = max(DefaultMaxBatch, o.Plan.NMin)
	}
	if o.MaxBatch < o.Plan.NMin || o.MaxBatch > report.MaxBatchReports {
		return nil, fmt.Errorf("%w: MaxBatch = %d, must be in [n_min = %d, %d]", ErrOptions, o.MaxBatch, o.Plan.NMin, report.MaxBatchReports)
	}
	if o.MaxEpochsPerPool <= 0 {
		o.MaxEpochsPerPool = DefaultMaxEpochsPerPool
	}
	if o.DedupWindow <= 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = 10 * time.Minute
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 200 * time.Millisecond
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(time.Minute, o.RetryMin)
	}
	if err := EnsureDir(o.Dir); err != nil {
		return nil, err
	}
	// secure_delete overwrites deleted rows, so that released reports and
	// their pool order do not linger in free pages of the file.
	db, err := openDatabase(ctx, filepath.Join(o.Dir, ShufflerDB), shufflerSchema, "secure_delete(ON)")
	if err != nil {
		return nil, err
	}
	s := &Shuffler{
		o:       o,
		log:     o.Logger,
		db:      db,
		genSize: max(1, int64(o.DedupWindow)/dedupGenerations),
		reqs:    make(chan *acceptReq),
		closed:  make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	s.AddPools(append(o.Plan.Pools(), o.EarlierPools...))
	learned, err := s.storedPools(ctx)
	if err != nil {
		db.close()
		return nil, err
	}
	s.AddPools(learned)
	if err := s.loadMeta(ctx); err != nil {
		db.close()
		return nil, err
	}
	pools, err := s.poolSizes(ctx)
	if err != nil {
		db.close()
		return nil, err
	}
	s.trackEpochs(pools)
	for _, p := range pools {
		if !s.accepts(p.metric) {
			s.log.Warn("pooled reports of a metric not in the plan are kept, not released", "metric", p.metric, "reports", p.n)
		}
	}
	s.poolDirty.Store(true)
	s.committer.Add(1)
	go s.commitLoop()
	return s, nil
}

// accepts reports whether the shuffler pools envelopes of key: a pool of
// its plan (plan.Plan.Pools), tagged with a plan epoch (report.PoolKey:
// each epoch pools apart, so that a released batch holds at least n_min
// reports of one epoch) or untagged.
func (s *Shuffler) accepts(key string) bool {
	pool, epoch := report.SplitPoolKey(key)
	return (*s.pools.Load())[pool] && (epoch == "" || validEpoch(epoch))
}

// AddPools makes the shuffler take envelopes of pools too, for instance
// those of a new plan the collector published (PlanRelay.OnPlan), so that
// apps that fetched it are not refused. Pools are never removed: late
// reports of an earlier plan keep their pools.
func (s *Shuffler) AddPools(pools []string) {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	next := map[string]bool{}
	if cur := s.pools.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	added := 0
	for _, p := range pools {
		if !next[p] {
			next[p] = true
			added++
		}
	}
	if added > 0 || s.pools.Load() == nil {
		s.pools.Store(&next)
	}
	if s.db == nil || added == 0 {
		return
	}
	for _, p := range pools {
		// Best effort: a pool not stored is learned again at the next
		// relayed plan.
		if _, err := s.db.w.Exec(`INSERT OR IGNORE INTO pools (name) VALUES (?)`, p); err != nil {
			s.log.Warn("storing a learned pool", "pool", p, "error", err)
		}
	}
}

// storedPools returns the pools learned by earlier runs.
func (s *Shuffler) storedPools(ctx context.Context) ([]string, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT name FROM pools`)
	if err != nil {
		return nil, fmt.Errorf("collector: learned pools: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// trackEpochs resets the pooled epochs from the pool sizes.
func (s *Shuffler) trackEpochs(pools []poolSize) {
	m := map[string]map[string]bool{}
	for _, p := range pools {
		pool, epoch := report.SplitPoolKey(p.metric)
		if epoch == "" || p.n == 0 {
			continue
		}
		if m[pool] == nil {
			m[pool] = map[string]bool{}
		}
		m[pool][epoch] = true
	}
	s.epochsMu.Lock()
	s.epochs = m
	s.epochsMu.Unlock()
}

// admitEpoch reports whether an envelope of key may be pooled under
// MaxEpochsPerPool, counting its epoch as pooled when it is.
func (s *Shuffler) admitEpoch(key string) bool {
	pool, epoch := report.SplitPoolKey(key)
	if epoch == "" {
		return true
	}
	s.epochsMu.Lock()
	defer s.epochsMu.Unlock()
	set := s.epochs[pool]
	if set[epoch] {
		return true
	}
	if len(set) >= s.o.MaxEpochsPerPool {
		return false
	}
	if set == nil {
		set = map[string]bool{}
		s.epochs[pool] = set
	}
	set[epoch] = true
	return true
}

// validEpoch reports whether epoch is plan.EpochLen lowercase hex digits.
func validEpoch(epoch string) bool {
	if len(epoch) != plan.EpochLen {
		return false
	}
	for _, c := range epoch {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// loadMeta reads (creating) the dedup salt and generation.
func (s *Shuffler) loadMeta(ctx context.Context) error {
	salt := make([]byte, 32)
	rand.Read(salt)
	if _, err := s.db.w.ExecContext(ctx, `INSERT OR IGNORE INTO meta (key, value) VALUES ('salt', ?), ('gen', '0')`, salt); err != nil {
		return fmt.Errorf("collector: shuffler meta: %w", err)
	}
	var gen string
	if err := s.db.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'salt'`).Scan(&s.salt); err != nil {
		return fmt.Errorf("collector: shuffler meta: %w", err)
	}
	if err := s.db.w.QueryRowContext(ctx, `SELECT CAST(value AS TEXT) FROM meta WHERE key = 'gen'`).Scan(&gen); err != nil {
		return fmt.Errorf("collector: shuffler meta: %w", err)
	}
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil {
		return fmt.Errorf("collector: shuffler meta: generation %q: %w", gen, err)
	}
	s.gen = g
	return s.db.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM seen WHERE gen = ?`, g).Scan(&s.genCount)
}

// Close stops accepting uploads, stops Run, waits for the commit goroutine
// and closes the database. Close is idempotent.
func (s *Shuffler) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.runMu.Lock()
		s.isClosed = true
		close(s.closed)
		s.runMu.Unlock()
		s.runs.Wait()
		s.committer.Wait()
		err = s.db.close()
	})
	return err
}

// Register adds the shuffler's route, POST /v1/reports, to mux.
func (s *Shuffler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/reports", s.handleReports)
}

// UploadResult is the JSON body of a 202 answer to POST /v1/reports.
type UploadResult struct {
	// Accepted is the number of envelopes newly pooled.
	Accepted int `json:"accepted"`
	// Duplicates is the number of envelopes whose id was already accepted
	// (a retry after a lost acknowledgement): they are safely stored.
	Duplicates int `json:"duplicates"`
	// Rejected is the number of envelopes refused for good (unknown metric,
	// unsupported suite, too short); retrying them will not help.
	Rejected int `json:"rejected"`
	// Errors names the first few rejected envelopes and why.
	Errors []EnvelopeError `json:"errors,omitempty"`
}

// EnvelopeError says why one envelope of an upload was rejected.
type EnvelopeError struct {
	// Index is the envelope's position in the upload.
	Index int `json:"index"`
	// Error is the reason.
	Error string `json:"error"`
}

// maxEnvelopeErrors bounds UploadResult.Errors.
const maxEnvelopeErrors = 16

type acceptItem struct {
	metric string
	suite  uint16
	sealed []byte
	h      []byte
}

type acceptReq struct {
	items []acceptItem
	done  chan acceptRes
}

type acceptRes struct {
	accepted, duplicates int
	err                  error
}

// idHash returns the keyed hash under which a report id is remembered: the
// seen table then holds nothing that matches a client's outbox.
func (s *Shuffler) idHash(id report.ID) []byte {
	m := hmac.New(sha256.New, s.salt)
	m.Write(id[:])
	return m.Sum(nil)[:16]
}

// uploadReadTimeout bounds reading one upload body, far below the
// server's ReadTimeout (which large batches to the collector need).
const uploadReadTimeout = time.Minute

func (s *Shuffler) handleReports(w http.ResponseWriter, r *http.Request) {
	// Best effort: a ResponseWriter without deadlines keeps the server's.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadReadTimeout))
	body, status, err := readBody(w, r, s.o.MaxBodyBytes)
	if err != nil {
		if status == http.StatusRequestEntityTooLarge {
			s.c.tooLarge.Add(1)
		} else {
			s.c.badRequests.Add(1)
		}
		writeError(w, status, "%v", err)
		return
	}
	envs, err := report.DecodeEnvelopes(body)
	switch {
	case errors.Is(err, report.ErrTooLarge):
		s.c.tooLarge.Add(1)
		writeError(w, http.StatusRequestEntityTooLarge, "%v", err)
		return
	case err != nil:
		s.c.badRequests.Add(1)
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case len(envs) > s.o.MaxEnvelopes:
		s.c.tooLarge.Add(1)
		writeError(w, http.StatusRequestEntityTooLarge, "%d envelopes in one upload, limit %d", len(envs), s.o.MaxEnvelopes)
		return
	}
	if s.o.ConnRate > 0 {
		if b := connBucket(r.Context(), s.o.ConnRate, s.o.ConnBurst, time.Now); b != nil {
			if wait := b.take(len(envs)); wait > 0 {
				s.c.rateLimited.Add(1)
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				writeError(w, http.StatusTooManyRequests, "rate limit: %g envelopes per second per connection", s.o.ConnRate)
				return
			}
		}
	}
	var res UploadResult
	req := &acceptReq{items: make([]acceptItem, 0, len(envs)), done: make(chan acceptRes, 1)}
	reject := func(i int, format string, args ...any) {
		res.Rejected++
		if len(res.Errors) < maxEnvelopeErrors {
			res.Errors = append(res.Errors, EnvelopeError{Index: i, Error: fmt.Sprintf(format, args...)})
		}
	}
	for i, e := range envs {
		switch {
		case !s.accepts(e.Metric):
			reject(i, "unknown metric %q", e.Metric)
		case !s.admitEpoch(e.Metric):
			reject(i, "%q: already %d plan epochs pooled for this pool, the most the shuffler holds", e.Metric, s.o.MaxEpochsPerPool)
		case e.Suite != report.SuiteX25519ChaCha:
			reject(i, "unsupported suite %d", e.Suite)
		case len(e.Sealed) < MinSealedLen:
			reject(i, "sealed report of %d bytes, shorter than %d", len(e.Sealed), MinSealedLen)
		default:
			req.items = append(req.items, acceptItem{metric: e.Metric, suite: e.Suite, sealed: e.Sealed, h: s.idHash(e.ID)})
		}
	}
	if len(req.items) > 0 {
		select {
		case s.reqs <- req:
		case <-s.closed:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "shuffler is shutting down")
			return
		case <-r.Context().Done():
			return
		}
		// Once handed over, the commit may succeed even if we stop
		// waiting; the client's retry is then a duplicate.
		var ar acceptRes
		select {
		case ar = <-req.done:
		case <-r.Context().Done():
			return
		}
		if ar.err != nil {
			s.log.Error("storing reports", "error", ar.err)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "storing reports failed; retry")
			return
		}
		res.Accepted, res.Duplicates = ar.accepted, ar.duplicates
	}
	s.c.requests.Add(1)
	s.c.accepted.Add(int64(res.Accepted))
	s.c.duplicates.Add(int64(res.Duplicates))
	s.c.rejected.Add(int64(res.Rejected))
	writeJSON(w, http.StatusAccepted, res)
}

// commitLoop commits uploads in groups: every request waiting when a
// transaction starts joins it, so concurrent uploads share one fsync.
func (s *Shuffler) commitLoop() {
	defer s.committer.Done()
	for {
		var group []*acceptReq
		select {
		case r := <-s.reqs:
			group = append(group, r)
		case <-s.closed:
			return
		}
		n := len(group[0].items)
	gather:
		for n < groupMaxEnvelopes {
			select {
			case r := <-s.reqs:
				group = append(group, r)
				n += len(r.items)
			default:
				break gather
			}
		}
		results, err := s.commitGroup(group)
		for i, r := range group {
			if err != nil {
				r.done <- acceptRes{err: err}
			} else {
				r.done <- results[i]
			}
		}
	}
}

// commitGroup stores the reports of a group of uploads in one transaction:
// each id not seen before is remembered and its report pooled.
func (s *Shuffler) commitGroup(group []*acceptReq) ([]acceptRes, error) {
	ctx := context.Background()
	tx, err := s.db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	seen, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO seen (h, gen) VALUES (?, ?)`)
	if err != nil {
		return nil, err
	}
	defer seen.Close()
	pool, err := tx.PrepareContext(ctx, `INSERT INTO pool (metric, suite, sealed) VALUES (?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	gen, count := s.gen, s.genCount
	results := make([]acceptRes, len(group))
	for i, r := range group {
		for _, it := range r.items {
			res, err := seen.ExecContext(ctx, it.h, gen)
			if err != nil {
				return nil, err
			}
			if n, err := res.RowsAffected(); err != nil {
				return nil, err
			} else if n == 0 {
				results[i].duplicates++
				continue
			}
			if _, err := pool.ExecContext(ctx, it.metric, int64(it.suite), it.sealed); err != nil {
				return nil, err
			}
			results[i].accepted++
			count++
		}
	}
	if count >= s.genSize {
		gen, count = gen+1, 0
		if _, err := tx.ExecContext(ctx, `DELETE FROM seen WHERE gen <= ?`, gen-1-dedupGenerations); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'gen'`, strconv.FormatInt(gen, 10)); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	s.gen, s.genCount = gen, count
	s.poolDirty.Store(true)
	return results, nil
}

type poolSize struct {
	metric string
	suite  uint16
	n      int64
}

func (s *Shuffler) poolSizes(ctx context.Context) ([]poolSize, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT metric, suite, COUNT(*) FROM pool GROUP BY metric, suite ORDER BY metric, suite`)
	if err != nil {
		return nil, fmt.Errorf("collector: pool sizes: %w", err)
	}
	defer rows.Close()
	var out []poolSize
	for rows.Next() {
		var p poolSize
		var suite int64
		if err := rows.Scan(&p.metric, &suite, &p.n); err != nil {
			return nil, err
		}
		p.suite = uint16(suite)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Stats returns the shuffler's counters and the current pool sizes.
func (s *Shuffler) Stats(ctx context.Context) (ShufflerStats, error) {
	st := ShufflerStats{
		Requests:         s.c.requests.Load(),
		Accepted:         s.c.accepted.Load(),
		Duplicates:       s.c.duplicates.Load(),
		Rejected:         s.c.rejected.Load(),
		BadRequests:      s.c.badRequests.Load(),
		TooLarge:         s.c.tooLarge.Load(),
		RateLimited:      s.c.rateLimited.Load(),
		BatchesReleased:  s.c.batchesReleased.Load(),
		ReportsReleased:  s.c.reportsReleased.Load(),
		BatchesForwarded: s.c.batchesForwarded.Load(),
		ForwardFailures:  s.c.forwardFailures.Load(),
		Pools:            map[string]int64{},
	}
	pools, err := s.poolSizes(ctx)
	if err != nil {
		return st, err
	}
	for _, p := range pools {
		st.Pools[p.metric] += p.n
	}
	err = s.db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM outgoing`).Scan(&st.Outgoing)
	return st, err
}

// Release releases every pool of a metric in the plan that holds at least
// NMin reports, as batches of at most MaxBatch (each at least NMin), and
// returns the number of batches released. Run calls it every
// ReleaseInterval; it must not run concurrently with itself.
func (s *Shuffler) Release(ctx context.Context) (int, error) {
	if !s.poolDirty.Swap(false) {
		return 0, nil
	}
	pools, err := s.poolSizes(ctx)
	if err != nil {
		s.poolDirty.Store(true)
		return 0, err
	}
	// Epochs admitted after this query are lost from the count until the
	// next Release: the bound may be overshot briefly, never by much.
	s.trackEpochs(pools)
	released := 0
	for _, p := range pools {
		if !s.accepts(p.metric) {
			continue
		}
		left := p.n
		for left >= int64(s.o.Plan.NMin) {
			n, err := s.releaseOne(ctx, p.metric, p.suite)
			if err != nil {
				s.poolDirty.Store(true)
				return released, err
			}
			if n == 0 {
				break
			}
			released++
			left -= int64(n)
		}
		if left == 0 {
			// Emptied: its epoch no longer counts toward MaxEpochsPerPool.
			pool, epoch := report.SplitPoolKey(p.metric)
			s.epochsMu.Lock()
			delete(s.epochs[pool], epoch)
			s.epochsMu.Unlock()
		}
	}
	if released > 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return released, nil
}

// releaseOne moves up to MaxBatch pooled reports of one metric and suite,
// shuffled, into one outgoing batch, in one transaction. It releases
// nothing (and returns 0) when fewer than NMin are pooled.
func (s *Shuffler) releaseOne(ctx context.Context, metric string, suite uint16) (int, error) {
	tx, err := s.db.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id, sealed FROM pool WHERE metric = ? AND suite = ? ORDER BY id LIMIT ?`, metric, int64(suite), s.o.MaxBatch)
	if err != nil {
		return 0, err
	}
	var sealed [][]byte
	var last int64
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&last, &b); err != nil {
			rows.Close()
			return 0, err
		}
		sealed = append(sealed, b)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(sealed) < s.o.Plan.NMin {
		return 0, nil
	}
	src := ldp.DefaultSource(s.o.Rand)
	Shuffle(src, sealed)
	var id report.ID
	for i := 0; i < len(id); i += 8 {
		v := src.Uint64()
		for j := range 8 {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	body := report.EncodeBatch(report.Batch{ID: id, Metric: metric, Suite: suite, Sealed: sealed})
	if _, err := tx.ExecContext(ctx, `INSERT INTO outgoing (id, metric, n, body) VALUES (?, ?, ?, ?)`, id[:], metric, len(sealed), body); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM pool WHERE metric = ? AND suite = ? AND id <= ?`, metric, int64(suite), last); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	s.c.batchesReleased.Add(1)
	s.c.reportsReleased.Add(int64(len(sealed)))
	s.log.Info("batch released", "metric", metric, "batch", id.String(), "reports", len(sealed))
	return len(sealed), nil
}

// Run releases pools every ReleaseInterval and forwards released batches
// (those left from a previous run first) until ctx is done. It returns
// ctx's error, or ErrClosed after Close.
func (s *Shuffler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: Run called twice", ErrOptions)
	}
	defer s.running.Store(false)
	s.runMu.Lock()
	if s.isClosed {
		s.runMu.Unlock()
		return ErrClosed
	}
	s.runs.Add(1)
	s.runMu.Unlock()
	defer s.runs.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() { s.forwardLoop(ctx) })
	t := time.NewTicker(s.o.ReleaseInterval)
	defer t.Stop()
	for {
		if _, err := s.Release(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("releasing batches", "error", err)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			select {
			case <-s.closed:
				return ErrClosed
			default:
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}
