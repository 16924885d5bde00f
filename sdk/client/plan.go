package client

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Server paths.
const (
	// PlanPath is the collector's path serving the calibrated plan (JSON).
	PlanPath = "/v1/plan"
	// ReportsPath is the shuffler's path taking envelope uploads.
	ReportsPath = "/v1/reports"
)

// AdmissionHeader is the header of the plan route's answer saying
// whether the server's shuffler takes envelopes without an admission
// token: AdmissionTokens (it does not: a Provider needs
// Config.Credential) or AdmissionOpen. A server that predates admission
// sends none, which counts as open. The values are the admission
// package's, which the shuffler shares.
const AdmissionHeader = admission.AdmissionHeader

// Values of AdmissionHeader.
const (
	// AdmissionTokens: the shuffler takes only envelopes with a valid
	// admission token of their pool key, not spent before.
	AdmissionTokens = admission.AdmissionTokens
	// AdmissionOpen: the shuffler takes envelopes without a token.
	AdmissionOpen = admission.AdmissionOpen
)

// maxPlanBytes bounds a plan response.
const maxPlanBytes = 8 << 20

// planCacheFile returns the file in DataDir holding the last verified
// plan of the collector at base, used when it cannot be reached at start.
// The name carries a hash of base, so that a plan (and its key) is never
// used for another collector.
func planCacheFile(base string) string {
	h := sha256.Sum256([]byte(base))
	return "plan-" + hex.EncodeToString(h[:6]) + ".json"
}

// metricState is a verified plan metric, ready to report.
type metricState struct {
	name  string
	index int // in the plan's metric list
	r     sdk.Randomizer
	kind  sdk.InputKind
	// agg is a real metric's aggregate (plan.Metric.Aggregation): what
	// its instruments must be (Sum or Mean), and what closing makes of
	// a period's staged value; "" for a categorical metric.
	agg  string
	eps0 float64
	// binding is the metric's binding without a period.
	binding report.Binding
	// pool is where the metric's reports go: the metric itself with
	// separate travel, the plan's pool with pooled travel.
	pool string
	// categories and other are a categorical randomizer's buckets and
	// catch-all (sdk.Description); lo and hi a real randomizer's range.
	categories map[string]bool
	other      string
	lo, hi     float64
	// state is the randomizer of a state metric (its Description says
	// Stateful): its reports come from Step (close_state.go); nil otherwise.
	state sdk.Stateful
	// digest is the randomizer's configuration digest.
	digest string
}

// checkValue returns an error wrapping ErrBadValue and sdk.ErrBadInput
// when the metric's randomizer would refuse a Record's value (a category
// for a categorical metric, x for a real one): a category outside its
// buckets when it has no catch-all, NaN or an infinity. A Record checks
// its value before buffering it, since it is randomized only when its
// period closes.
func (ms *metricState) checkValue(category string, x float64) error {
	if ms.kind == sdk.InputReal {
		if !finite(x) {
			return fmt.Errorf("%w: metric %q: %w: value %v is not finite", ErrBadValue, ms.name, sdk.ErrBadInput, x)
		}
		return nil
	}
	if ms.other == "" && !ms.categories[category] {
		return fmt.Errorf("%w: metric %q: %w: category %q is not in the plan and the metric has no other bucket", ErrBadValue, ms.name, sdk.ErrBadInput, category)
	}
	return nil
}

// clamp returns x clamped to the metric's range [lo, hi].
func (ms *metricState) clamp(x float64) float64 { return max(ms.lo, min(ms.hi, x)) }

// verifiedPlan is a plan that passed every check of verifyPlan.
type verifiedPlan struct {
	plan *plan.Plan
	// digest is the plan's EpochDigest, which tags what is staged under
	// it: a rotation of the collector's key changes the plan but not its
	// epoch, and drops nothing staged.
	digest string
	epoch  string // plan.Plan.Epoch: digest[:plan.EpochLen]
	// etag is the plan's Digest, key schedule included: what a refresh
	// asks the collector whether it still serves.
	etag string
	// keys is the collector's key schedule: a period's report is sealed
	// to the key of its period (plan.KeySchedule.For).
	keys    plan.KeySchedule
	metrics map[string]*metricState
	// travel is the plan's travel mode, never "".
	travel declare.Travel
	// order lists the metrics in plan order.
	order []*metricState
	// pool is the shuffler pool of pooled travel.
	pool string
	// bindings are the metrics' bindings in plan order, without a period.
	bindings []report.Binding
	// cumWeights are the cumulative selection probabilities of parallel
	// travel, in plan order; the last is 1.
	cumWeights []float64
}

