package shuffler

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// DBFile is the shuffler's SQLite database in its data directory.
const DBFile = "shuffler.db"

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
	// Options.MaxEpochsPerPool.
	DefaultMaxEpochsPerPool = 8
	// DefaultReleaseInterval is how often pools are checked.
	DefaultReleaseInterval = time.Second
)

// Options configures a Shuffler.
type Options struct {
	// Plan gives the metrics the shuffler accepts and NMin, the smallest
	// batch it releases. It need not be calibrated. Required.
	Plan *plan.Plan
	// MaxEpochsPerPool bounds the plan epochs pooled apart at once for one
	// pool (report.PeriodPoolKey tags): an envelope of yet another epoch is
	// rejected until one of them is released whole (its periods closed).
	// It bounds what a client can make the shuffler hold with made-up
	// epoch tags, each a pool that may never reach n_min. Defaults to
	// DefaultMaxEpochsPerPool.
	MaxEpochsPerPool int
	// EarlierPlans are earlier plans, besides Plan, whose pools and
	// period lengths the shuffler still takes late reports of
	// (Collector.EarlierPlans gives the plans a collector published), so
	// that apps that have not yet fetched a plan with another travel
	// mode, period or set of metrics do not have their reports refused.
	// Defaults to none.
	EarlierPlans []*plan.Plan
	// Dir is the data directory: the SQLite store is Dir/shuffler.db
	// unless Store names another. Required unless Store is a PostgreSQL
	// URL.
	Dir string
	// Store is where the shuffler keeps its pools, remembered ids and
	// outgoing batches: a PostgreSQL URL (postgres://… or
	// postgresql://…; its tables go in the schema blanket_shuffler),
	// which replicas of the shuffler share (package doc, Replicas), or
	// the path of a SQLite file, for one process. Defaults to
	// Dir/shuffler.db.
	Store string
	// Collector is the collector's base URL; batches go to
	// Collector + "/v1/batches". Required unless Collectors is set.
	Collector string
	// Collectors are more base URLs of the same collector (its replicas
	// on one shared store, or balancers in front of them), after
	// Collector: each batch goes to a ready one, in turn, failing over to
	// the next (collectors.go). Defaults to none.
	Collectors []string
	// ProbeInterval is how often, with several collector URLs, each
	// one's GET /readyz is asked. Defaults to DefaultProbeInterval.
	ProbeInterval time.Duration
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
	// upload (with httpserver.ConnContext installed); a faster connection gets 429
	// with Retry-After. Negative means no limit. Defaults to
	// DefaultConnRate.
	ConnRate float64
	// ConnBurst is the envelopes a connection may upload at once. Defaults
	// to the larger of MaxEnvelopes and ConnRate; raised to MaxEnvelopes if
	// below it, so that every admissible upload can pass.
	ConnBurst int
	// MaxBatch bounds the reports of one released batch. Must be at
	// least 2·NMin−1, so that any number of reports from NMin up splits
	// into batches of NMin to MaxBatch (release.go). Defaults to the
	// larger of DefaultMaxBatch and 2·NMin−1.
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
	// PeriodGrace is how long after a reporting period ends its pools
	// wait for late reports (apps seal a period's report once it has
	// closed: at their next start, Record or upload): until then a pool
	// keeps its last NMin reports, so that late ones always have company;
	// afterwards envelopes of that period are rejected (Stats.Late), each
	// of its pools is released whole, and a pool that received fewer than
	// NMin in all is deleted, never released (Stats.Expired). Replicas
	// with different graces close a period at the shortest. Defaults to
	// the largest grace of the plans it takes (plan.Plan.GraceLength of
	// Plan, EarlierPlans and every plan AddPlan adds, raised as they come),
	// which the SDK follows too: a report it seals within its plan's grace
	// is still taken. One grace serves every plan: a plan with a shorter
	// one has its periods' last n_min reports wait longer. After a restart
	// a plan known only through AddPlan counts again once added again (the
	// relay adds the collector's current plan at its first fetch).
	PeriodGrace time.Duration
	// Settle holds a pool of a period still open (releasable down to its
	// last NMin, and below MaxBatch) until no look found it larger for
	// Settle, and at most 3 Settle after it could first go, so that
	// reports arriving together go out in one larger batch (a stronger
	// guarantee per batch) while a steady trickle does not hold it to
	// its deadline. Growth is what Release finds in the store (reports
	// this replica or another pooled; duplicates and refused envelopes do
	// not count), kept in memory: after a restart every pool waits one
	// Settle. Negative releases as soon as a pool can. Defaults to
	// DefaultSettle of the pool's period: a tenth of it, between 1 s and
	// 1 h.
	Settle time.Duration
	// Now is the clock that ends periods. Defaults to time.Now. The
	// shuffler never records when a report arrived.
	Now func() time.Time
	// Admission, when set, makes the shuffler take only envelopes with an
	// admission token of their pool key not spent before (package
	// admission): it verifies each token with the issuer's seed
	// (issuer.LoadSeed, issuer.NewVerifier), refuses an envelope without
	// one (admission.UploadTokenMissing), with one that does not decode
	// or verify (UploadTokenInvalid), or with one another envelope spent
	// (UploadTokenSpent), and keeps the spent tokens in its store,
	// committed with the envelope, until their period's deadline. A
	// retried envelope (the same report id) is a duplicate, not a second
	// spend. Defaults to none: envelopes are taken without a token, and
	// anyone who can reach the upload port can add reports to a batch.
	Admission *issuer.Verifier
	// Open opens a metric's randomizer, to draw from its blanket for a
	// plan with a floor (floor.go). Required when a plan the shuffler
	// takes has one; unused otherwise.
	Open plan.Opener
	// Registerer receives the shuffler's Prometheus metrics
	// (blanket_shuffler_*: uploads, envelopes and batches by outcome, pool
	// sizes, upload latency; nothing about a sender). Defaults to none:
	// they are then not exported.
	Registerer prometheus.Registerer
}

