package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Defaults of Config.
const (
	// DefaultBatchSize is the default of Config.BatchSize.
	DefaultBatchSize = 1000
	// DefaultUploadDelay is the default of Config.UploadDelay.
	DefaultUploadDelay = 5 * time.Second
	// DefaultStageInterval is the default of Config.StageInterval.
	DefaultStageInterval = time.Second
	// DefaultUploadInterval is the default of Config.UploadInterval.
	DefaultUploadInterval = 5 * time.Minute
	// DefaultRetryMin is the default of Config.RetryMin.
	DefaultRetryMin = time.Second
	// DefaultRetryMax is the default of Config.RetryMax.
	DefaultRetryMax = 10 * time.Minute
	// DefaultHTTPTimeout bounds each request of the default HTTP client.
	DefaultHTTPTimeout = 30 * time.Second
	// DefaultPlanTimeout is the default of Config.PlanTimeout.
	DefaultPlanTimeout = time.Second
	// DefaultShutdownTimeout is the default of Config.ShutdownTimeout.
	DefaultShutdownTimeout = time.Second
	// DefaultPlanRefresh is the default of Config.PlanRefresh.
	DefaultPlanRefresh = time.Hour
	// DefaultTokenPrefetch is the default of Config.TokenPrefetch.
	DefaultTokenPrefetch = 1
	// DefaultLocalRetention is the default of Config.LocalRetention.
	DefaultLocalRetention = 7
	// OutboxFile is the SQLite outbox's file name in Config.DataDir.
	OutboxFile = "outbox.db"
)