// planTrust is how an app authenticates the plans it fetches and caches:
// by the collector's signature, under the pinned plan-signing key
// (Config.PlanKey), or not at all (Config.InsecureSkipPlanSignature).
type planTrust struct {
	// pin is the pinned key; nil skips the signature check.
	pin ed25519.PublicKey
	// now is the app's clock, for the endorsements' validity start.
	now func() time.Time
}

// signedPlan is a plan's bytes as served and their signature headers;
// JSON-encoded, it is the plan cache file in DataDir, so that a cached
// plan is verified again, under the key pinned then, like a fetched one.
type signedPlan struct {
	Plan         []byte `json:"plan"`
	Signature    string `json:"signature,omitempty"`
	Endorsements string `json:"endorsements,omitempty"`
	// Admission is the answer's AdmissionHeader, not cached.
	Admission string `json:"-"`
}

// open verifies sp's signature (unless t skips it) and decodes its plan.
// A refusal wraps ErrPlanRefused and plan.ErrUnsigned (no signature) or
// plan.ErrBadSignature (one that does not verify under the pinned key).
func (t planTrust) open(sp *signedPlan) (*plan.Plan, error) {
	if t.pin != nil {
		sig, err := plan.ParseSignature(sp.Signature, sp.Endorsements)
		if err == nil {
			_, err = plan.VerifyPlan(t.pin, sp.Plan, sig, t.now())
		}
		if errors.Is(err, plan.ErrUnsigned) {
			return nil, fmt.Errorf("%w: %w: the server sent no %s header, and this app pins the plan-signing key %s (Config.PlanKey)", ErrPlanRefused, err, plan.SignatureHeader, plan.FormatSigningKey(t.pin))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPlanRefused, err)
		}
	}
	return decodePlan(sp.Plan)
}

// readCachedPlan reads the plan cache file of the collector at base in
// dataDir: nil and no error when there is none.
func readCachedPlan(dataDir, base string) (*signedPlan, error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, planCacheFile(base)))
	if err != nil {
		return nil, nil
	}
	var sp signedPlan
	if err := json.Unmarshal(raw, &sp); err != nil || sp.Plan == nil {
		return nil, fmt.Errorf("%w: the cached plan %s does not decode", ErrPlanRefused, planCacheFile(base))
	}
	return &sp, nil
}

// writeCachedPlan caches sp for the collector at base in dataDir, best
// effort: the cache only helps a later offline start.
func writeCachedPlan(dataDir, base string, sp *signedPlan) {
	if dataDir == "" || sp == nil {
		return
	}
	if b, err := json.Marshal(sp); err == nil {
		_ = writeFileAtomic(filepath.Join(dataDir, planCacheFile(base)), b)
	}
}

// fetchPlan gets the plan at base + PlanPath and authenticates and
// decodes it (planTrust.open). Unknown JSON fields are ignored, so that a
// newer collector can add fields.
func fetchPlan(ctx context.Context, hc *http.Client, base string, trust planTrust) (*plan.Plan, *signedPlan, error) {
	return fetchPlanIfChanged(ctx, hc, base, "", trust)
}

// fetchPlanIfChanged is fetchPlan sending If-None-Match with the digest
// of the plan the app has, when not ""; it returns a nil plan and no error
// when the collector answers 304 Not Modified, with a signedPlan holding
// only the answer's AdmissionHeader.
func fetchPlanIfChanged(ctx context.Context, hc *http.Client, base, digest string, trust planTrust) (*plan.Plan, *signedPlan, error) {
	u, err := url.JoinPath(base, PlanPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: endpoint %q: %v", ErrBadConfig, base, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: endpoint %q: %v", ErrBadConfig, base, err)
	}
	req.Header.Set("Accept", "application/json")
	if digest != "" {
		req.Header.Set("If-None-Match", `"`+digest+`"`)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrPlanUnavailable, u, err)
	}
	defer resp.Body.Close()
	admission := strings.TrimSpace(resp.Header.Get(AdmissionHeader))
	if resp.StatusCode == http.StatusNotModified && digest != "" {
		return nil, &signedPlan{Admission: admission}, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPlanBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrPlanUnavailable, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%w: GET %s: %s: %.200s", ErrPlanUnavailable, u, resp.Status, body)
	}
	if len(body) > maxPlanBytes {
		return nil, nil, fmt.Errorf("%w: GET %s: plan larger than %d bytes", ErrPlanUnavailable, u, maxPlanBytes)
	}
	sp := &signedPlan{Plan: body, Signature: resp.Header.Get(plan.SignatureHeader), Endorsements: strings.Join(resp.Header.Values(plan.EndorsementsHeader), ", "), Admission: admission}
	p, err := trust.open(sp)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return p, sp, nil
}

