package declare

// Dishonest reports: the honest floor of a batch (docs/accounting.md §11).
//
// Assumption. A plan's max_fake_fraction f in [0, 1) says that at most a
// fraction f of any batch's valid reports (those that open and validate,
// the n every guarantee is computed from) are adversarial: fake reports
// sent with bought or stolen credentials, whose values and coins the
// adversary knows (the worst case; a fake report may even copy an honest
// report's distribution, it is still known). The other reports are honest:
// one per user, from the plan's randomizer, with independent coins.
//
// Proof sketch (computing the guarantee at the honest floor is sound).
//
//  1. Rounding. The fakes of a batch of n are an integer k <= f n, so
//     k <= floor(f n), and at least HonestFloor(n, f) = n - floor(f n)
//     reports are honest. Rounding the fakes up instead (ceil) would only
//     be looser; rounding the honest count n (1 - f) down to an integer is
//     the same as this (n - floor(f n) = ceil(n (1 - f))), never more.
//     Floating point: f as stored is a binary number, which for a decimal
//     such as 0.3 lies just below the decimal the operator wrote (0.3 x 10
//     is 2.99999999999999988898 in binary, whose floor would allow 2
//     fakes, not 3). FakeCount therefore computes floor(f n) exactly, for
//     both the binary value and its shortest decimal (the one YAML and the
//     flags print, strconv.FormatFloat(f, 'g', -1, 64)), and takes the
//     larger: as many fakes as either reading allows.
//  2. Dropping the fakes. Fix the adversary's fake reports F (a multiset it
//     knows, chosen by anything but the victim's data) and let H be the
//     honest sub-batch, the victim's report among the others' h - 1. The
//     shuffled batch is the shuffle of H and F: a randomised function of
//     the shuffle of H alone (merge in F, shuffle again), which uses no
//     data of the victim. By post-processing the view is at most as
//     distinguishing as the shuffle of H, one report shuffled among h - 1
//     honest ones: the single-report mechanism at h. The fakes contribute
//     no blanket at all; that is the worst case over what they can be.
//  3. Monotonicity. h >= n - floor(f n), and the single-report profile does
//     not grow with the number of honest reports (a batch with one more
//     honest report, reshuffled, is a post-processing of the smaller one,
//     as collector/horizon.go argues for n). So the accountant's bound at
//     HonestFloor(n, f) bounds every batch of n with at most floor(f n)
//     fakes, whichever h it actually has. HonestFloor is non-decreasing in
//     n (floor(f (n+1)) <= floor(f n) + 1 as f < 1), so the honest floor of
//     the smallest batch of a set is the smallest honest floor of the set,
//     and calibrating at the honest floor of n_min covers every batch of at
//     least n_min.
//  4. Over time (docs/time.md §2): the fakes of every batch are fixed by
//     the adversary independently of the victim's data (adaptively, on
//     earlier outputs), so each round is dominated as in 2 and 3 and the
//     adaptive composition of dominating pairs applies unchanged.
//
// With f = 0 FakeCount is 0 and HonestFloor is the identity: every
// guarantee is computed exactly as without the assumption.

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// ValidFakeFraction reports whether f is a fraction of fake reports the
// accounting takes: finite and in [0, 1). A fraction of 1 would let a
// whole batch be fake; NaN and infinities are no fraction.
func ValidFakeFraction(f float64) bool {
	return !math.IsNaN(f) && f >= 0 && f < 1
}

// FakeCount returns the largest number of fake reports a batch of n valid
// reports holds when at most a fraction f of them are fake: floor(f n),
// computed exactly for both f's binary value and its shortest decimal,
// the larger of the two (see the top of the file). It panics when n < 0 or
// f is not ValidFakeFraction: every plan and flag is checked before.
func FakeCount(n int, f float64) int {
	if n < 0 || !ValidFakeFraction(f) {
		panic(fmt.Sprintf("declare: FakeCount(%d, %v): n must be >= 0 and the fraction in [0, 1)", n, f))
	}
	if f == 0 || n == 0 {
		return 0
	}
	nr := new(big.Rat).SetInt64(int64(n))
	floor := func(r *big.Rat) int {
		r.Mul(r, nr)
		return int(new(big.Int).Quo(r.Num(), r.Denom()).Int64()) // r >= 0: truncation is floor
	}
	k := floor(new(big.Rat).SetFloat64(f))
	if dec, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64)); ok {
		k = max(k, floor(dec))
	}
	// f < 1 in both readings (a decimal of 1 or more rounds to a float of
	// 1 or more), so k <= n - 1: HonestFloor is at least 1.
	return k
}

// HonestFloor returns the number of honest reports a batch of n valid
// reports holds at least when at most a fraction f of them are fake:
// n - FakeCount(n, f), at least 1 for n >= 1 (the victim's own report).
// Every guarantee of a batch of n is the accountant's at this number
// (the proof is at the top of the file). With f = 0 it is n.
func HonestFloor(n int, f float64) int {
	return n - FakeCount(n, f)
}