// Config configures a Provider.
type Config struct {
	// Mode is the user's consent. Defaults to ModeOff (the zero value):
	// nothing is recorded unless the app sets it, for instance with
	// ModeFromEnvLogged.
	Mode Mode
	// Endpoint is the base URL of the Blanket server: the shuffler takes
	// POST Endpoint/v1/reports and, unless PlanEndpoint says otherwise, the
	// collector serves GET Endpoint/v1/plan. Required unless Mode is
	// ModeOff.
	Endpoint string
	// PlanEndpoint is the base URL of the collector when it runs apart from
	// the shuffler. Defaults to Endpoint.
	PlanEndpoint string
	// PlanKey is the collector's plan-signing public key, standard base64
	// of 32 bytes, as `blanket collector plan-key` prints it (never a line
	// of the collector's key file: the private key's, which starts with
	// plan.SigningSeedPrefix, is refused with ErrBadConfig): the app
	// refuses a fetched (or cached) plan that is unsigned or whose
	// signature does not verify under this key, or under a key this one
	// endorsed through the collector's key rollover statements, so that
	// whoever relays the plan (a shuffler, a CDN) cannot swap the
	// collector's report key. Configure it out of band, with the app:
	// a key fetched from the server it authenticates would pin nothing.
	// Required in ModeLocal and ModeOn unless Plan is set or
	// InsecureSkipPlanSignature is true.
	PlanKey string
	// InsecureSkipPlanSignature, for local development only, accepts the
	// plan the server sends without checking its signature, so that
	// anyone who relays it can read every report; NewProvider logs a
	// warning. Defaults to false. It is ignored when PlanKey is set.
	InsecureSkipPlanSignature bool
	// Plan is a plan to report by instead of fetching one from the
	// collector; it is verified all the same. It is for simulations that
	// run many Providers (pass the first one's Provider.Plan), for tests,
	// and for an app that ships its plan. Defaults to nil: fetch the plan
	// (in ModeOn; ModeLocal never fetches it, and takes the plan a run in
	// ModeOn cached in DataDir).
	Plan *plan.Plan
	// MaxEps0 is this app's local ceiling: a plan with any metric's eps0
	// above it is refused. Required unless Mode is ModeOff: finite, > 0.
	MaxEps0 float64
	// DataDir holds the SQLite outbox (OutboxFile), with the values of
	// the open period in clear, and the last verified plan of each
	// collector. Required in ModeLocal and ModeOn unless Outbox is set;
	// created if missing, with mode 0700.
	DataDir string
	// Outbox stores the values staged for open periods, sealed reports
	// and the ledger. Defaults to the SQLite outbox in DataDir, which the
	// Provider closes on Shutdown; an Outbox passed here is the caller's
	// to close.
	Outbox Outbox
	// Randomizers opens and shares the plan's randomizers. Defaults to a
	// cache of the Provider's own, closed on Shutdown, opening the
	// DefaultRandomizers in process; a cache passed here is the caller's to
	// close, after every Provider using it is shut down. It is how an app
	// opts into laplace or plugin binaries (see DefaultRandomizers).
	Randomizers *RandomizerCache
	// HTTPClient makes every request. Defaults to a client with a
	// DefaultHTTPTimeout timeout.
	HTTPClient *http.Client
	// PlanTimeout bounds how long NewProvider waits for the collector's
	// plan, whatever ctx allows: past it (or past half of what ctx's
	// deadline leaves, if less, so that the fallback has time to run),
	// NewProvider reports by the plan cached in DataDir. Defaults to
	// DefaultPlanTimeout. Must be >= 0.
	PlanTimeout time.Duration
	// ShutdownTimeout bounds Shutdown's one attempt to upload the pending
	// reports, below ctx's deadline; what it does not upload waits in the
	// outbox for the next run. Defaults to DefaultShutdownTimeout. Must be
	// >= 0.
	ShutdownTimeout time.Duration
	// BatchSize is the most envelopes per upload. Defaults to
	// DefaultBatchSize.
	BatchSize int
	// UploadDelay is how long the uploader waits after a period closed
	// before uploading, so that the reports of a burst of closings go in
	// one request. Defaults to DefaultUploadDelay. Flush does not wait.
	UploadDelay time.Duration
	// StageInterval is how long the values of Records wait in memory
	// before they are staged in the outbox: a Record returns without disk
	// I/O, and the Records of a burst go in one pass, one transaction per
	// metric and period. A crash (kill -9, a power cut) loses the values
	// of the last StageInterval; Flush, Shutdown and every closing of
	// periods stage them first. Defaults to DefaultStageInterval.
	// Negative makes every Record stage its value before it returns (an
	// fsync per Record, as the SQLite outbox commits with
	// synchronous=FULL): for an app that must not lose a Record to a
	// crash, and off the hot path.
	StageInterval time.Duration
	// UploadInterval is how often the uploader closes the periods that
	// ended and looks for pending reports by itself. Defaults to
	// DefaultUploadInterval.
	UploadInterval time.Duration
	// PlanRefresh is how often, in ModeOn, the Provider asks the collector
	// whether its plan changed (a conditional GET: a 304 costs nothing)
	// and, when it did, verifies the new plan and reports by it from then
	// on (see Provider.RefreshPlan). Defaults to DefaultPlanRefresh.
	// Negative disables it. A Provider given Config.Plan never refreshes.
	PlanRefresh time.Duration
	// RetryMin and RetryMax bound the exponential backoff between failed
	// uploads (jittered, see backoff); a 429 or 503 with Retry-After waits
	// as told instead. Default to DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// PeriodGrace is how long after a reporting period ends its staged
	// values may still be sealed and sent. A period closes at the first
	// Record, upload tick or start after its end; when that comes more
	// than PeriodGrace after the end (the app did not run, the device was
	// off), the period's values are dropped unsent (Stats.Expired), never
	// sent late into another period. Defaults to the plan's grace
	// (plan.Plan.GraceLength: 8 periods unless the plan says otherwise),
	// which the shuffler follows too; set it only in tests. Must be >= 0.
	PeriodGrace time.Duration
	// LocalRetention is how many days reports recorded in ModeLocal are
	// kept. Defaults to DefaultLocalRetention.
	LocalRetention int
	// Logger receives warnings: failed uploads, a plan fetch that fell
	// back to the cached plan, a cached plan ignored because it does not
	// decode or authenticate, and one line per Drop (a late Record, an
	// expired period, a refused report) with its metric, period and
	// reason. Defaults to discarding them.
	Logger *slog.Logger
	// OnDrop, when set, is called with every Drop: telemetry the app
	// recorded that will not reach the collector (a Record into a closed
	// period, a period that expired unsent, a report the shuffler
	// refused). It is called on a goroutine of the Provider's, one Drop
	// at a time in the order they happened, never with a lock held that
	// Record or any other method takes, so it may call the Provider; but
	// it must not block: while it runs, later Drops wait, and beyond 1024
	// waiting they are only logged and counted in Stats. A Drop may come
	// after the call that caused it returned; Shutdown returns after the
	// last one. Defaults to nil: Drops are only logged and counted.
	OnDrop func(Drop)
	// Now is the clock that places Records in reporting periods and ends
	// them. Defaults to time.Now. A simulation may pass a faster clock.
	Now func() time.Time
	// Credential returns the app instance's bearer token for the
	// admission issuer: a JWT signed by the operator's identity provider
	// naming the instance (an app with a login has one). When set, in
	// ModeOn, the Provider fetches an admission token for every pool of
	// the plan ahead of each period (TokenPrefetch) and uploads a report
	// only with the token of its pool key; a report whose token cannot be
	// obtained before its period's deadline is dropped (DropNoToken). It
	// is called before each request to the issuer, on a goroutine of the
	// Provider's, never on the Record path, and should return promptly (a
	// cached token, refreshed as the app does). Defaults to nil: no token
	// is fetched or sent; NewProvider then fails with
	// ErrCredentialRequired when the server says its shuffler requires
	// tokens (AdmissionHeader). ModeLocal and ModeOff never call it.
	Credential func(ctx context.Context) (string, error)
	// Issuer is the base URL of the admission issuer, which serves POST
	// Issuer/v1/tokens. Defaults to Endpoint.
	Issuer string
	// TokenPrefetch is how many periods after the current one the
	// Provider fetches admission tokens for, so that it holds a period's
	// tokens before the period starts and asks the issuer apart from when
	// it uploads. Defaults to 1 (0 means the default); negative fetches
	// for the current period only. The issuer grants a few periods ahead
	// (issuer.DefaultPrefetch, 3); pool keys further ahead are refused
	// and asked again a period later.
	TokenPrefetch int
}