// Stats are a shuffler's counters since it was opened.
type Stats struct {
	// Requests counts uploads answered 202.
	Requests int64 `json:"requests"`
	// Accepted and Duplicates count envelopes committed to a pool and
	// found there already, whether or not their uploader waited for the
	// answer; Rejected counts envelopes refused (of uploads answered 202,
	// and those the commit refused).
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
	// Late counts envelopes rejected because their period's grace had
	// passed or the period was closed (included in Rejected).
	Late int64 `json:"late"`
	// Expired counts reports deleted, never released: those of a pool
	// that received fewer than n_min reports in all by its period's
	// deadline (a pool that reached n_min is always released whole).
	Expired int64 `json:"expired"`
	// Pools is the number of pooled reports per metric.
	Pools map[string]int64 `json:"pools"`
	// Outgoing is the number of released batches not yet acknowledged.
	Outgoing int64 `json:"outgoing"`
}

type shufflerCounters struct {
	requests, accepted, duplicates           atomic.Int64
	badRequests, tooLarge, rateLimited       atomic.Int64
	unavailable, canceled                    atomic.Int64
	batchesReleased, reportsReleased         atomic.Int64
	draws, floorFailures                     atomic.Int64
	sends, batchesForwarded, forwardFailures atomic.Int64
	expired                                  atomic.Int64
	// rejectedBy counts rejected envelopes of answered uploads by reason.
	rejectedBy [numRejectReasons]atomic.Int64
}

