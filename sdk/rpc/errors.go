package rpc

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/blanket-dp/blanket/sdk"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail by which a
// plugin names the sentinel error behind a gRPC status.
const ErrorDomain = "blanket.randomizer.v1"

// wireErrors maps each sentinel that crosses the plugin boundary to its
// ErrorInfo reason and gRPC code. Order matters only for an error wrapping
// several sentinels: the first match wins.
var wireErrors = []struct {
	err    error
	reason string
	code   codes.Code
}{
	{sdk.ErrBadInput, "BAD_INPUT", codes.InvalidArgument},
	{sdk.ErrBadEps0, "BAD_EPS0", codes.InvalidArgument},
	{sdk.ErrBadReport, "BAD_REPORT", codes.InvalidArgument},
	{sdk.ErrBadConfig, "BAD_CONFIG", codes.InvalidArgument},
	{sdk.ErrBadStatistic, "BAD_STATISTIC", codes.InvalidArgument},
	{sdk.ErrBadState, "BAD_STATE", codes.InvalidArgument},
	{sdk.ErrNotConfigured, "NOT_CONFIGURED", codes.FailedPrecondition},
}

// toStatus converts an error of a served sdk.Randomizer into a gRPC status error
// whose message is err.Error() and which names the wrapped sentinel in an
// ErrorInfo detail. Context errors become codes.Canceled and
// codes.DeadlineExceeded; anything else codes.Unknown.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err // already a status, e.g. from a nested client
	}
	for _, w := range wireErrors {
		if errors.Is(err, w.err) {
			st := status.New(w.code, err.Error())
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: w.reason, Domain: ErrorDomain}); derr == nil {
				st = d
			}
			return st.Err()
		}
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// PluginError is an error returned across the plugin boundary: the gRPC
// status a plugin (or the transport) answered with. It unwraps to the sdk
// sentinel its ErrorInfo names, or to context.Canceled,
// context.DeadlineExceeded or errors.ErrUnsupported (UNIMPLEMENTED) for
// those codes, so errors.Is works on the host as it does in process.
type PluginError struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Reason is the ErrorInfo reason in ErrorDomain, e.g. "BAD_INPUT", or ""
	// when the status carries none.
	Reason string
	// Message is the plugin's error message, for an sdk sentinel the same
	// text the randomizer returns in process.
	Message string

	st       *status.Status
	sentinel error
}

// Error returns the plugin's message.
func (e *PluginError) Error() string { return e.Message }

// Unwrap returns the sentinel error named by Reason or implied by Code, or
// nil.
func (e *PluginError) Unwrap() error { return e.sentinel }

// GRPCStatus returns the status, so that status.Code and status.FromError
// see through wrapping.
func (e *PluginError) GRPCStatus() *status.Status { return e.st }

// fromStatus converts an error returned by a generated client stub into a
// *PluginError; errors that are not gRPC statuses pass through.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &PluginError{Code: st.Code(), Message: st.Message(), st: st}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != ErrorDomain {
			continue
		}
		e.Reason = info.GetReason()
		for _, w := range wireErrors {
			if w.reason == e.Reason {
				e.sentinel = w.err
				break
			}
		}
		break
	}
	if e.sentinel == nil {
		switch e.Code {
		case codes.Canceled:
			e.sentinel = context.Canceled
		case codes.DeadlineExceeded:
			e.sentinel = context.DeadlineExceeded
		case codes.Unimplemented:
			e.sentinel = errors.ErrUnsupported
		}
	}
	return e
}
