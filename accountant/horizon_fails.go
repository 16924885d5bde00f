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
//  1. evaluate's lo with wantLo, for a lower-bound triple of m's
//     decomposition at eps0 (docs/accounting.md §4), is at most the exact
//     delta(eps) of two datasets of one report shuffled among t.N: real
//     neighbouring datasets of m (a matrix's, k-RR's, a composite's), or,
//     for the generic clone, of another eps0-LDP randomizer.
//  2. The probe's d is at least the delta(eps) of the t.Rounds-fold
//     composition of the one-report dominating pair (pessimistic PLDs
//     dominate it: pld.go, convolve.go), which is at least that of one
//     factor (dropping the others is post-processing), which is at least
//     the delta(eps) of every pair of neighbouring datasets of one report
//     among t.N: that is what dominating means, and for the clone it
//     covers every eps0-LDP randomizer. So d >= lo.
//  3. lo > delta then means d > delta, g > 0: the probe cannot prove
//     eps0.
//
// The argument needs the triples to be right. A plugin's triple above its
// own pairs (validation cannot see it) makes the certificate wrong; the
// search notices when a probe proves a point certified to fail and
// searches again without it (largest.go, point 6).
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
	return anyLowerAbove(d.Lower, t, hRelStart, 2*t.Delta)
}