// Provider records values under a verified plan and uploads them. It is the
// entry point of the package, like an OpenTelemetry MeterProvider. It is
// safe for concurrent use. A nil *Provider is valid and records nothing, so
// that an app can go on after NewProvider fails.
type Provider struct {
	cfg  Config
	mode Mode
	log  *slog.Logger
	hc   *http.Client
	now  func() time.Time
	// trust authenticates fetched and cached plans (Config.PlanKey).
	trust planTrust
	// plan is the verified plan. A Record loads it once and uses that
	// plan throughout; RefreshPlan swaps it without waiting for Records
	// (swapPlan, under closeMu, after a closing in progress).
	plan     atomic.Pointer[verifiedPlan]
	planBase string
	outbox   Outbox
	cache    *RandomizerCache

	ownOutbox, ownCache bool

	up *uploader
	// admit fetches admission tokens; nil without Config.Credential or
	// outside ModeOn.
	admit    *admitter
	upCancel context.CancelFunc
	upDone   chan struct{}
	// drops hands Drops to Config.OnDrop; nil without one.
	drops *dropQueue

	// buf holds the Records not yet staged (buffer.go); nil when every
	// Record stages itself (Config.StageInterval < 0). The stager stages
	// it; stagerCancel stops it, and stagerDone is closed when it has.
	buf          *recordBuffer
	stagerCancel context.CancelFunc
	stagerDone   chan struct{}

	mu sync.RWMutex // Flush, RefreshPlan and Records staging themselves hold it shared; Shutdown exclusive
	// shutdown is set by Shutdown under mu; Enabled reads it without.
	shutdown atomic.Bool
	// drawn is the last parallel-travel draw this process read or made
	// (plan, period, metric), so that Enabled asks the outbox once per
	// period.
	drawn atomic.Pointer[drawnMetric]
	// closedThrough is the latest end of a period this process closed (or
	// tried to): a cached draw of a period ending by then is not used.
	closedThrough atomic.Int64
	// closeMu serializes the closing of periods (close.go).
	closeMu sync.Mutex
	// nextClose is the Unix second before which no staged period can
	// have ended, as of the last closing: a Record before it does not
	// look for periods to close. 0: look.
	nextClose atomic.Int64
	// noCredentialWarned is set once RefreshPlan warned that the
	// shuffler requires tokens the Provider cannot fetch.
	noCredentialWarned atomic.Bool

	stats struct {
		recorded, skipped, late, messages atomic.Int64
		steps                             atomic.Int64
		expired, incomplete, superseded   atomic.Int64
		uploaded, retries, dropped        atomic.Int64
		accepted, duplicates, rejected    atomic.Int64
		noToken, tokens, tokensRefused    atomic.Int64
	}
}

