package collector

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// DBFile is the collector's SQLite database in its data directory.
const DBFile = "collector.db"

// DefaultMaxBatchBytes bounds a batch body.
const DefaultMaxBatchBytes = 1 << 30

// EpochLen is the length of an epoch id: hex digits of the published
// plan's digest (plan.Plan.Epoch).
const EpochLen = plan.EpochLen

// CollectorOptions configures a Collector.
type CollectorOptions struct {
	// Plan is the privacy plan. When it is not calibrated, OpenCollector
	// calibrates it, unless an earlier run (or another replica) on the
	// same store already published a calibration of the same plan, which
	// is reused (plan calibration is not bit-for-bit reproducible, and
	// statistics of different calibrations never merge). Required.
	Plan *plan.Plan
	// Dir is the data directory: with the SQLite store, the plan-signing
	// key file (PlanKeyFile), the report keys' files unless KeyDir names
	// another directory, and, unless Store names another, the database
	// Dir/collector.db. Required unless Store is a PostgreSQL URL.
	Dir string
	// Store is where the collector keeps its plans, report key schedule,
	// batches and statistics: a PostgreSQL URL (postgres://… or
	// postgresql://…; its tables go in the schema blanket_collector, the
	// keys with them unless KeyDir is set, so that every replica serves
	// the same plan and keys: package doc, Replicas), or the path of a
	// SQLite file, for one process. Defaults to Dir/collector.db.
	Store string
	// KeyDir is the directory holding the private halves of the report
	// keys, one file each (ReportKeyFile, mode 0600): with PostgreSQL the
	// database then holds only their public halves and schedule, so that
	// a dump of it holds no private key; replicas must share the
	// directory. Defaults to Dir with SQLite and to the database with
	// PostgreSQL.
	KeyDir string
	// KeyRotation is how long each report key is active: the next key is
	// published as soon as one becomes active and is used from the first
	// period boundary KeyRotation after it (Run does it; keys.go). It is
	// at least one period. Defaults to 0: the key rotates only by
	// RotateReportKey (blanket collector rotate-key).
	KeyRotation time.Duration
	// KeySlack is how long after a retired key's last period's deadline
	// (its end plus the plans' grace) its private half is kept for
	// batches still on their way; then it is erased. Defaults to
	// DefaultKeySlack; negative means none.
	KeySlack time.Duration
	// KeyLead is the least time between a new key's publication and its
	// first period, when longer than one period. Defaults to
	// DefaultKeyLead.
	KeyLead time.Duration
	// Now is the clock that decides the keys' states and rotations.
	// Defaults to time.Now.
	Now func() time.Time
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
	// SameOperator reports that the shuffler runs in the same process
	// (blanket serve): the API and the dashboard then say that against
	// its operator only each report's local eps0 holds (Scope).
	SameOperator bool
	// ShufflerAdmission declares what the shufflers that feed the
	// collector ask of each envelope: admission.AdmissionTokens (an
	// admission token, one per authenticated app instance, pool and
	// period: shuffler.Options.Admission) or admission.AdmissionOpen
	// (nothing). The API and the dashboard state it (Scope), and GET
	// /v1/plan sends it in the admission.AdmissionHeader. The collector
	// cannot check it: blanket serve sets it from its own shuffler, and
	// blanket collector from --shuffler-admission. Defaults to open,
	// without the header: nothing is claimed.
	ShufflerAdmission string
	// Registerer receives the collector's Prometheus metrics
	// (blanket_collector_*: batches and reports by outcome, ingest and
	// estimate latency, calibration time). Defaults to none: they are then
	// not exported.
	Registerer prometheus.Registerer
}