// rejected returns the envelopes rejected for any reason.
func (c *shufflerCounters) rejected() int64 {
	var n int64
	for i := range c.rejectedBy {
		n += c.rejectedBy[i].Load()
	}
	return n
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
// Release policy (release.go has the proof): a pool of a period still
// open is released down to its last NMin reports, once it has settled
// (Settle), in equal batches of NMin to MaxBatch; at the period's deadline
// (or when ClosePeriods closes it) every report left goes out, or, when
// the pool received fewer than NMin in all, is deleted and counted. So
// every report acknowledged for a pool that reached NMin is released in a
// batch of at least NMin, whenever it arrived, on either store and across
// replicas.
type Shuffler struct {
	o   Options
	log *slog.Logger
	// col is the collector URLs batches go to (collectors.go).
	col *collectorSet
	m   *shufflerMetrics
	// pools is the set of pools the shuffler takes and lengths the
	// period lengths in seconds (both copied on write by AddPlan).
	pools   atomic.Pointer[map[string]bool]
	lengths atomic.Pointer[map[int64]bool]
	// forgotten is the table forgotten, by period length (replaced by the
	// commit goroutine after each deletion of ids).
	forgotten atomic.Pointer[map[int64]int64]
	poolsMu   sync.Mutex // serializes AddPlan

	// floorMu guards floorPlans, the published plans with a floor by
	// epoch (copied on write), and spareDraws, by pool key, the draws a
	// release made and did not use (floor.go).
	floorMu    sync.Mutex
	floorPlans map[string]*plan.Plan
	spareDraws map[string][][]byte

	// epochsMu guards epochs: per pool, the epoch tags with reports
	// pooled (or admitted since Release last looked), for
	// MaxEpochsPerPool.
	epochsMu sync.Mutex
	epochs   map[string]map[string]bool
	st       store
	salt     []byte

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
	// lastSweep is when (Options.Now, Unix ns) Release last looked at the
	// pools.
	lastSweep atomic.Int64

	// grace is the grace in seconds (Options.PeriodGrace, or the largest
	// of the known plans' when that is unset: graceFixed false, and
	// AddPlan raises it).
	grace      atomic.Int64
	graceFixed bool

	// grownMu guards growth: what Release saw of each pool, for Settle
	// (settled), and looked: whether it has looked at the pools since
	// open.
	grownMu sync.Mutex
	growth  map[string]*poolGrowth
	looked  bool
	opened  time.Time // Options.Now at open
	// closedMu guards closedPeriods: the periods this process closed
	// (store.closePeriod) and still holds reports of.
	closedMu      sync.Mutex
	closedPeriods map[report.Period]bool

	c shufflerCounters
}

// Open opens (creating) the shuffler's database in o.Dir and starts
// its commit goroutine. Call Run to release and forward batches, Handler or
// Register to serve uploads, and Close when done.
func Open(ctx context.Context, o Options) (*Shuffler, error) {
	if o.Plan == nil {
		return nil, fmt.Errorf("%w: Plan is required", ErrOptions)
	}
	if err := o.Plan.Validate(); err != nil {
		return nil, err
	}
	var urls []string
	for _, u := range append([]string{o.Collector}, o.Collectors...) {
		if u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: Collector URL is required", ErrOptions)
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultProbeInterval
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
		o.MaxBatch = max(DefaultMaxBatch, 2*o.Plan.NMin-1)
	}
	if o.MaxBatch < 2*o.Plan.NMin-1 || o.MaxBatch > report.MaxBatchReports {
		return nil, fmt.Errorf("%w: MaxBatch = %d, must be in [2·n_min−1 = %d, %d] (so that any pool of n_min or more splits into batches of n_min to MaxBatch)", ErrOptions, o.MaxBatch, 2*o.Plan.NMin-1, report.MaxBatchReports)
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
	col := newCollectorSet(urls, o.Client)
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = 10 * time.Minute
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 200 * time.Millisecond
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(time.Minute, o.RetryMin)
	}
	if o.PeriodGrace < 0 {
		return nil, fmt.Errorf("%w: PeriodGrace = %v, must be >= 0", ErrOptions, o.PeriodGrace)
	}
	graceFixed := o.PeriodGrace > 0
	if !graceFixed {
		for _, p := range append([]*plan.Plan{o.Plan}, o.EarlierPlans...) {
			o.PeriodGrace = max(o.PeriodGrace, p.GraceLength())
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	st, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	s := &Shuffler{
		o:      o,
		log:    o.Logger,
		st:     st,
		col:    col,
		reqs:   make(chan *acceptReq),
		closed: make(chan struct{}),
		kick:   make(chan struct{}, 1),
		growth: map[string]*poolGrowth{},
		opened: o.Now(),

		graceFixed: graceFixed,

		closedPeriods: map[report.Period]bool{},
	}
	s.grace.Store(int64(o.PeriodGrace / time.Second))
	fail := func(err error) (*Shuffler, error) {
		st.close()
		return nil, err
	}
	for _, p := range append([]*plan.Plan{o.Plan}, o.EarlierPlans...) {
		s.takePlan(p)
		if err := s.addFloorPlan(ctx, p); err != nil {
			return fail(err)
		}
	}
	learned, lengths, err := st.learned(ctx)
	if err != nil {
		return fail(err)
	}
	s.addPools(learned, lengths)
	if err := s.loadForgotten(ctx); err != nil {
		return fail(err)
	}
	if s.salt, err = st.salt(ctx); err != nil {
		return fail(err)
	}
	pools, err := st.poolSizes(ctx)
	if err != nil {
		return fail(err)
	}
	s.trackEpochs(pools)
	// The lengths of periods already pooled stay accepted, even one
	// whose storing failed (AddPlan stores what it learns best effort).
	var pooled []int64
	for _, p := range pools {
		if _, _, period, err := report.ParsePoolKey(p.metric); err == nil {
			pooled = append(pooled, period.Length)
		}
	}
	s.addPools(nil, pooled)
	for _, p := range pools {
		if err := s.known(p.metric); err != nil {
			s.log.Warn("pooled reports of a pool the shuffler does not take are kept, not released", "metric", p.metric, "reports", p.n, "why", err)
		}
	}
	s.m = newShufflerMetrics(s)
	if o.Registerer != nil {
		if err := o.Registerer.Register(s.m); err != nil {
			st.close()
			return nil, fmt.Errorf("shuffler: registering the shuffler's metrics: %w", err)
		}
	}
	s.poolDirty.Store(true)
	s.committer.Add(1)
	go s.commitLoop()
	return s, nil
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
		err = s.st.close()
	})
	return err
}

// Stats returns the shuffler's counters and the current pool sizes.
func (s *Shuffler) Stats(ctx context.Context) (Stats, error) {
	st := Stats{
		Requests:         s.c.requests.Load(),
		Accepted:         s.c.accepted.Load(),
		Duplicates:       s.c.duplicates.Load(),
		Rejected:         s.c.rejected(),
		BadRequests:      s.c.badRequests.Load(),
		TooLarge:         s.c.tooLarge.Load(),
		RateLimited:      s.c.rateLimited.Load(),
		BatchesReleased:  s.c.batchesReleased.Load(),
		ReportsReleased:  s.c.reportsReleased.Load(),
		BatchesForwarded: s.c.batchesForwarded.Load(),
		ForwardFailures:  s.c.forwardFailures.Load(),
		Late:             s.c.rejectedBy[rejectLate].Load(),
		Expired:          s.c.expired.Load(),
		Pools:            map[string]int64{},
	}
	pools, err := s.st.poolSizes(ctx)
	if err != nil {
		return st, err
	}
	for _, p := range pools {
		st.Pools[p.metric] += p.n
	}
	st.Outgoing, err = s.st.outgoingCount(ctx)
	return st, err
}

// openStore opens the store o names (Options.Store).
func openStore(ctx context.Context, o Options) (store, error) {
	if pgdb.IsURL(o.Store) {
		return openPGStore(ctx, o.Store)
	}
	path := o.Store
	if path == "" {
		if err := secrets.EnsureDir(o.Dir); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrOptions, err)
		}
		path = filepath.Join(o.Dir, DBFile)
	}
	return openSQLiteStore(ctx, path, max(1, int64(o.DedupWindow)/dedupGenerations), int64(o.PeriodGrace/time.Second), func() int64 { return o.Now().Unix() })
}
