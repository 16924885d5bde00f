package client

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// Meter hands out the instruments of one scope, like an OpenTelemetry
// Meter. Its zero value and a Meter of a nil Provider record nothing.
type Meter struct {
	p     *Provider
	scope string
}

// metricName returns the plan metric name of instrument name.
func (m *Meter) metricName(name string) string {
	if m.scope == "" {
		return name
	}
	return m.scope + "/" + name
}

// instrument is what Categorical, Sum and Mean share: the metric name,
// the kind of values it records and, for a real-valued metric, the
// aggregate of a period's values it stands for (plan.Metric.Aggregate;
// "" for a categorical metric). The metric is looked up in the Provider's
// current plan at every Record, so that an instrument follows a new plan
// (Provider.RefreshPlan).
type instrument struct {
	p    *Provider
	name string
	want instrumentKind
}

// instrumentKind is what an instrument records: an input kind and, for
// real values, an aggregate (plan.AggregateSum or plan.AggregateMean).
type instrumentKind struct {
	input sdk.InputKind
	agg   string
}

func (k instrumentKind) String() string {
	if k.agg == "" {
		return k.input.String()
	}
	return k.input.String() + " (" + k.agg + ")"
}

func (m *Meter) instrument(name string, kind sdk.InputKind, agg string) instrument {
	return instrument{p: m.p, name: m.metricName(name), want: instrumentKind{kind, agg}}
}

// Name returns the plan metric name the instrument reports.
func (in *instrument) Name() string { return in.name }

// off reports whether the instrument records nothing: a nil or ModeOff
// Provider, or one without a plan (ModeLocal with none cached).
func (in *instrument) off() bool {
	return in.p == nil || in.p.mode == ModeOff || in.p.currentPlan() == nil
}

// Enabled reports whether Record would take a value: the Provider is in
// ModeLocal or ModeOn with a plan, the metric is in it with a matching kind,
// and, with parallel travel, the current period drew this metric. An app
// can skip computing an expensive value when it is false. Like Record, it
// does no disk I/O, except a period's first call with parallel travel,
// which reads or makes the period's draw.
func (in *instrument) Enabled(ctx context.Context) bool {
	return !in.off() && in.p.enabled(ctx, in.name, in.want)
}

// Err returns the error every Record of this instrument returns because
// its metric is not in the (current) plan or is of another kind, or nil.
func (in *instrument) Err() error {
	if in.off() {
		return nil
	}
	_, err := in.p.currentPlan().resolve(in.name, in.want)
	return err
}

func (in *instrument) record(ctx context.Context, category string, x float64) error {
	if in.off() {
		return nil
	}
	return in.p.record(ctx, in.name, in.want, category, x)
}

// Categorical records values of a categorical metric (plugins krr,
// hadamard, rappor, or any with categorical input).
type Categorical struct{ instrument }

// Categorical returns the instrument of the categorical plan metric name.
// It never fails: when the metric is not in the plan or is not categorical,
// every Record returns an error wrapping ErrUnknownMetric or ErrWrongKind
// (Err returns it at once). In ModeOff it records nothing and never fails.
func (m *Meter) Categorical(name string) *Categorical {
	return &Categorical{m.instrument(name, sdk.InputCategorical, "")}
}

// Record takes v as the metric's value for the current reporting period,
// replacing the period's earlier value. It returns at once, without disk
// I/O: the value reaches the outbox within Config.StageInterval (see the
// package doc, Durability). The period's last value is randomized
// at the plan's eps0, sealed and sent once the period has closed (see the
// package doc). A v outside the plan's categories goes to the metric's
// "other" bucket, or fails with ErrBadValue when it has none.
func (c *Categorical) Record(ctx context.Context, v string) error {
	return c.record(ctx, v, 0)
}

// Sum records values of a real-valued metric whose period value is their
// total (plan aggregate "sum", the default; plugins summation, laplace, or
// any with real input).
type Sum struct{ instrument }

// Sum returns the instrument of the real-valued plan metric name, with the
// same error rules as Categorical; a metric whose plan aggregate is "mean"
// is of another kind (ErrWrongKind): record it with Mean.
func (m *Meter) Sum(name string) *Sum {
	return &Sum{m.instrument(name, sdk.InputReal, plan.AggregateSum)}
}

// Record adds v to the metric's total for the current reporting period; it
// returns at once, as Categorical.Record does. Once the period has closed, its total, clamped
// to the plan's [lo, hi], is randomized at the plan's eps0, sealed and sent
// (see the package doc). NaN and infinities fail with ErrBadValue.
func (s *Sum) Record(ctx context.Context, v float64) error {
	return s.record(ctx, "", v)
}

// Mean records values of a real-valued metric whose period value is their
// mean (plan aggregate "mean"; plugins laplace, summation, or any with real
// input), such as the mean latency of an app's requests in the period.
type Mean struct{ instrument }

// Mean returns the instrument of the real-valued plan metric name whose
// plan aggregate is "mean", with the same error rules as Categorical; a
// metric of the default aggregate, "sum", is of another kind
// (ErrWrongKind): record it with Sum.
func (m *Meter) Mean(name string) *Mean {
	return &Mean{m.instrument(name, sdk.InputReal, plan.AggregateMean)}
}

// Record adds v to the metric's values of the current reporting period; it
// returns at once, as Categorical.Record does. Once the period has closed, the mean of its
// values (their total over their number, all staged unclamped), clamped to
// the plan's [lo, hi], is randomized at the plan's eps0, sealed and sent
// (see the package doc). NaN and infinities fail with ErrBadValue.
func (mn *Mean) Record(ctx context.Context, v float64) error {
	return mn.record(ctx, "", v)
}
