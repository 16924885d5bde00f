// Package accountant computes the central (eps, delta) guarantee of a local
// randomizer whose reports are shuffled, and calibrates the local budget eps0
// that meets a target.
//
// A randomizer describes its output distributions in one of four forms (a
// Declaration): a full matrix R[x][y], the atoms of its optimal "privacy
// blanket" decomposition for its worst-case neighbouring pairs, segments
// (bins of outputs on straight segments of the likelihood-ratio plane, for
// continuous or huge output spaces such as Laplace: split onto their ends
// for the upper bound, collapsed to their means for the lower bound; proof
// in segments.go), or only its pure local budget eps0 (generic). The accountant turns the declaration into
// a Decomposition: for the upper bound, one atom set per candidate
// neighbouring pair; for the lower bound, one atom set per candidate triple
// (x, x', x3). Composition (Joint, Parallel, Subsample) acts on
// decompositions.
//
// For every atom set the shuffled divergence is
//
//	delta(eps) = (1/n) E[(Z_1 + ... + Z_n)_+],  Z = (p - e^eps q)/r w.p. r,
//
// evaluated by a lattice/FFT engine that brackets the exact value from both
// sides with rigorous error terms (mean-preserving spread for the upper side,
// a convexity correction for the lower side, Chernoff bounds for the window,
// and an explicit floating-point margin). Reported upper bounds are never below
// the exact value and reported lower bounds never above it; the lattice is
// refined automatically until both are within 0.5% in eps of the exact value.
//
// The main calls:
//
//	m := accountant.KRR(100)
//	r, err := accountant.Epsilon(m, 4, 1_000_000, 1e-6)    // r.Upper, r.Lower
//	c, err := accountant.Calibrate(m, accountant.Target{Eps: 1, Delta: 1e-6, N: 1_000_000})
//
// The package is pure math: no I/O, no logging, no plugins.
package accountant
