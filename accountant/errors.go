package accountant

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can test with errors.Is.
var (
	// ErrInvalidArgument reports a parameter outside its domain (delta not in
	// (0,1), n < 1, NaN or Inf, ...).
	ErrInvalidArgument = errors.New("accountant: invalid argument")
	// ErrInvalidDeclaration reports a declaration that is not a valid pure
	// eps0-LDP randomizer (rows not summing to 1, negative entries, a
	// likelihood ratio above e^eps0, an output impossible under some input).
	// It is declare.ErrInvalid, which package declare's constructors and
	// decoder wrap too.
	ErrInvalidDeclaration = declare.ErrInvalid
	// ErrNotCalibratable reports a mechanism whose eps0 is fixed (a matrix or
	// atoms declaration) and therefore cannot be calibrated.
	ErrNotCalibratable = errors.New("accountant: mechanism has a fixed eps0")
	// ErrUnreachable reports a calibration target that no eps0 in the
	// searched range meets.
	ErrUnreachable = errors.New("accountant: target unreachable")
	// ErrLongitudinal reports a longitudinal declaration used where reports
	// are assumed independent across periods (see Longitudinal).
	ErrLongitudinal = errors.New("accountant: longitudinal declaration")
)

// argError returns an ErrInvalidArgument naming the parameter, its value and
// the rule it breaks.
func argError(name string, value any, rule string) error {
	return fmt.Errorf("%w: %s must be %s, got %v", ErrInvalidArgument, name, rule, value)
}

// checkFinite rejects NaN and Inf explicitly.
func checkFinite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return argError(name, v, "finite")
	}
	return nil
}

func checkDelta(name string, d float64) error {
	if err := checkFinite(name, d); err != nil {
		return err
	}
	if !(d > 0 && d < 1) {
		return argError(name, d, "in (0,1)")
	}
	if d < MinDelta {
		return argError(name, d, fmt.Sprintf(">= %g", MinDelta))
	}
	return nil
}

func checkEps(name string, e float64) error {
	if err := checkFinite(name, e); err != nil {
		return err
	}
	if e < 0 {
		return argError(name, e, ">= 0")
	}
	return nil
}

func checkEps0(e float64) error {
	if err := checkFinite("eps0", e); err != nil {
		return err
	}
	if !(e > 0) {
		return argError("eps0", e, "> 0")
	}
	if e > MaxEps0 {
		return argError("eps0", e, fmt.Sprintf("<= %g", MaxEps0))
	}
	return nil
}

func checkN(n int) error {
	if n < 1 {
		return argError("n", n, ">= 1")
	}
	if n > MaxN {
		return argError("n", n, fmt.Sprintf("<= %d", MaxN))
	}
	return nil
}

// MinDelta is the smallest delta accepted as a target.
const MinDelta = 1e-100

// MaxN is the largest number of users the engine accepts.
const MaxN = 10_000_000_000

// MaxEps0 is the largest local budget the engine accepts (declare.MaxEps0).
const MaxEps0 = declare.MaxEps0
