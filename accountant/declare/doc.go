// Package declare is the vocabulary a randomizer and a privacy plan use to
// describe themselves to the accountant, without the accountant's math: a
// randomizer's Declaration of its output distributions at one local budget
// (a full Matrix, the Atoms of its worst-case neighbouring pairs, Bins on
// segments of the likelihood-ratio plane, or only eps0), the Travel mode
// of a plan's metrics, the limits the accountant accepts (MaxEps0,
// MaxTree, MaxRounds), and the honest floor of a batch when some of its
// reports may be fake (HonestFloor: the one conversion of a batch's size
// to the accountant's n under a plan's max_fake_fraction).
//
// It is data only and imports nothing beyond the standard library, so that
// a randomizer plugin and an app link no math library. Whether a
// declaration is valid, and every bound drawn from it, is the accountant's
// (accountant.Validate, accountant.Decompose; the rules are in
// docs/accounting.md §2). Package accountant re-exports these types under
// the same names.
//
//	m, err := declare.NewMatrix([][]float64{{0.75, 0.25}, {0.25, 0.75}})
//	d := &declare.Declaration{Eps0: math.Log(3), Form: declare.FormMatrix, Matrix: m}
package declare
