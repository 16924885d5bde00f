package admission

import (
	"errors"
	"fmt"
	"strings"
)

// Errors. Every decoder here (ParseToken, ParsePending, Finalize's reading
// of a response) returns an error wrapping ErrMalformed on bytes that do
// not decode, and never panics.
var (
	// ErrMalformed reports bytes that do not decode: a token, a pending
	// state, a group element or scalar, a pool key.
	ErrMalformed = errors.New("admission: malformed")
	// ErrCount reports a number of items out of bounds: a request of no
	// pool key or more than MaxRequests, a response whose evaluations do
	// not match the request one for one.
	ErrCount = errors.New("admission: wrong number of items")
	// ErrDuplicate reports a pool key asked twice in one request: an
	// instance has at most one token per pool key.
	ErrDuplicate = errors.New("admission: pool key asked twice")
	// ErrRefused reports items the issuer refused (RefusedError lists
	// them).
	ErrRefused = errors.New("admission: refused by the issuer")
)

// Refusal is one item of a request the issuer refused.
type Refusal struct {
	// Index is the item's position in the request.
	Index int
	// Pool is the item's pool key.
	Pool string
	// Code is the issuer's refusal code (RefusedAlreadyGranted, ...).
	Code string
	// Reason is the issuer's explanation.
	Reason string
}

// RefusedError lists the items of a request the issuer refused; it wraps
// ErrRefused.
type RefusedError struct {
	Refusals []Refusal
}

func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Refusals))
	for i, r := range e.Refusals {
		parts[i] = fmt.Sprintf("%s: %s (%s)", r.Pool, r.Code, r.Reason)
	}
	return fmt.Sprintf("%v: %d item(s): %s", ErrRefused, len(e.Refusals), strings.Join(parts, "; "))
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }
