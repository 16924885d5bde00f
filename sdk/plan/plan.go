// Package plan is the privacy plan: the target central (eps, delta), the
// minimum batch size, the metrics with their randomizers, and, once
// calibrated by the accountant (package plan/accounting), every metric's
// local budget eps0. The collector publishes the calibrated plan; every app
// fetches it, checks it against its own limits, and reports by it. This
// package reads, checks and writes plans and links no accountant.
//
//	p, err := plan.Load("plan.yaml")
//	err = accounting.Calibrate(ctx, p, opener) // fills Eps0 and Guarantee
//	out, _ := p.YAML()
package plan

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// ErrInvalid reports a plan that breaks a rule; the message names the field.
var ErrInvalid = errors.New("plan: invalid")

// MaxFloor bounds a plan's floor: a quarter of the largest batch
// (report.MaxBatchReports), so that draws and the apps' reports fit in one.
const MaxFloor = report.MaxBatchReports / 4

// Version is the plan format version this package reads and writes.
const Version = 1

// Plan is a privacy plan.
type Plan struct {
	// Version is the format version. Defaults to 1.
	Version int `yaml:"version" json:"version"`
	// Target is the per-user central guarantee to meet. Required.
	Target Target `yaml:"target" json:"target"`
	// NMin is the smallest batch the shuffler releases. Required.
	NMin int `yaml:"n_min" json:"n_min"`
	// Travel is how a user's metrics travel: "joint", "parallel" or
	// "separate" (see declare.Travel). Defaults to "separate".
	Travel string `yaml:"travel,omitempty" json:"travel,omitempty"`
	// Period is the length of a reporting period, a Go duration such as
	// "24h" (the default). Periods are UTC and start at multiples of the
	// period since the Unix epoch; a user sends at most one report per
	// metric (separate travel) or one message (joint, parallel) per period.
	// Validate writes it in canonical form.
	Period string `yaml:"period,omitempty" json:"period,omitempty"`
	// Horizon is the number of consecutive periods the target covers: the
	// plan's (eps, delta) holds per user for every window of Horizon
	// periods. Defaults to 1.
	Horizon int `yaml:"horizon,omitempty" json:"horizon,omitempty"`
	// Grace is how many periods after a period ends its reports may
	// still arrive: the SDK seals and sends a closed period's report
	// until then (an app used now and then sends it at its next start),
	// and the shuffler keeps the period's pools open as long. Defaults to
	// DefaultGrace (GraceLength). Longer keeps the reports of apps used
	// less often; the last n_min reports of each period wait that long.
	// Setting it changes the plan's digest (its epoch): SDKs older than
	// the field would compute another epoch and have their reports
	// refused, so set it only for apps on SDKs that know it.
	Grace int `yaml:"grace,omitempty" json:"grace,omitempty"`
	// MaxFakeFraction is the largest fraction of any batch's valid
	// reports that may be adversarial: fake reports sent with bought or
	// stolen credentials, whose values the adversary knows. Every
	// guarantee is then computed for the honest floor of a batch of n,
	// n - floor(MaxFakeFraction n) reports (HonestReports; the proof is at
	// the top of accountant/declare/fakes.go): calibration at the honest
	// floor of NMin, each batch's guarantee and the horizon's at the
	// honest floor of their batches. Defaults to 0: every valid report is
	// honest, as before the field. Must be in [0, 1). Setting it changes
	// the plan's digest (its epoch): SDKs older than the field would
	// compute another epoch and have their reports refused.
	MaxFakeFraction float64 `yaml:"max_fake_fraction,omitempty" json:"max_fake_fraction,omitempty"`
	// Floor is how many draws of a metric's blanket distribution the
	// shuffler adds to every batch it releases, sealed like the apps'
	// reports and shuffled among them (docs/accounting.md §13). They never
	// count toward NMin. With them each batch has a second guarantee, its
	// floor, that holds whatever the other reports are, fakes included.
	// Defaults to 0: no draws. Separate travel only, and every metric's
	// randomizer must draw from its blanket (sdk.BlanketSampler). Setting
	// it changes the plan's digest (its epoch), as with grace.
	Floor int `yaml:"floor,omitempty" json:"floor,omitempty"`
	// Metrics are the plan's metrics. Required, at least one.
	Metrics []Metric `yaml:"metrics" json:"metrics"`
	// Guarantee is the per-user guarantee at NMin (at its honest floor
	// with MaxFakeFraction), set by accounting.Calibrate.
	Guarantee *Guarantee `yaml:"guarantee,omitempty" json:"guarantee,omitempty"`
	// CollectorKeys is the collector's report key schedule, set by the
	// collector when it publishes the plan: every HPKE public key whose
	// private half it holds, by the first reporting period each seals
	// (keys.go). It is not part of the plan's epoch (EpochDigest).
	CollectorKeys []CollectorKey `yaml:"collector_keys,omitempty" json:"collector_keys,omitempty"`
}

