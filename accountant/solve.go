package accountant

// Delta returns the privacy profile point of m at total local budget eps0,
// n users and central eps.
func Delta(m Mechanism, eps0 float64, n int, eps float64) (DeltaResult, error) {
	panic("in progress")
}

// Epsilon returns the central eps of m at total local budget eps0, n users
// and central delta.
func Epsilon(m Mechanism, eps0 float64, n int, delta float64) (EpsilonResult, error) {
	panic("in progress")
}

// Calibrate returns the largest total local budget eps0 whose upper bound
// meets the target.
func Calibrate(m Mechanism, t Target) (CalibrationResult, error) {
	panic("in progress")
}

// SetDelta returns lower and upper bounds on (1/n) E[(Z_1+...+Z_n)_+] for the
// atom set s at eps (spec section 3), each within 0.5% in eps of the exact
// value.
func SetDelta(s AtomSet, n int, eps float64) (lo, hi float64, err error) {
	panic("in progress")
}