func decodePlan(b []byte) (*plan.Plan, error) {
	var p plan.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", ErrPlanRefused, plan.ErrInvalid, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlanRefused, err)
	}
	return &p, nil
}

func refuse(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrPlanRefused, kind, fmt.Sprintf(format, args...))
}

// verifyPlan checks a plan against the app's limits and opens the
// randomizer of every metric: the plan must be calibrated, carry a
// well-formed collector key schedule (plan.Plan.KeySchedule) and use a
// known travel mode; every metric's eps0 must be at most maxEps0
// and within its randomizer's range, and its randomizer must open with the
// plan's report format version.
func verifyPlan(ctx context.Context, p *plan.Plan, maxEps0 float64, cache *RandomizerCache) (*verifiedPlan, error) {
	if !p.Calibrated() {
		return nil, refuse(ErrNotCalibrated, "some metric has no eps0 or the plan has no guarantee; the collector publishes the plan after calibrating it")
	}
	// p.Validate (every caller's) allows the three travel modes only.
	travel := declare.Travel(p.Travel)
	if travel == "" {
		travel = declare.TravelSeparate
	}
	keys, err := p.KeySchedule()
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrPlanRefused, ErrNoCollectorKey, err)
	}
	v := &verifiedPlan{plan: p, digest: p.EpochDigest(), etag: p.Digest(), keys: keys, travel: travel, metrics: make(map[string]*metricState, len(p.Metrics))}
	v.epoch = v.digest[:plan.EpochLen]
	bindings := p.Bindings()
	v.bindings = bindings
	var reportBytes []int
	for i := range p.Metrics {
		m := &p.Metrics[i]
		if m.Eps0 > maxEps0 {
			return nil, refuse(ErrEps0AboveCeiling, "metric %q: eps0 = %g exceeds this app's MaxEps0 = %g", m.Name, m.Eps0, maxEps0)
		}
		r, d, err := cache.Open(ctx, m.Plugin, m.Config())
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, refuse(ErrPluginUnavailable, "metric %q: randomizer %q: %v", m.Name, m.Plugin, err)
		}
		if d.Version != m.Version {
			return nil, refuse(ErrPluginUnavailable, "metric %q: randomizer %q has report format version %q, the plan wants %q", m.Name, m.Plugin, d.Version, m.Version)
		}
		if !(m.Eps0 >= d.Eps0Min && m.Eps0 <= d.Eps0Max) {
			return nil, refuse(ErrPluginUnavailable, "metric %q: eps0 = %g outside randomizer %q's range [%g, %g]", m.Name, m.Eps0, m.Plugin, d.Eps0Min, d.Eps0Max)
		}
		if d.Input != sdk.InputCategorical && d.Input != sdk.InputReal {
			return nil, refuse(ErrPluginUnavailable, "metric %q: randomizer %q takes %v inputs", m.Name, m.Plugin, d.Input)
		}
		// p.Validate (every caller's) allows the aggregates sum, unset,
		// and mean only; Calibrate refuses one on a categorical metric,
		// but a plan may come calibrated from elsewhere.
		if m.Aggregate != "" && d.Input != sdk.InputReal {
			return nil, refuse(plan.ErrInvalid, "metric %q: aggregate = %q, but randomizer %q takes %v inputs", m.Name, m.Aggregate, m.Plugin, d.Input)
		}
		st, err := checkStateful(p, m, r, d)
		if err != nil {
			return nil, err
		}
		reportBytes = append(reportBytes, d.ReportBytes)
		ms := &metricState{
			name:    m.Name,
			index:   i,
			r:       r,
			kind:    d.Input,
			eps0:    m.Eps0,
			binding: bindings[i],
			pool:    p.Pool(m.Name),
			other:   d.Other,
			state:   st,
			digest:  d.Digest,
		}
		// A sum is clamped to the metric's range: the plan's, else the
		// one the randomizer declares, else none (the randomizer clamps).
		switch {
		case m.Lo < m.Hi:
			ms.lo, ms.hi = m.Lo, m.Hi
		case d.Lo < d.Hi:
			ms.lo, ms.hi = d.Lo, d.Hi
		default:
			ms.lo, ms.hi = -math.MaxFloat64, math.MaxFloat64
		}
		if d.Input == sdk.InputReal {
			ms.agg = m.Aggregation()
		}
		if d.Input == sdk.InputCategorical {
			ms.categories = make(map[string]bool, len(d.Categories))
			for _, c := range d.Categories {
				ms.categories[c] = true
			}
		}
		v.metrics[m.Name] = ms
		v.order = append(v.order, ms)
	}
	if p.Pooled() {
		if err := checkMessageSize(p, v.order, reportBytes); err != nil {
			return nil, err
		}
		v.pool = p.Pool("")
		var cum float64
		for _, w := range p.Weights() {
			cum += w
			v.cumWeights = append(v.cumWeights, cum)
		}
		v.cumWeights[len(v.cumWeights)-1] = 1
	}
	return v, nil
}