// Stats are a Provider's counters since it started. The closing counters
// (Messages, Expired, Incomplete, Superseded) count the periods this
// Provider closed; a period closed by another process on the same outbox
// counts there.
type Stats struct {
	// Recorded counts Records whose value was staged for their period.
	// Recorded, Skipped and Late count a Record once its value left memory
	// for the outbox (Config.StageInterval), not when Record returned.
	Recorded int64
	// Skipped counts Records of parallel travel for a metric their period
	// did not draw: they report nothing.
	Skipped int64
	// Late counts Records dropped because their period was already
	// closed for their metric (separate travel) or the plan's pool (joint,
	// parallel): the clock went back into a closed period, or another
	// process on the outbox closed it first. Also Records whose clock
	// reads before 1970, which is in no period. Each is a Drop.
	Late int64
	// Messages counts envelopes committed to the outbox: one per metric
	// and closed period with separate travel, one per closed period with
	// joint or parallel travel.
	Messages int64
	// Steps counts periods of state metrics closed by a step of their
	// randomizer's state (see the package doc), whether or not the step
	// sent a report (those count in Messages too).
	Steps int64
	// Expired counts staged periods dropped unsent because they could
	// not close within Config.PeriodGrace of their end: one per metric
	// and period with separate travel, one per period with joint or
	// parallel travel. Each is a Drop.
	Expired int64
	// Incomplete counts periods of joint travel closed without a message
	// because a categorical metric had no value in them (a sum without a
	// value counts 0).
	Incomplete int64
	// Superseded counts staged values dropped at closing because they
	// were recorded under a plan the Provider no longer reports by: a
	// report is sealed under its plan's binding, which the Provider no
	// longer holds once a new plan replaced it (RefreshPlan). A plan
	// change first closes, under the plan it replaces, the periods that
	// have ended, so this counts the values staged for a period still
	// open at the change; and, at start, the values of ended periods
	// recorded under a plan the collector replaced when the plan cached
	// in DataDir is not that plan or is missing (see NewProvider). A
	// state metric's value is not dropped so when the current plan's
	// metric takes it: it is the period's value, and carries forward.
	Superseded int64
	// Uploaded counts reports acknowledged by the shuffler (HTTP 202)
	// and not refused: it holds them.
	Uploaded int64
	// Accepted, Duplicates and Rejected are the shuffler's counts over its
	// 202 answers: reports it took, reports it already had (a retry after
	// a lost acknowledgement), and reports it refused, deleted from the
	// outbox, each a Drop (see UploadRefused for their ledger charge).
	Accepted, Duplicates, Rejected int64
	// Retries counts failed upload attempts.
	Retries int64
	// Dropped counts reports the shuffler refused on their own with 400 or
	// 413, dropped from the outbox so as not to block it (UploadDropped),
	// each a Drop.
	Dropped int64
	// NoToken counts reports dropped unsent at their period's deadline
	// because no admission token of their pool key could be obtained
	// (UploadNoToken), each a Drop (DropNoToken).
	NoToken int64
	// Tokens counts the admission tokens the issuer granted this
	// Provider (Config.Credential), TokensRefused the pool keys it
	// refused.
	Tokens, TokensRefused int64
}