// Target is a central (eps, delta) target.
type Target struct {
	// Eps is the target eps. Required, > 0.
	Eps float64 `yaml:"eps" json:"eps"`
	// Delta is the target delta. Required, in (0,1).
	Delta float64 `yaml:"delta" json:"delta"`
}

// Metric is one metric of a plan.
type Metric struct {
	// Name identifies the metric, e.g. "ui/screen". Required: letters,
	// digits and . _ - / only.
	Name string `yaml:"name" json:"name"`
	// Plugin is the randomizer's name, e.g. "krr". Required.
	Plugin string `yaml:"plugin" json:"plugin"`
	// Categories are the categories of a categorical metric.
	Categories []string `yaml:"categories,omitempty" json:"categories,omitempty"`
	// Other is the catch-all bucket for values not in Categories.
	Other string `yaml:"other,omitempty" json:"other,omitempty"`
	// Lo and Hi are the range of a real-valued metric.
	Lo float64 `yaml:"lo,omitempty" json:"lo,omitempty"`
	Hi float64 `yaml:"hi,omitempty" json:"hi,omitempty"`
	// Aggregate is how a real-valued metric's values of one reporting
	// period make the period's one value, which is then clamped to
	// [Lo, Hi] and randomized: AggregateSum (their total) or
	// AggregateMean (their mean). Defaults to AggregateSum; Validate
	// writes the default as "" (omitted), so that spelling it out leaves
	// the plan's digest unchanged. A categorical metric takes none
	// (accounting.Calibrate refuses it; Validate cannot tell, it does not open the
	// plugin).
	Aggregate string `yaml:"aggregate,omitempty" json:"aggregate,omitempty"`
	// Params are plugin-specific parameters.
	Params map[string]string `yaml:"params,omitempty" json:"params,omitempty"`
	// Weight is the metric's share of the budget (see declare.Travel).
	// Defaults to 1.
	Weight float64 `yaml:"weight,omitempty" json:"weight,omitempty"`
	// Version is the plugin's report-format version, set by accounting.Calibrate.
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	// Eps0 is the metric's local budget, set by accounting.Calibrate.
	Eps0 float64 `yaml:"eps0,omitempty" json:"eps0,omitempty"`
	// Delta is the metric's share of delta used for its batches' central
	// guarantee (separate travel splits it; otherwise the whole target).
	Delta float64 `yaml:"delta,omitempty" json:"delta,omitempty"`
}

// The aggregates of a real-valued metric (Metric.Aggregate).
const (
	// AggregateSum makes a period's value the total of the values an app
	// recorded in it (the default).
	AggregateSum = "sum"
	// AggregateMean makes a period's value the mean of the values an app
	// recorded in it (e.g. the mean latency of its requests that day).
	AggregateMean = "mean"
)

// Aggregation returns the metric's aggregate: Aggregate, or AggregateSum
// when it is unset.
func (m *Metric) Aggregation() string {
	if m.Aggregate == "" {
		return AggregateSum
	}
	return m.Aggregate
}

