package mechspec

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by Parse is an *Error that wraps one
// of them, so callers can test with errors.Is.
var (
	// ErrSyntax reports a spec that does not follow the grammar.
	ErrSyntax = errors.New("mechspec: syntax error")
	// ErrUnknown reports a mechanism name that is not registered.
	ErrUnknown = errors.New("mechspec: unknown mechanism")
	// ErrParam reports a parameter that is missing, unknown, duplicated or
	// outside its domain.
	ErrParam = errors.New("mechspec: invalid parameter")
	// ErrLimit reports a spec longer than MaxLen or nested deeper than
	// MaxDepth.
	ErrLimit = errors.New("mechspec: limit exceeded")
	// ErrRegister reports an invalid Register call.
	ErrRegister = errors.New("mechspec: cannot register")
)

// Error is a parse error at a position in a spec.
type Error struct {
	// Spec is the spec being parsed.
	Spec string
	// Pos is the 0-based byte offset of the error in Spec.
	Pos int
	// Msg says what was expected or which rule was broken.
	Msg string
	// Kind is the sentinel the error wraps (ErrSyntax, ErrParam, ...).
	Kind error
	// Cause is the underlying error, if any (a file or declaration error).
	Cause error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("mechspec: at %d in %q: %s", e.Pos, e.Spec, e.Msg)
}

// Unwrap returns the sentinel and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}