// NewProvider returns a Provider for cfg. In ModeOff it touches neither
// network nor disk. Otherwise it opens the outbox, takes a plan and
// verifies it — refusing, with an error wrapping ErrPlanRefused, a plan
// that is not calibrated, has no collector key, uses an unknown travel
// mode, sets an eps0 above cfg.MaxEps0 or names a randomizer this app
// cannot open —, closes the reporting periods that ended since the last
// run and, in ModeOn, starts the background uploader.
//
// The plan is cfg.Plan when set. Otherwise, in ModeOn, it is the
// collector's, fetched for at most cfg.PlanTimeout (or half of what ctx's
// deadline leaves, if less), whatever ctx allows: when the collector does
// not answer in time, refuses the connection or answers an error,
// NewProvider logs it and reports by the last verified plan cached in
// DataDir, and fails with an error wrapping ErrPlanUnavailable only when
// none is cached. So NewProvider never waits on the network longer than
// the plan timeout. In ModeLocal nothing is fetched (nothing leaves the
// device): the plan is the one an earlier run in ModeOn cached in DataDir,
// and without one the Provider records nothing (every Record returns nil,
// Enabled is false, Plan returns nil). A cache file that does not decode,
// or whose plan does not authenticate under Config.PlanKey (a corrupt or
// tampered file), counts as no cached plan: NewProvider logs a warning
// and goes on without it, and the next plan fetched replaces it. A cached
// plan that authenticates is verified again like a fetched one before it
// is reported by, and fails NewProvider when refused then (a lower
// MaxEps0, a randomizer gone).
//
// The periods that ended since the last run close under the plan their
// values were recorded under when the Provider can: before fetching the
// plan it closes them under the last verified plan cached in DataDir, so
// that a new plan served by the collector does not drop them. Values
// recorded under another plan than the cached one (a plan given by
// Config.Plan, a cache file lost or no longer passing the checks above)
// are dropped when they close (Stats.Superseded), as are values staged
// for a period still open when the plan changes.
//
// On error the Provider is nil, and a nil Provider records nothing.
func NewProvider(ctx context.Context, cfg Config) (*Provider, error) {
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, err
	}
	if mode == "" {
		mode = ModeOff
	}
	p := &Provider{cfg: cfg, mode: mode, log: cfg.Logger, hc: cfg.HTTPClient, now: cfg.Now}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if mode == ModeOff {
		return p, nil
	}
	if err := p.fillDefaults(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			p.closeOwned()
		}
	}()
	if cfg.OnDrop != nil {
		p.drops = newDropQueue(cfg.OnDrop)
	}
	if p.cache == nil {
		p.cache, p.ownCache = NewRandomizerCache(nil), true
	}
	if p.outbox == nil {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("client: data dir: %w", err)
		}
		o, err := OpenSQLiteOutbox(ctx, filepath.Join(cfg.DataDir, OutboxFile))
		if err != nil {
			return nil, err
		}
		p.outbox, p.ownOutbox = o, true
	}
	planBase := cfg.PlanEndpoint
	if planBase == "" {
		planBase = cfg.Endpoint
	}
	p.planBase = planBase
	var (
		v        *verifiedPlan
		fetchErr error // the collector's plan could not be fetched
	)
	switch {
	case cfg.Plan != nil:
		pl := clonePlan(cfg.Plan)
		if err := pl.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPlanRefused, err)
		}
		v, err = verifyPlan(ctx, pl, cfg.MaxEps0, p.cache)
	default:
		cached := p.openCachedPlan()
		// Periods that ended under the last run's plan close under it
		// first, in case the collector serves a new one.
		if err := p.closeCachedPlan(ctx, cached); err != nil {
			return nil, err
		}
		switch {
		case mode == ModeOn:
			v, fetchErr, err = p.loadPlan(ctx, cached)
		case cached != nil: // ModeLocal fetches nothing
			v, err = verifyPlan(ctx, cached, cfg.MaxEps0, p.cache)
		}
	}
	if err != nil {
		return nil, err
	}
	if fetchErr != nil {
		p.log.Warn("blanket plan unavailable; reporting by the plan cached in the data dir", "error", fetchErr)
	}
	if v == nil {
		// ModeLocal without a cached plan: nothing to record by.
		p.log.Info("blanket telemetry is local and no plan is cached: nothing is recorded")
		ok = true
		return p, nil
	}
	p.plan.Store(v)
	if p.cfg.StageInterval >= 0 {
		p.buf = newRecordBuffer()
	}
	cutoff := p.now().UTC().AddDate(0, 0, -p.cfg.LocalRetention).Format(time.DateOnly)
	if _, err := p.outbox.DropLocal(ctx, cutoff); err != nil {
		return nil, err
	}
	// Periods that ended while the app was not running close now. A
	// failure leaves them staged for the next try.
	if err := p.closePeriods(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.log.Warn("blanket closing periods", "error", err)
	}
	if mode == ModeOn {
		if p.admit, err = newAdmitter(p); err != nil {
			return nil, err
		}
		if p.up, err = newUploader(p); err != nil {
			return nil, err
		}
		if unanswered(fetchErr) && sameServer(planBase, cfg.Endpoint) {
			// The server did not answer: Shutdown will not wait on it
			// again unless an upload gets an answer meanwhile.
			p.up.noAnswer(fetchErr)
		}
		upCtx, cancel := context.WithCancel(context.Background())
		p.upCancel, p.upDone = cancel, make(chan struct{})
		go func() {
			defer close(p.upDone)
			p.up.run(upCtx)
		}()
		// Reports left by an earlier run go out without waiting.
		p.up.notify()
	}
	p.startStager()
	ok = true
	return p, nil
}