// Guarantee is a computed central guarantee.
type Guarantee struct {
	// Eps and Delta are the per-user central guarantee at NMin, across
	// every metric (over Rounds periods when set), with at most
	// MaxFakeFraction of each batch's reports fake.
	Eps   float64 `yaml:"eps" json:"eps"`
	Delta float64 `yaml:"delta" json:"delta"`
	// Rule describes how the budget was allocated.
	Rule string `yaml:"rule" json:"rule"`
	// Rounds is the number of reporting periods the guarantee covers
	// (omitted: one).
	Rounds int `yaml:"rounds,omitempty" json:"rounds,omitempty"`
	// Honest is the number of honest reports of a batch of NMin the
	// guarantee was calibrated at, HonestReports(NMin), when
	// MaxFakeFraction is set (omitted otherwise: NMin). A plan whose
	// Honest disagrees with its own HonestReports(NMin), such as a
	// calibrated plan given a max_fake_fraction by hand, is not
	// Calibrated: its eps0 and Guarantee would state more than holds.
	Honest int `yaml:"honest,omitempty" json:"honest,omitempty"`
}

// Config returns the randomizer configuration of m.
func (m *Metric) Config() sdk.Config {
	return sdk.Config{Categories: m.Categories, Other: m.Other, Lo: m.Lo, Hi: m.Hi, Params: m.Params}
}

// Opener opens a configured randomizer by plugin name (plugin.Open with the
// built-ins, or a test double).
type Opener func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error)