// checkStateful returns the Stateful of metric m's randomizer r when its
// description d says it is stateful, nil when it is not, or an error
// wrapping ErrPlanRefused for a state metric this client cannot report:
// under joint or parallel travel (a message of several metrics has no
// room for a period without a report, and the plan's accountant composes
// no stateful protocol there), with real inputs (a state metric carries
// its last categorical value forward; no real-valued one exists yet), or
// from a randomizer without Step.
func checkStateful(p *plan.Plan, m *plan.Metric, r sdk.Randomizer, d *sdk.Description) (sdk.Stateful, error) {
	if !d.Stateful {
		return nil, nil
	}
	if p.Pooled() {
		return nil, refuse(plan.ErrInvalid, "metric %q: randomizer %q is stateful (it keeps per-user state across periods), which only separate travel supports; the plan's travel is %q", m.Name, m.Plugin, p.Travel)
	}
	if d.Input != sdk.InputCategorical {
		return nil, refuse(ErrPluginUnavailable, "metric %q: randomizer %q is stateful with %v inputs; this client carries only categorical values of state metrics forward", m.Name, m.Plugin, d.Input)
	}
	st, ok := r.(sdk.Stateful)
	if !ok {
		return nil, refuse(ErrPluginUnavailable, "metric %q: randomizer %q says it is stateful but has no Step", m.Name, m.Plugin)
	}
	return st, nil
}

// loadPlan fetches, authenticates and verifies the plan, waiting for the
// collector at most planTimeout. When the collector cannot be reached in
// time (or answers an error) it falls back to cached, the last verified
// plan cached in DataDir as openCachedPlan returned it (nil: none),
// verified again, and returns the fetch's error as fetchErr with it; a
// plan the collector serves but this app refuses (its signature included)
// is never replaced by the cached one. An answer saying that the
// shuffler requires admission tokens fails with ErrCredentialRequired
// when the Provider has no Config.Credential.
func (p *Provider) loadPlan(ctx context.Context, cached *plan.Plan) (v *verifiedPlan, fetchErr, err error) {
	fctx, cancel := context.WithTimeout(ctx, p.planTimeout(ctx))
	pl, sp, fetchErr := fetchPlan(fctx, p.hc, p.planBase, p.trust)
	cancel()
	if fetchErr == nil && sp.Admission == AdmissionTokens && p.cfg.Credential == nil {
		return nil, nil, fmt.Errorf("%w (GET %s answered %s: %s)", ErrCredentialRequired, p.planBase, AdmissionHeader, sp.Admission)
	}
	if fetchErr == nil {
		v, err := verifyPlan(ctx, pl, p.cfg.MaxEps0, p.cache)
		if err != nil {
			return nil, nil, err
		}
		writeCachedPlan(p.cfg.DataDir, p.planBase, sp)
		return v, nil, nil
	}
	if !errors.Is(fetchErr, ErrPlanUnavailable) || ctx.Err() != nil || cached == nil {
		return nil, nil, fetchErr
	}
	if v, err = verifyPlan(ctx, cached, p.cfg.MaxEps0, p.cache); err != nil {
		return nil, nil, fmt.Errorf("%w (cached plan: %w)", fetchErr, err)
	}
	return v, fetchErr, nil
}

