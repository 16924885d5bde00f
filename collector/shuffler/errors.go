package shuffler

import "errors"

// Errors.
var (
	// ErrOptions reports invalid options; the message names the field and
	// the rule.
	ErrOptions = errors.New("shuffler: invalid options")
	// ErrClosed reports a call on a closed Shuffler.
	ErrClosed = errors.New("shuffler: closed")
)
