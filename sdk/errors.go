package sdk

import "errors"

// Sentinel errors. Every error returned by a Randomizer wraps one of them, so
// that callers (and the plugin host, after mapping gRPC status codes back)
// can test with errors.Is.
var (
	// ErrBadInput reports an input value a randomizer cannot take: a
	// category outside its domain (and no "other" bucket), a real value that
	// is NaN or infinite, or a batch of the wrong kind.
	ErrBadInput = errors.New("sdk: bad input")
	// ErrBadEps0 reports a local budget outside the randomizer's supported
	// range (Description.Eps0Min, Eps0Max), or NaN or infinite.
	ErrBadEps0 = errors.New("sdk: eps0 out of range")
	// ErrBadReport reports bytes that are not a valid report. Accumulate
	// counts such reports in Statistic.Malformed instead of failing.
	ErrBadReport = errors.New("sdk: malformed report")
	// ErrBadConfig reports an invalid configuration: options out of range,
	// duplicate categories, unknown parameters.
	ErrBadConfig = errors.New("sdk: bad configuration")
	// ErrBadStatistic reports a statistic that does not belong to the
	// randomizer (another plugin, configuration or eps0), is internally
	// inconsistent, or cannot be estimated from (no valid reports).
	ErrBadStatistic = errors.New("sdk: bad statistic")

	// Host and protocol errors. An error of a plugin process that crashed or
	// timed out wraps ErrPluginFailed and, where it applies, the cause (a
	// *rpc.PluginError, context.DeadlineExceeded, plugin.ErrChecksumsDoNotMatch).

	// ErrPluginNotFound reports a plugin name that is neither a built-in
	// passed with plugin.WithBuiltins nor an executable blanket-<name> in the
	// plugin directory.
	ErrPluginNotFound = errors.New("sdk: plugin not found")
	// ErrPluginFailed reports a plugin process that could not be started
	// (checksum mismatch, failed handshake, start timeout), crashed again
	// after a restart, did not answer within the call timeout, or broke the
	// protocol (a wrong name or configuration digest, a malformed answer).
	ErrPluginFailed = errors.New("sdk: plugin failed")
	// ErrNotConfigured reports an RPC other than Configure sent to a plugin
	// process before Configure.
	ErrNotConfigured = errors.New("sdk: plugin not configured")
	// ErrClosed reports a call on a host.Plugin after Close.
	ErrClosed = errors.New("sdk: plugin closed")
)
