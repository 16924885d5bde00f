package collector

import "errors"

// Errors.
var (
	// ErrOptions reports invalid options; the message names the field and
	// the rule.
	ErrOptions = errors.New("collector: invalid options")
	// ErrClosed reports a call on a closed Shuffler or Collector.
	ErrClosed = errors.New("collector: closed")
)