// Parse decodes a plan from YAML (JSON is YAML too) strictly: unknown
// fields are errors. It validates the plan.
func Parse(data []byte) (*Plan, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// yaml truncates a fraction into an int field (1.5 -> 1): reject it.
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err == nil {
		for _, k := range []string{"n_min", "horizon", "grace", "floor"} {
			if f, ok := top[k].(float64); ok && f != math.Trunc(f) {
				return nil, invalid("%s = %v, must be a whole number", k, f)
			}
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Load reads and parses a plan file.
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks the plan's fields; errors name the field and the rule.
func (p *Plan) Validate() error {
	if p.Version == 0 {
		p.Version = Version
	}
	if p.Version != Version {
		return invalid("version = %d, this build reads version %d", p.Version, Version)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !finite(p.Target.Eps) || !(p.Target.Eps > 0) {
		return invalid("target.eps = %v, must be finite and > 0", p.Target.Eps)
	}
	if !finite(p.Target.Delta) || !(p.Target.Delta > 0 && p.Target.Delta < 1) {
		return invalid("target.delta = %v, must be in (0,1)", p.Target.Delta)
	}
	if p.NMin < 2 {
		return invalid("n_min = %d, must be >= 2 (a batch of one is not shuffled)", p.NMin)
	}
	switch declare.Travel(p.Travel) {
	case "", declare.TravelJoint, declare.TravelParallel, declare.TravelSeparate:
	default:
		return invalid("travel = %q, must be joint, parallel or separate", p.Travel)
	}
	if p.Period != "" {
		d, err := time.ParseDuration(p.Period)
		if err != nil {
			return invalid("period = %q, must be a duration such as 24h or 1h30m", p.Period)
		}
		if d < MinPeriod || d > MaxPeriod || d%time.Second != 0 {
			return invalid("period = %q, must be a whole number of seconds in [%v, %v]", p.Period, MinPeriod, MaxPeriod)
		}
		p.Period = d.String()
	}
	if !declare.ValidFakeFraction(p.MaxFakeFraction) {
		return invalid("max_fake_fraction = %v, must be a fraction in [0, 1) of a batch's reports that may be fake (0 or omitted: none)", p.MaxFakeFraction)
	}
	if p.Horizon < 0 || p.Horizon > declare.MaxRounds {
		return invalid("horizon = %d, must be in [1, %d] periods (0 or omitted: 1)", p.Horizon, declare.MaxRounds)
	}
	if p.Floor < 0 || p.Floor > MaxFloor {
		return invalid("floor = %d, must be in [0, %d] blanket draws per batch (0 or omitted: none)", p.Floor, MaxFloor)
	}
	if p.Floor > 0 && declare.Travel(p.Travel) != "" && declare.Travel(p.Travel) != declare.TravelSeparate {
		return invalid("floor = %d with travel = %s: the shuffler adds blanket draws under separate travel only (a %s message's blanket is not sampled yet); remove floor or travel", p.Floor, p.Travel, p.Travel)
	}
	if p.Grace < 0 || time.Duration(p.Grace) > MaxGrace/p.PeriodLength() {
		return invalid("grace = %d, must be in [1, %d] periods of %v (at most %v; 0 or omitted: %d)", p.Grace, MaxGrace/p.PeriodLength(), p.PeriodLength(), MaxGrace, DefaultGrace)
	}
	if len(p.Metrics) == 0 {
		return invalid("metrics: at least one metric is required")
	}
	seen := map[string]bool{}
	for i := range p.Metrics {
		m := &p.Metrics[i]
		if !nameRE.MatchString(m.Name) {
			return invalid("metrics[%d].name = %q, must match %s", i, m.Name, nameRE)
		}
		// The name is a URL path (GET /v1/metrics/{name}): a segment that
		// is empty, "." or ".." would be cleaned away by clients and
		// routers, and the metric could not be read.
		for _, seg := range strings.Split(m.Name, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return invalid("metrics[%d].name = %q has a path segment %q: segments between slashes must be non-empty and not . or ..", i, m.Name, seg)
			}
		}
		if seen[m.Name] {
			return invalid("metrics[%d].name = %q appears twice", i, m.Name)
		}
		seen[m.Name] = true
		if m.Plugin == "" {
			return invalid("metric %q: plugin is required", m.Name)
		}
		if !finite(m.Weight) || m.Weight < 0 {
			return invalid("metric %q: weight = %v, must be finite and >= 0", m.Name, m.Weight)
		}
		if !finite(m.Eps0) || m.Eps0 < 0 || m.Eps0 > declare.MaxEps0 {
			return invalid("metric %q: eps0 = %v, must be in [0, %g]", m.Name, m.Eps0, declare.MaxEps0)
		}
		if !finite(m.Lo) || !finite(m.Hi) {
			return invalid("metric %q: lo and hi must be finite", m.Name)
		}
		switch m.Aggregate {
		case "", AggregateSum:
			m.Aggregate = "" // canonical: the default is omitted
		case AggregateMean:
		default:
			return invalid("metric %q: aggregate = %q, must be %q or %q (omitted: %q)", m.Name, m.Aggregate, AggregateSum, AggregateMean, AggregateSum)
		}
	}
	return nil
}

// HonestReports returns the honest floor of a batch of n valid reports
// under the plan's MaxFakeFraction (declare.HonestFloor): the number of
// reports every guarantee of such a batch is computed for. It is n when
// MaxFakeFraction is 0.
func (p *Plan) HonestReports(n int) int { return declare.HonestFloor(n, p.MaxFakeFraction) }

// Calibrated reports whether every metric has an eps0 and the plan a
// Guarantee calibrated under its own MaxFakeFraction.
func (p *Plan) Calibrated() bool {
	for _, m := range p.Metrics {
		if !(m.Eps0 > 0) {
			return false
		}
	}
	return p.Guarantee != nil && p.Guarantee.Honest == p.calibratedHonest()
}

// calibratedHonest is the Guarantee.Honest that Calibrate sets: the honest
// floor of NMin under MaxFakeFraction, 0 without it.
func (p *Plan) calibratedHonest() int {
	if p.MaxFakeFraction == 0 {
		return 0
	}
	return p.HonestReports(p.NMin)
}

// Metric returns the metric named name, or nil.
func (p *Plan) Metric(name string) *Metric {
	for i := range p.Metrics {
		if p.Metrics[i].Name == name {
			return &p.Metrics[i]
		}
	}
	return nil
}

// PoolPrefix starts the name of a pooled travel mode's shuffler pool. It
// cannot start a metric name, so a pool never collides with a metric.
const PoolPrefix = "@"

// Pooled reports whether the plan's metrics travel together in one
// shuffler pool: joint travel (a message carries every metric) and
// parallel travel (a message carries one metric chosen at random). Their
// batches mix the plan's metrics, as the accountant's joint and parallel
// compositions assume; separate travel pools each metric on its own.
func (p *Plan) Pooled() bool {
	t := declare.Travel(p.Travel)
	return t == declare.TravelJoint || t == declare.TravelParallel
}

// Pool returns the shuffler pool that reports of metric name go to: the
// metric itself with separate travel, PoolPrefix + travel ("@joint",
// "@parallel") with pooled travel.
func (p *Plan) Pool(name string) string {
	if p.Pooled() {
		return PoolPrefix + p.Travel
	}
	return name
}

// Pools returns the plan's shuffler pools: one per metric with separate
// travel, one in all with pooled travel.
func (p *Plan) Pools() []string {
	if p.Pooled() {
		return []string{p.Pool("")}
	}
	out := make([]string, len(p.Metrics))
	for i, m := range p.Metrics {
		out[i] = m.Name
	}
	return out
}

// MetricIndex returns the index of metric name in p.Metrics, or -1.
func (p *Plan) MetricIndex(name string) int {
	for i := range p.Metrics {
		if p.Metrics[i].Name == name {
			return i
		}
	}
	return -1
}

// Weights returns the metrics' selection probabilities of parallel travel:
// their weights (0 meaning 1) normalised to sum to 1.
func (p *Plan) Weights() []float64 {
	ws := make([]float64, len(p.Metrics))
	var sum float64
	for i, m := range p.Metrics {
		ws[i] = m.Weight
		if ws[i] == 0 {
			ws[i] = 1
		}
		sum += ws[i]
	}
	for i := range ws {
		ws[i] /= sum
	}
	return ws
}

// EpochLen is the length of an epoch id: hex digits of the plan's digest.
const EpochLen = 16

// Epoch returns the plan's epoch id: the first EpochLen hex digits of
// EpochDigest. Statistics of different epochs never merge, and reports
// carry the epoch of the plan they were sealed under (report.Binding,
// report.PeriodPoolKey).
func (p *Plan) Epoch() string { return p.EpochDigest()[:EpochLen] }

// EpochDigest returns the digest (as Digest) of the plan without its
// collector key schedule: what reports pooled, opened and merged together
// must share (metrics, plugins, versions, eps0, period, travel). A
// rotation of the collector's key changes the plan's Digest but not its
// EpochDigest, so it splits no period's crowd across two epochs' pools;
// the key a report is sealed to is bound by the seal itself
// (report.Seal). An app tags what it stages with it, so that a rotation
// does not drop a period's values.
func (p *Plan) EpochDigest() string {
	c := *p
	c.CollectorKeys = nil
	return c.Digest()
}

// Bindings returns the binding each metric's reports are sealed under in
// this plan, in plan order: its name, plugin, version and eps0 as
// calibrated, and the plan's epoch.
func (p *Plan) Bindings() []report.Binding {
	epoch := p.Epoch()
	bs := make([]report.Binding, len(p.Metrics))
	for i, m := range p.Metrics {
		bs[i] = report.Binding{Metric: m.Name, Plugin: m.Plugin, Version: m.Version, Eps0: m.Eps0, Epoch: epoch}
	}
	return bs
}

// Binding returns the binding a report of metric name is sealed under in
// this plan (see Bindings); for a name not in the plan, the name and epoch
// alone.
func (p *Plan) Binding(name string) report.Binding {
	if i := p.MetricIndex(name); i >= 0 {
		return p.Bindings()[i]
	}
	return report.Binding{Metric: name, Epoch: p.Epoch()}
}

// PoolBinding returns the binding the messages of a pooled plan are
// sealed under for period (report.PoolBinding over Bindings, each of
// period: the period is inside the digest of the metrics' bindings, so it
// cannot be set afterwards as on a metric's Binding).
func (p *Plan) PoolBinding(period report.Period) report.Binding {
	bs := p.Bindings()
	for i := range bs {
		bs[i].Period = period
	}
	return report.PoolBinding(p.Pool(""), p.Travel, bs)
}

// YAML returns the plan as YAML.
func (p *Plan) YAML() ([]byte, error) { return yaml.Marshal(p) }

// JSON returns the plan as indented JSON.
func (p *Plan) JSON() ([]byte, error) { return json.MarshalIndent(p, "", "  ") }

// Digest returns a hex SHA-256 of the plan's canonical JSON, the key
// schedule included: clients and the collector use it to tell plan
// versions apart (the ETag of GET /v1/plan). Fields added to the
// format later (period, horizon, grace, max_fake_fraction, a metric's
// aggregate) are omitted while unset (a max_fake_fraction of 0 or -0
// too), and Validate unsets an aggregate of "sum", so that a plan written
// before them keeps its digest, hence its epoch.
func (p *Plan) Digest() string {
	b, _ := json.Marshal(p)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
