package collector

import "errors"

// Errors.
var (
	// ErrOptions reports invalid options; the message names the field and
	// the rule.
	ErrOptions = errors.New("collector: invalid options")
	// ErrSecretFile reports a key or token file that cannot be used: wrong
	// permissions or content.
	ErrSecretFile = errors.New("collector: unusable secret file")
	// ErrClosed reports a call on a closed Shuffler or Collector.
	ErrClosed = errors.New("collector: closed")
)
