package accountant

// This file holds the public query API. The engine lives in engine.go,
// the eps searches in solve.go and calibration in calibrate.go.

// DeltaResult is the privacy profile at one eps.
type DeltaResult struct {
	// Upper is a sound upper bound on delta: the shuffled mechanism is
	// (eps, Upper)-DP.
	Upper float64
	// Lower is a lower bound on the best delta any analysis can prove at eps
	// (an exact divergence of a specific neighbouring pair), 0 if unknown.
	Lower float64
}

// EpsilonResult is the central eps at one delta.
type EpsilonResult struct {
	// Upper is a sound upper bound on eps: the shuffled mechanism is
	// (Upper, delta)-DP.
	Upper float64
	// Lower is a lower bound on the smallest eps the mechanism satisfies at
	// delta, 0 if no lower-bound triple is known.
	Lower float64
	// LocalEps is the local (unshuffled) guarantee of the mechanism.
	LocalEps float64
	// Amplified is false when shuffling cannot improve on the local
	// guarantee at this n; Upper is then LocalEps.
	Amplified bool
	// Tight reports whether both bounds were certified within 0.5% (in eps)
	// of their exact values. It is false when the engine reached its
	// memory cap first, when twelve halvings of the lattice step did not
	// certify, or when a finer lattice stopped narrowing the bracket
	// (docs/accounting.md §7); the bounds are sound either way.
	Tight bool
}

// Target is a calibration target.
type Target struct {
	// Eps is the target central eps. Required, > 0.
	Eps float64
	// Delta is the target central delta. Required, in (0,1).
	Delta float64
	// N is the number of users (batch size). Required, >= 1.
	N int
	// Rounds is the number of reports of one user the target covers, each
	// shuffled in its own batch of N (a horizon of Rounds periods).
	// Defaults to 1.
	Rounds int
	// Floor is the number of blanket draws the shuffler adds to each
	// batch (docs/accounting.md §13); N is then the honest reports, the
	// victim's included. Defaults to 0, none.
	Floor int
}

// CalibrationResult is the largest local budget meeting a target.
type CalibrationResult struct {
	// Eps0 is the largest total local budget whose upper bound meets the
	// target. 0 when even tiny budgets miss it (see ErrUnreachable).
	Eps0 float64
	// Achieved is the guarantee at Eps0 and the target delta.
	Achieved EpsilonResult
}
