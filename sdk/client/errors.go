package client

import "errors"

// Errors. NewProvider's refusals of a plan wrap ErrPlanRefused and one of the
// more specific sentinels, so that both errors.Is(err, ErrPlanRefused) and,
// say, errors.Is(err, ErrEps0AboveCeiling) hold.
var (
	// ErrBadConfig reports an invalid Config field; the message names it.
	ErrBadConfig = errors.New("client: bad configuration")
	// ErrPlanUnavailable reports that the plan could not be fetched (and no
	// cached plan was usable).
	ErrPlanUnavailable = errors.New("client: plan unavailable")
	// ErrPlanRefused reports a plan this app will not report by.
	ErrPlanRefused = errors.New("client: plan refused")
	// ErrEps0AboveCeiling reports a plan metric whose eps0 exceeds
	// Config.MaxEps0.
	ErrEps0AboveCeiling = errors.New("client: eps0 above the local ceiling")
	// ErrPluginUnavailable reports a plan metric whose randomizer this app
	// cannot open, or whose report format version differs from the plan's.
	ErrPluginUnavailable = errors.New("client: randomizer unavailable")
	// ErrNotCalibrated reports a plan without eps0 for every metric.
	ErrNotCalibrated = errors.New("client: plan is not calibrated")
	// ErrNoCollectorKey reports a plan without a valid collector key
	// schedule (wrapping plan.ErrBadKeySchedule), or a period no key of
	// the schedule seals.
	ErrNoCollectorKey = errors.New("client: plan has no valid collector key")
	// ErrUnknownMetric reports an instrument whose metric is not in the plan.
	ErrUnknownMetric = errors.New("client: metric not in the plan")
	// ErrWrongKind reports an instrument of the wrong kind for its metric: a
	// Categorical on a real-valued metric, a Sum or Mean on a categorical
	// one, or a Sum on a metric whose plan aggregate is "mean" (a Mean on
	// one whose aggregate is "sum").
	ErrWrongKind = errors.New("client: instrument does not match the metric's kind")
	// ErrBadValue reports a value the metric's randomizer rejects (a
	// category outside the plan's list without an "other" bucket, NaN, an
	// infinity). It also wraps sdk.ErrBadInput.
	ErrBadValue = errors.New("client: bad value")
	// ErrPeriodClosed reports an Outbox.Stage, Draw or ClosePeriod for a
	// reporting period already closed for its pool (Outbox.ClosePeriod):
	// a period never reopens, so that a user sends at most one report per
	// metric (separate travel) or one message (joint, parallel) per
	// period, whatever the clock does. A Record that meets it is dropped,
	// counted in Stats.Late and told as a Drop; it returns nil.
	ErrPeriodClosed = errors.New("client: the reporting period is closed")
	// ErrStalePeriod reports an Outbox.ClosePeriod whose values or draws
	// are no longer staged as given: a Record or another process on the
	// same outbox changed the period since it was read. The Provider
	// reads the period again.
	ErrStalePeriod = errors.New("client: the staged period changed")
	// ErrCredentialRequired reports, from NewProvider in ModeOn, a server
	// whose plan route answers that its shuffler takes only envelopes
	// with an admission token (AdmissionHeader: AdmissionTokens) to a
	// Provider without Config.Credential, which fetches none: every
	// report would be refused.
	ErrCredentialRequired = errors.New("client: the shuffler requires admission tokens: set Config.Credential")
	// ErrShutdown reports a call after Shutdown.
	ErrShutdown = errors.New("client: provider is shut down")
)