// openCachedPlan returns the plan cached in DataDir for the collector at
// planBase, authenticated (planTrust.open) but not verified: nil when none
// is cached, and nil with a warning when the cache file does not decode or
// its plan does not authenticate under the pinned key (a corrupt file, a
// tampered plan, a plan signed under a key this app no longer pins). Such
// a cache is treated as absent, never reported by and never a reason to
// fail: the next plan fetched replaces it.
func (p *Provider) openCachedPlan() *plan.Plan {
	if p.cfg.DataDir == "" {
		return nil
	}
	sp, err := readCachedPlan(p.cfg.DataDir, p.planBase)
	if sp == nil && err == nil {
		return nil
	}
	var pl *plan.Plan
	if err == nil {
		pl, err = p.trust.open(sp)
	}
	if err != nil {
		p.log.Warn("blanket cached plan ignored: it does not decode or authenticate", "file", filepath.Join(p.cfg.DataDir, planCacheFile(p.planBase)), "error", err)
		return nil
	}
	return pl
}

// unanswered reports whether err is a request the server did not answer:
// a transport error (refused, reset, unreachable) or a timeout.
func unanswered(err error) bool {
	var ue *url.Error
	return err != nil && (errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded))
}

// writeFileAtomic writes data to path through a synced temporary file and
// a rename, so that a crash leaves the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkMessageSize refuses a pooled plan whose sealed messages could not
// travel: more metrics than a message holds, or a message (every metric's
// report with joint travel, the largest with parallel travel) over the
// sealed size an envelope may carry. A report of variable length
// (ReportBytes 0) is not checked here.
func checkMessageSize(p *plan.Plan, order []*metricState, reportBytes []int) error {
	if len(order) > report.MaxParts {
		return refuse(ErrPluginUnavailable, "%s travel with %d metrics; a message holds at most %d", p.Travel, len(order), report.MaxParts)
	}
	size := 0
	for _, rb := range reportBytes {
		if p.Travel == string(declare.TravelJoint) {
			size += rb
		} else {
			size = max(size, rb)
		}
	}
	parts := 1
	if p.Travel == string(declare.TravelJoint) {
		parts = len(order)
	}
	if sealed := size + report.MessageOverhead(parts) + report.SealOverhead; sealed > report.MaxSealedLen {
		return refuse(ErrPluginUnavailable, "%s travel: a sealed message would take %d bytes, over the %d an envelope carries", p.Travel, sealed, report.MaxSealedLen)
	}
	return nil
}

// resolve returns the metric name of kind want (its input kind and, for
// a real metric, its aggregate), or an error wrapping ErrUnknownMetric or
// ErrWrongKind.
func (v *verifiedPlan) resolve(name string, want instrumentKind) (*metricState, error) {
	ms := v.metrics[name]
	switch {
	case ms == nil:
		return nil, fmt.Errorf("%w: %q (the plan has %s)", ErrUnknownMetric, name, v.names())
	case ms.kind != want.input:
		return nil, fmt.Errorf("%w: metric %q takes %v values (plugin %q), the instrument records %v values", ErrWrongKind, name, ms.kind, ms.binding.Plugin, want)
	case ms.agg != want.agg:
		return nil, fmt.Errorf("%w: metric %q reports the %s of a period's values (plan aggregate %q), the instrument records their %s: use Meter.%s", ErrWrongKind, name, ms.agg, ms.agg, want.agg, instrumentFor(ms.agg))
	}
	return ms, nil
}

// instrumentFor returns the Meter method of a real metric's aggregate.
func instrumentFor(agg string) string {
	if agg == plan.AggregateMean {
		return "Mean"
	}
	return "Sum"
}

// names lists the plan's metric names, for error messages.
func (v *verifiedPlan) names() string {
	var b []byte
	for i, m := range v.plan.Metrics {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%q", m.Name)
	}
	return string(b)
}
