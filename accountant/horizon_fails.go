package accountant

// A cheap certificate that a horizon probe fails (largest.go, point 6).
//
// Proof sketch. searchRounds probes eps0 with g = log(d/delta), d the
// upper bound its pessimistic PLDs give for delta(eps) of t.Rounds
// reports of m, each shuffled among t.N. It starts at 1.25 times the
// single-report answer, far above the horizon's answer, where the PLDs
// are the costliest to build (a near point-mass loss keeps every lattice
// coefficient: 2-6 s of a 3-7 s calibration at n = 1e6, rounds = 365).
//
//  1. A lower-bound triple of m's decomposition at eps0 (docs/accounting.md
//     §4) is a pair of neighbouring datasets of one report; evaluate's lo
//     with wantLo is at most the exact delta(eps) of that pair shuffled
//     among t.N (the lower end of a certified bracket).
//  2. Over a horizon, the same pair in the first round and the same data
//     in the others (the victim reporting the same value in both worlds)
//     is a pair of neighbouring horizons, and its delta(eps) is at least
//     the first round's: dropping the other rounds is post-processing.
//  3. The probe's d is a sound upper bound on the horizon's delta(eps)
//     over every pair of neighbouring horizons (pld.go, convolve.go), so
//     d >= lo; lo > delta then means g > 0: the probe cannot prove eps0.
//
// The certificate asks lo > 2 delta, a margin over rounding in either
// bound; whether it holds never enters a guarantee (largest.go, point 2).
// With a floor of blanket draws it is not used (floor parts bound other
// batches, and a coupled floor has no lower bound).

// lowerExceeds reports whether some lower-bound triple of m at eps0 has a
// certified delta at t.Eps above twice t.Delta for one report shuffled
// among t.N: then no horizon of reports of m at eps0 meets t. False when
// m refuses eps0, when t has a floor, or when no triple exceeds it.
func lowerExceeds(m Mechanism, eps0 float64, t Target) bool {
	if t.Floor > 0 {
		return false
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return false
	}
	above := make([]bool, len(d.Lower))
	parallelMap(len(d.Lower), func(i int) {
		above[i] = evaluate(d.Lower[i], t.N, t.Eps, hRelStart, true).lo > 2*t.Delta
	})
	for _, a := range above {
		if a {
			return true
		}
	}
	return false
}
