package declare

import "errors"

// ErrInvalid reports a declaration that is not a valid pure eps0-LDP
// randomizer, or that cannot be decoded. The accountant's
// ErrInvalidDeclaration is this error.
var ErrInvalid = errors.New("accountant: invalid declaration")

// The limits of what the accountant accepts.
const (
	// MaxEps0 is the largest local budget the accountant accepts. Beyond it
	// e^eps0 loses the precision the bounds need.
	MaxEps0 = 30.0
	// MaxTree is the largest tree (periods per tree) of a longitudinal
	// declaration (Declaration.Tree) the accountant accepts.
	MaxTree = 1 << 15
	// MaxRounds is the largest number of reports of one user (periods of a
	// horizon) a composition accepts.
	MaxRounds = 1_000_000
)