// planTimeout returns how long NewProvider waits for the collector's
// plan: Config.PlanTimeout, or half of what ctx's deadline leaves if less,
// so that the fallback to the cached plan runs before ctx expires.
func (p *Provider) planTimeout(ctx context.Context) time.Duration {
	d := p.cfg.PlanTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	return d
}

// sameServer reports whether base URLs a and b name the same server
// (scheme and host).
func sameServer(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

func (p *Provider) fillDefaults() error {
	c := &p.cfg
	if c.Endpoint == "" {
		return fmt.Errorf("%w: Endpoint is required in mode %s", ErrBadConfig, p.mode)
	}
	if !finite(c.MaxEps0) || !(c.MaxEps0 > 0) {
		return fmt.Errorf("%w: MaxEps0 = %v, must be finite and > 0", ErrBadConfig, c.MaxEps0)
	}
	if c.Outbox == nil && c.DataDir == "" {
		return fmt.Errorf("%w: DataDir is required in mode %s unless Outbox is set", ErrBadConfig, p.mode)
	}
	switch {
	case c.PlanKey != "":
		pin, err := plan.ParseSigningKey(c.PlanKey)
		if err != nil {
			return fmt.Errorf("%w: PlanKey: %w", ErrBadConfig, err)
		}
		p.trust.pin = pin
	case c.Plan == nil && !c.InsecureSkipPlanSignature:
		return fmt.Errorf("%w: PlanKey is required in mode %s: the collector's plan-signing key (`blanket collector plan-key`), so that a relay cannot swap the plan; set InsecureSkipPlanSignature only for local development", ErrBadConfig, p.mode)
	case c.Plan == nil:
		p.log.Warn("blanket plan signature not checked (InsecureSkipPlanSignature): whoever relays the plan can read every report; set Config.PlanKey")
	}
	if c.BatchSize < 0 || c.LocalRetention < 0 {
		return fmt.Errorf("%w: BatchSize = %d, LocalRetention = %d: must be >= 0", ErrBadConfig, c.BatchSize, c.LocalRetention)
	}
	if c.UploadDelay < 0 || c.UploadInterval < 0 || c.RetryMin < 0 || c.RetryMax < 0 || c.PeriodGrace < 0 || c.PlanTimeout < 0 || c.ShutdownTimeout < 0 {
		return fmt.Errorf("%w: UploadDelay = %v, UploadInterval = %v, RetryMin = %v, RetryMax = %v, PeriodGrace = %v, PlanTimeout = %v, ShutdownTimeout = %v: durations must be >= 0",
			ErrBadConfig, c.UploadDelay, c.UploadInterval, c.RetryMin, c.RetryMax, c.PeriodGrace, c.PlanTimeout, c.ShutdownTimeout)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	c.BatchSize = min(c.BatchSize, report.MaxBatchReports)
	if c.UploadDelay == 0 {
		c.UploadDelay = DefaultUploadDelay
	}
	if c.UploadInterval == 0 {
		c.UploadInterval = DefaultUploadInterval
	}
	if c.StageInterval == 0 {
		c.StageInterval = DefaultStageInterval
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.RetryMax < c.RetryMin {
		return fmt.Errorf("%w: RetryMax = %v is below RetryMin = %v", ErrBadConfig, c.RetryMax, c.RetryMin)
	}
	if c.LocalRetention == 0 {
		c.LocalRetention = DefaultLocalRetention
	}
	if c.PlanRefresh == 0 {
		c.PlanRefresh = DefaultPlanRefresh
	}
	if c.PlanTimeout == 0 {
		c.PlanTimeout = DefaultPlanTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.TokenPrefetch == 0 {
		c.TokenPrefetch = DefaultTokenPrefetch
	}
	c.TokenPrefetch = max(c.TokenPrefetch, 0)
	if c.Issuer == "" {
		c.Issuer = c.Endpoint
	}
	if p.hc == nil {
		p.hc = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.trust.now = p.now
	p.outbox, p.cache = c.Outbox, c.Randomizers
	return nil
}

func (p *Provider) closeOwned() {
	if p.stagerCancel != nil {
		p.stagerCancel()
		<-p.stagerDone
	}
	if p.ownOutbox && p.outbox != nil {
		if err := p.outbox.Close(); err != nil {
			p.log.Warn("blanket outbox close", "error", err)
		}
	}
	if p.ownCache && p.cache != nil {
		if err := p.cache.Close(); err != nil {
			p.log.Warn("blanket randomizers close", "error", err)
		}
	}
	if p.drops != nil {
		p.drops.close()
	}
}

// Mode returns the consent mode; ModeOff for a nil Provider.
func (p *Provider) Mode() Mode {
	if p == nil {
		return ModeOff
	}
	return p.mode
}

// Plan returns a copy of the verified plan the Provider reports by, or nil
// in ModeOff and without a plan (ModeLocal with none cached).
func (p *Provider) Plan() *plan.Plan {
	if p == nil || p.mode == ModeOff || p.currentPlan() == nil {
		return nil
	}
	return clonePlan(p.currentPlan().plan)
}

// currentPlan returns the verified plan; nil in ModeOff and in ModeLocal
// without a cached plan, where nothing is recorded.
func (p *Provider) currentPlan() *verifiedPlan { return p.plan.Load() }

// RefreshPlan asks the collector whether its plan changed since the one
// the Provider reports by and, when it did, verifies the new plan as
// NewProvider does and reports by it from then on. Before it takes the new
// plan it closes, under the plan in use, the periods that have ended, so
// that their values are sealed and sent under the plan they were recorded
// under. Then a Record in progress finishes under the plan it started
// with, reports already in the outbox keep the plan they were sealed under
// (the collector counts them in that plan's epoch), and values staged
// under the earlier plan for a period still open are dropped when it
// closes (Stats.Superseded): they would need that plan's binding. It
// reports whether the plan changed. When the new plan is refused (an
// error wrapping ErrPlanRefused) or cannot be fetched, or the ended
// periods fail to close (the plan waits for the next refresh, their values
// staged), the Provider goes on with the plan it has and RefreshPlan
// returns the error. The uploader calls it every Config.PlanRefresh in
// ModeOn; an app may call it at any time. It does nothing outside ModeOn
// or for a Provider given Config.Plan.
func (p *Provider) RefreshPlan(ctx context.Context) (changed bool, err error) {
	if p == nil || p.mode != ModeOn || p.cfg.Plan != nil {
		return false, nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown.Load() {
		return false, ErrShutdown
	}
	cur := p.currentPlan()
	pl, sp, err := fetchPlanIfChanged(ctx, p.hc, p.planBase, cur.etag, p.trust)
	if err == nil && sp.Admission == AdmissionTokens && p.cfg.Credential == nil && !p.noCredentialWarned.Swap(true) {
		p.log.Warn("blanket: the shuffler now requires admission tokens and this app has no Config.Credential: its reports will be refused (token_missing)")
	}
	if err != nil || pl == nil || pl.Digest() == cur.etag {
		return false, err
	}
	v, err := verifyPlan(ctx, pl, p.cfg.MaxEps0, p.cache)
	if err != nil {
		return false, err
	}
	if changed, err := p.swapPlan(ctx, v); !changed || err != nil {
		return false, err
	}
	writeCachedPlan(p.cfg.DataDir, p.planBase, sp)
	p.log.Info("blanket plan changed", "digest", v.etag, "epoch", v.epoch)
	return true, nil
}

// clonePlan copies p deeply enough that neither copy's changes reach the
// other.
func clonePlan(p *plan.Plan) *plan.Plan {
	c := *p
	c.Metrics = append([]plan.Metric(nil), c.Metrics...)
	for i := range c.Metrics {
		m := &c.Metrics[i]
		m.Categories = append([]string(nil), m.Categories...)
		if m.Params != nil {
			m.Params = maps.Clone(m.Params)
		}
	}
	if c.Guarantee != nil {
		g := *c.Guarantee
		c.Guarantee = &g
	}
	return &c
}

// Meter returns the meter of scope: its instruments report the plan
// metric named scope + "/" + name (the owner-rooted names of
// golang.org/x/telemetry), or name itself when scope is "".
func (p *Provider) Meter(scope string) *Meter {
	return &Meter{p: p, scope: scope}
}

// Flush stages the Records not yet staged and closes the reporting
// periods that have ended (as an upload tick does); then, in ModeOn, it
// fetches the admission tokens missing (with Config.Credential) and
// uploads every pending report, retrying with backoff, and returns when
// the outbox holds none or ctx is done (then with ctx's error and the
// last upload error). Values of the period still open stay staged, and
// reports still without an admission token stay in the outbox, waiting
// for one. In ModeLocal it returns once the periods are closed (nothing is
// uploaded); in ModeOff, and in ModeLocal without a plan, at once.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil || p.mode == ModeOff || p.currentPlan() == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown.Load() {
		return ErrShutdown
	}
	if err := p.closePeriods(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		p.log.Warn("blanket closing periods", "error", err)
	}
	if p.up == nil {
		return nil
	}
	if p.admit != nil {
		if _, err := p.admit.run(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			p.log.Warn("blanket admission tokens", "error", err)
		}
	}
	return p.up.drain(ctx)
}

// Stats returns the Provider's counters.
func (p *Provider) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	return Stats{
		Recorded:      p.stats.recorded.Load(),
		Skipped:       p.stats.skipped.Load(),
		Late:          p.stats.late.Load(),
		Messages:      p.stats.messages.Load(),
		Steps:         p.stats.steps.Load(),
		Expired:       p.stats.expired.Load(),
		Incomplete:    p.stats.incomplete.Load(),
		Superseded:    p.stats.superseded.Load(),
		Uploaded:      p.stats.uploaded.Load(),
		Accepted:      p.stats.accepted.Load(),
		Duplicates:    p.stats.duplicates.Load(),
		Rejected:      p.stats.rejected.Load(),
		Retries:       p.stats.retries.Load(),
		Dropped:       p.stats.dropped.Load(),
		NoToken:       p.stats.noToken.Load(),
		Tokens:        p.stats.tokens.Load(),
		TokensRefused: p.stats.tokensRefused.Load(),
	}
}

// Shutdown stops the Provider and closes what it opened. In ModeOn it
// first stops the background uploader (cancelling an upload in flight),
// closes the periods that have ended, and makes one attempt to upload the
// pending reports, without retrying, for at most Config.ShutdownTimeout
// (less when ctx is done sooner); it makes none while the server is known
// not to answer (a request of this run, the plan fetch at start included,
// went unanswered and none was answered since) or while a failed upload's
// backoff or Retry-After runs. So a short-lived tool whose server hangs or
// refuses connections does not wait on it at exit. Reports not uploaded,
// and the values staged for the open period, stay in a durable outbox for
// the next Provider on the same DataDir, which closes the period once it
// has ended. It waits for Flushes in progress, stages the Records not yet
// staged (a Record from then on fails with ErrShutdown), waits for the
// last Drop passed to Config.OnDrop, and returns the error of staging or
// of the upload attempt, if any (or why it made none). Calls after the
// first return nil.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if p.shutdown.Load() {
		p.mu.Unlock()
		return nil
	}
	p.shutdown.Store(true)
	p.mu.Unlock()
	// From here no Flush or RefreshPlan runs (ErrShutdown), and once the
	// stager stops no Record either.
	if p.upCancel != nil {
		p.upCancel()
		<-p.upDone
	}
	// The last Records reach the outbox before it closes.
	err := p.stopStager(ctx)
	if p.up != nil {
		err = errors.Join(err, p.lastUpload(ctx))
	}
	p.closeOwned()
	return err
}

// lastUpload closes the ended periods (local work, bounded by ctx only)
// and makes Shutdown's one upload attempt (uploader.once), bounded by
// Config.ShutdownTimeout.
func (p *Provider) lastUpload(ctx context.Context) error {
	if err := p.closePeriods(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		p.log.Warn("blanket closing periods", "error", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ShutdownTimeout)
	defer cancel()
	return p.up.once(ctx)
}
