package mechspec

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The rules ParseInt and ParseFloat report. Params and the CLI turn them
// into messages that name the parameter and the value.
var (
	errNotNumber  = errors.New("mechspec: not a decimal number")
	errNotFinite  = errors.New("mechspec: must be finite")
	errNotInteger = errors.New("mechspec: must be an integer")
	errRange      = errors.New("mechspec: out of range")
)

// ParseInt parses a decimal integer written as digits, with optional
// underscores between digits (1_000_000) or in scientific notation (1e6,
// 2.5e3), as long as the value is an exact integer. It rejects fractions
// (1.5), NaN, Inf, hexadecimal and values outside the int range; leading
// zeros are decimal. The blanket CLI uses the same syntax for its integer
// flags.
func ParseInt(s string) (int, error) {
	if err := checkSyntax(s); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, errNotNumber
	}
	if math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64 {
		return 0, errRange
	}
	if f != math.Trunc(f) {
		return 0, errNotInteger
	}
	// f is an integer in float64 precision; check the literal exactly, so
	// that 1.0000000000000001 is not taken for 1. checkSyntax bounded the
	// exponent, so big.Rat cannot be made to build a huge power of ten.
	var r big.Rat
	if _, ok := r.SetString(strings.ReplaceAll(s, "_", "")); !ok {
		return 0, errNotNumber
	}
	if !r.IsInt() {
		return 0, errNotInteger
	}
	n := r.Num()
	if !n.IsInt64() || n.Int64() > math.MaxInt || n.Int64() < math.MinInt {
		return 0, errRange
	}
	return int(n.Int64()), nil
}

// ParseFloat parses a decimal floating-point number (0.5, 1e-6, 1_000) and
// rejects NaN, Inf, hexadecimal floats and values that overflow.
func ParseFloat(s string) (float64, error) {
	if err := checkSyntax(s); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(s, 64)
	if errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
		return 0, errNotFinite
	}
	if err != nil {
		// Underflow to 0 is not an error for our purposes: the caller's
		// domain check (> 0) reports it.
		if !errors.Is(err, strconv.ErrRange) {
			return 0, errNotNumber
		}
	}
	return f, nil
}

// maxExponent bounds the decimal exponent of a literal. Beyond it every
// float64 is 0 or Inf anyway, and exact parsing would need huge powers of ten.
const maxExponent = 1000

// checkSyntax rejects what is not a plain decimal literal: NaN and Inf by
// name, hexadecimal, and exponents beyond maxExponent.
func checkSyntax(s string) error {
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "nan", "inf", "infinity":
		return errNotFinite
	}
	if !decimalSyntax(s) {
		return errNotNumber
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.ReplaceAll(s[i+1:], "_", ""))
		if err != nil {
			return errNotNumber
		}
		if e > maxExponent || e < -maxExponent {
			return errRange
		}
	}
	return nil
}

// decimalSyntax reports whether s uses only the characters of a signed
// decimal number with an optional exponent and underscores, so that
// strconv's hexadecimal, "inf" and "nan" forms are rejected up front.
func decimalSyntax(s string) bool {
	if s == "" {
		return false
	}
	digits := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == '_' || c == 'e' || c == 'E' || c == '+' || c == '-':
		default:
			return false
		}
	}
	return digits
}