// Collector is the analyzer role: it publishes the calibrated plan with its
// report key schedule (GET /v1/plan), ingests shuffled batches (POST /v1/batches):
// opens each report, accumulates the valid ones with the metric's plugin,
// and stores the merged statistic per metric and epoch, atomically and at
// most once per batch id; and it serves estimates with their central
// guarantee (GET /v1/metrics, GET /v1/metrics/{name}).
type Collector struct {
	o   CollectorOptions
	log *slog.Logger
	// plan is the current epoch's plan, without its key schedule.
	plan *plan.Plan
	// served is the plan served at GET /v1/plan: plan with the key
	// schedule, signed (republish).
	served atomic.Pointer[servedPlan]
	// signer signs the published plan.
	signer *planSigner
	// keys keeps the report keys; retention is how long a retired key
	// opens reports after its last period ended (the plans' longest
	// grace plus KeySlack).
	keys      *keyKeeper
	retention time.Duration
	epoch     string
	st        store
	// cur is the current epoch. Batches of earlier ones (late reports
	// of apps that had not fetched the current plan) open under theirs,
	// loaded when first needed (epochByID).
	cur *epochState

	epsMu       sync.Mutex
	epsCache    map[epsKey]epsValue
	epsInFlight map[epsKey]*epsCall
	// horizon memoises the compositions of HorizonGuarantee.
	horizon horizonCache

	plansMu sync.Mutex
	plans   map[string]*plan.Plan  // published plans by epoch
	opened  map[string]*epochState // earlier epochs epochByID loaded

	c         collectorCounters
	m         *collectorMetrics
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

// OpenCollector opens (creating) the collector's database in o.Dir or
// o.Store and its report keys (the first generated at the first start),
// publishes the plan (calibrating it if needed) with the key schedule and
// opens the metrics' randomizers. Run keeps the keys from then on.
func OpenCollector(ctx context.Context, o CollectorOptions) (*Collector, error) {
	if o.Plan == nil {
		return nil, fmt.Errorf("%w: Plan is required", ErrOptions)
	}
	if o.Open == nil {
		return nil, fmt.Errorf("%w: Open is required", ErrOptions)
	}
	switch o.ShufflerAdmission {
	case "", admission.AdmissionTokens, admission.AdmissionOpen:
	default:
		return nil, fmt.Errorf("%w: ShufflerAdmission = %q, must be %q or %q", ErrOptions, o.ShufflerAdmission, admission.AdmissionTokens, admission.AdmissionOpen)
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
	if err := o.keyDefaults(); err != nil {
		return nil, err
	}
	st, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	keys := newKeyKeeper(st, o.KeyDir, o.Now)
	if err := keys.open(ctx, o.Logger); err != nil {
		st.close()
		return nil, err
	}
	signer, created, err := st.planSigner(ctx)
	if err != nil {
		st.close()
		return nil, err
	}
	if created {
		o.Logger.Info("generated the plan-signing key; pin it in every app (client.Config.PlanKey)", "plan_key", plan.FormatSigningKey(signer.public()))
	}
	c := &Collector{
		o:        o,
		log:      o.Logger,
		keys:     keys,
		signer:   signer,
		st:       st,
		epsCache: map[epsKey]epsValue{},

		epsInFlight: map[epsKey]*epsCall{},
		plans:       map[string]*plan.Plan{},
		opened:      map[string]*epochState{},
	}
	c.m = newCollectorMetrics(c)
	if err := c.publish(ctx); err != nil {
		st.close()
		return nil, err
	}
	if err := checkFloorPlan(ctx, c.plan, o.Open); err != nil {
		st.close()
		return nil, err
	}
	if err := c.openKeys(ctx); err != nil {
		st.close()
		return nil, err
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(c.m); err != nil {
			st.close()
			return nil, fmt.Errorf("collector: registering the collector's metrics: %w", err)
		}
	}
	return c, nil
}

// Plan returns a copy of the published plan (calibrated, with the
// collector's report key schedule as served).
func (c *Collector) Plan() *plan.Plan {
	p, _ := clonePlan(c.served.Load().plan)
	return p
}

// Epoch returns the current epoch: the first EpochLen hex digits of the
// published plan's digest. Statistics of different epochs never merge.
func (c *Collector) Epoch() string { return c.epoch }

// PlanSigningKey returns the public key that signs the published plan:
// what apps pin (client.Config.PlanKey, encoded by plan.FormatSigningKey).
func (c *Collector) PlanSigningKey() ed25519.PublicKey { return c.signer.public() }

// PublicKey returns the public half of the report key that seals the
// current period's reports (by Now).
func (c *Collector) PublicKey() *report.PublicKey {
	ring := c.keys.held()
	return ring.keys[ring.forPeriod(c.plan.ReportPeriod(c.o.Now()))].pub
}

// Close closes the database. The randomizers belong to the caller's
// Opener. Close is idempotent.
func (c *Collector) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.st.close() })
	return err
}

// openStore opens the store o names (CollectorOptions.Store).
func openStore(ctx context.Context, o CollectorOptions) (store, error) {
	if pgdb.IsURL(o.Store) {
		return openPGStore(ctx, o.Store)
	}
	if err := secrets.EnsureDir(o.Dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	path := o.Store
	if path == "" {
		path = filepath.Join(o.Dir, DBFile)
	}
	return openSQLiteStore(ctx, path, o.Dir)
}

// keyDefaults sets the key options' defaults: KeyDir (with SQLite, Dir),
// KeySlack, KeyLead and Now. A KeyRotation shorter than the plan's
// period is refused.
func (o *CollectorOptions) keyDefaults() error {
	if o.KeyDir == "" && !pgdb.IsURL(o.Store) {
		o.KeyDir = o.Dir
	}
	if o.KeyDir != "" {
		if err := secrets.EnsureDir(o.KeyDir); err != nil {
			return fmt.Errorf("%w: KeyDir: %v", ErrOptions, err)
		}
	}
	switch {
	case o.KeySlack == 0:
		o.KeySlack = DefaultKeySlack
	case o.KeySlack < 0:
		o.KeySlack = 0
	}
	if o.KeyLead <= 0 {
		o.KeyLead = DefaultKeyLead
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if per := o.Plan.PeriodLength(); o.KeyRotation < 0 || o.KeyRotation > 0 && o.KeyRotation < per {
		return fmt.Errorf("%w: KeyRotation = %v, must be 0 (off) or at least the plan's period, %v", ErrOptions, o.KeyRotation, per)
	}
	return nil
}
