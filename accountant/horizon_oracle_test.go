package accountant

// Ground truth for privacy over time (docs/time.md): exact, test-only evaluations
// of shuffled laws, products of pairs and compositions of privacy loss
// distributions (PLDs), written from the definitions alone. Apart from the
// AtomSet type (the input format), and KRR and SetDelta in the tests that
// check them, they use no code of the package.
//
//   - oracleShuffledLaw: the law of the multiset of n users' outputs, by
//     enumerating every output tuple.
//   - oracleComposedDelta: the hockey-stick divergence of a product of
//     (P, Q) pairs, by enumerating the product; outcomes of equal privacy
//     loss are merged (exact: the sign of P - e^eps Q depends only on the
//     loss, so the divergence is linear on a set of equal-loss outcomes).
//   - oracleBlanketPLD: the PLD of the blanket pair of docs/accounting.md
//     §3 (the laws of A = sum alpha and B = sum beta over the users'
//     atoms), by enumerating multinomial counts.
//   - oracleComposedDeltaPLD: delta(eps) = E_P[(1 - e^(eps - L))_+] of a sum
//     of independent losses, by enumerating the product.
//   - oracleRRComposedDelta: T-fold k-ary randomized response without
//     shuffling, in closed form (a trinomial sum in log space).
//
// Why the blanket pair is the shuffled pair (the identity the tests check).
// For counts N ~ Multinomial(n; r) and one user moved from the blanket to
// atom y: sum_y p_y Mult_{n-1}(N - e_y; r) = Mult_n(N; r) sum_y N_y p_y/(n r_y)
// = Mult_n(N) A/n, the law of the counts when one user draws from p and the
// others from r. So for the lower-bound triple (r = R[x3], no residual) the
// pair (Mult A/n, Mult B/n) is exactly the pair of count laws of the datasets
// (x, x3, ..., x3) and (x', x3, ..., x3) (docs/accounting.md §4), and for
// any set sum_N Mult (A - e^eps B)_+/n = (1/n) E[(sum_i Z_i)_+] with
// Z = (p - e^eps q)/r w.p. r, the GPARV of docs/accounting.md §3.
//
// Accuracy. All sums of many terms are compensated (Neumaier). Losses are
// treated as equal when they agree to oracleLossTol relative; two losses that
// are equal in exact arithmetic but computed in a different order differ by
// far less (a few ulps per addition), and distinct losses in the tests differ
// by far more. A merge of two losses within oracleLossTol changes a
// divergence by at most oracleLossTol times the merged P-mass, and only when
// eps lies between them.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// oracleAtom is one atom of a privacy loss distribution: loss Loss =
// log(P/Q) (+Inf where Q = 0 < P, -Inf where P = 0 < Q), P-mass P and Q-mass
// Q.
type oracleAtom struct{ Loss, P, Q float64 }

// oracleLossTol is the relative tolerance under which two losses are merged.
const oracleLossTol = 1e-11

// oracleMaxTuples bounds the enumerations of oracleShuffledLaw and
// oracleDirectBlanketDelta.
const oracleMaxTuples = 1 << 22

// oracleSum is a Neumaier compensated sum.
type oracleSum struct{ s, c float64 }

func (a *oracleSum) add(x float64) {
	t := a.s + x
	if math.Abs(a.s) >= math.Abs(x) {
		a.c += (a.s - t) + x
	} else {
		a.c += (x - t) + a.s
	}
	a.s = t
}

func (a *oracleSum) value() float64 { return a.s + a.c }

// oracleCountsKey returns the canonical key of a multiset of outputs: the
// count of each output 0..m-1, comma-separated ("2,0,1").
func oracleCountsKey(counts []int) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// oracleShuffledLaw returns the exact law of the shuffled output when user i,
// with input data[i], reports y with probability R[data[i]][y]: the
// probability of each multiset of outputs, keyed by oracleCountsKey of the
// output counts. Multisets of probability 0 are absent. It enumerates all
// len(R[0])^len(data) output tuples (at most oracleMaxTuples).
func oracleShuffledLaw(R [][]float64, data []int) map[string]float64 {
	n := len(data)
	m := len(R[0])
	if math.Pow(float64(m), float64(n)) > oracleMaxTuples {
		panic(fmt.Sprintf("oracleShuffledLaw: %d^%d tuples is too many", m, n))
	}
	acc := map[string]*oracleSum{}
	tuple := make([]int, n)
	counts := make([]int, m)
	for {
		prob := 1.0
		clear(counts)
		for i, y := range tuple {
			prob *= R[data[i]][y]
			counts[y]++
		}
		if prob > 0 {
			key := oracleCountsKey(counts)
			if acc[key] == nil {
				acc[key] = &oracleSum{}
			}
			acc[key].add(prob)
		}
		if !oracleNextTuple(tuple, m) {
			break
		}
	}
	law := make(map[string]float64, len(acc))
	for key, s := range acc {
		law[key] = s.value()
	}
	return law
}

// oraclePLDOfPair returns the privacy loss distribution of the pair (P, Q) of
// discrete laws (missing keys have mass 0): one atom per outcome, loss
// log(P/Q), equal losses merged. Outcomes with P = Q = 0 are dropped.
func oraclePLDOfPair(P, Q map[string]float64) []oracleAtom {
	var atoms []oracleAtom
	for key, p := range P {
		q := Q[key]
		if p == 0 && q == 0 {
			continue
		}
		atoms = append(atoms, oracleAtom{Loss: oracleLoss(p, q), P: p, Q: q})
	}
	for key, q := range Q {
		if _, ok := P[key]; !ok && q > 0 {
			atoms = append(atoms, oracleAtom{Loss: math.Inf(-1), P: 0, Q: q})
		}
	}
	return oracleMerge(atoms)
}

// oracleLoss returns log(p/q), +Inf for q = 0 < p and -Inf for p = 0 < q.
func oracleLoss(p, q float64) float64 {
	switch {
	case q == 0:
		return math.Inf(1)
	case p == 0:
		return math.Inf(-1)
	}
	return math.Log(p) - math.Log(q)
}

// oracleSameLoss reports whether two losses are merged.
func oracleSameLoss(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= oracleLossTol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// oracleMerge sorts atoms by loss and merges those of equal loss (compared
// with the first loss of each group), adding their P- and Q-masses; the
// merged loss is the P-weighted mean of the group (the common loss when the
// group has zero P-mass). Atoms with P = Q = 0 are dropped.
func oracleMerge(atoms []oracleAtom) []oracleAtom {
	atoms = slices.DeleteFunc(slices.Clone(atoms), func(a oracleAtom) bool { return a.P == 0 && a.Q == 0 })
	slices.SortFunc(atoms, func(a, b oracleAtom) int {
		switch {
		case a.Loss < b.Loss:
			return -1
		case a.Loss > b.Loss:
			return 1
		}
		return 0
	})
	var out []oracleAtom
	for i := 0; i < len(atoms); {
		j := i
		var p, q, pl oracleSum
		for ; j < len(atoms) && oracleSameLoss(atoms[i].Loss, atoms[j].Loss); j++ {
			p.add(atoms[j].P)
			q.add(atoms[j].Q)
			if !math.IsInf(atoms[j].Loss, 0) {
				pl.add(atoms[j].P * atoms[j].Loss)
			}
		}
		loss := atoms[i].Loss
		if !math.IsInf(loss, 0) && p.value() > 0 {
			loss = pl.value() / p.value()
		}
		out = append(out, oracleAtom{Loss: loss, P: p.value(), Q: q.value()})
		i = j
	}
	return out
}

// oracleProduct returns the PLD of the product of two pairs: losses add,
// masses multiply; equal losses merged. Products of zero P-mass are dropped
// (they contribute nothing to sum (P - e^eps Q)_+ at any eps, and dropping
// them avoids +Inf + -Inf); so the Q-masses of the result sum to less than 1
// when some outcome has P = 0 < Q.
func oracleProduct(a, b []oracleAtom) []oracleAtom {
	out := make([]oracleAtom, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if x.P == 0 || y.P == 0 {
				continue
			}
			out = append(out, oracleAtom{Loss: x.Loss + y.Loss, P: x.P * y.P, Q: x.Q * y.Q})
		}
	}
	return oracleMerge(out)
}

// oracleComposedDelta returns the hockey-stick divergence
// H_{e^eps}(P_1 x ... x P_T || Q_1 x ... x Q_T) = sum_o (P(o) - e^eps Q(o))_+
// of the product of the given pairs (each a (P, Q) of discrete laws on the
// same keys; a missing key has mass 0), by exact enumeration of the product
// with equal losses merged. Any real eps is allowed.
func oracleComposedDelta(pairs [][2]map[string]float64, eps float64) float64 {
	cur := []oracleAtom{{Loss: 0, P: 1, Q: 1}}
	for _, pr := range pairs {
		cur = oracleProduct(cur, oraclePLDOfPair(pr[0], pr[1]))
	}
	a := math.Exp(eps)
	var h oracleSum
	for _, at := range cur {
		if v := math.FMA(-a, at.Q, at.P); v > 0 {
			h.add(v)
		}
	}
	return h.value()
}

// oracleBlanketPLD returns the exact PLD of the blanket pair of
// docs/accounting.md §3 for the atom set s at n users: with
// alpha_j = p_j/r_j and beta_j = q_j/r_j for every atom of s with r_j > 0,
// and the residual atom (weight 1 - sum r, alpha = beta = 0; dropped when
// |1 - sum r| <= 1e-12, the tolerance of a lower-bound triple's sum), counts
// N ~ Multinomial(n; r_1..r_J, 1 - gamma), A = sum N_j alpha_j and
// B = sum N_j beta_j, the pair has P-mass Mult(N) A/n and Q-mass Mult(N) B/n
// at each count vector and loss log(A/B). Equal losses are merged; the atoms
// are sorted by loss.
func oracleBlanketPLD(s AtomSet, n int) []oracleAtom {
	var w, alpha, beta []float64
	var gamma oracleSum
	for i, a := range s {
		if a.R == 0 {
			if a.P != 0 || a.Q != 0 {
				panic(fmt.Sprintf("oracleBlanketPLD: atom %d has r = 0 and p, q = %v, %v", i, a.P, a.Q))
			}
			continue
		}
		w = append(w, a.R)
		alpha = append(alpha, a.P/a.R)
		beta = append(beta, a.Q/a.R)
		gamma.add(a.R)
	}
	switch res := 1 - gamma.value(); {
	case res < -1e-12:
		panic(fmt.Sprintf("oracleBlanketPLD: sum r = %v > 1", gamma.value()))
	case res > 1e-12:
		w = append(w, res)
		alpha = append(alpha, 0)
		beta = append(beta, 0)
	}
	lfact := make([]float64, n+1)
	for i := range lfact {
		lfact[i], _ = math.Lgamma(float64(i + 1))
	}
	logw := make([]float64, len(w))
	for j := range w {
		logw[j] = math.Log(w[j])
	}
	var atoms []oracleAtom
	counts := make([]int, len(w))
	var rec func(j, left int)
	rec = func(j, left int) {
		if j == len(w)-1 {
			counts[j] = left
			var A, B oracleSum
			logMult := lfact[n]
			for i, c := range counts {
				if c == 0 {
					continue
				}
				A.add(float64(c) * alpha[i])
				B.add(float64(c) * beta[i])
				logMult += float64(c)*logw[i] - lfact[c]
			}
			a, b := A.value(), B.value()
			if a == 0 && b == 0 {
				return
			}
			mult := math.Exp(logMult)
			atoms = append(atoms, oracleAtom{Loss: oracleLoss(a, b), P: mult * a / float64(n), Q: mult * b / float64(n)})
			return
		}
		for c := 0; c <= left; c++ {
			counts[j] = c
			rec(j+1, left-c)
		}
	}
	rec(0, n)
	return oracleMerge(atoms)
}

// oracleComposedDeltaPLD returns delta(eps) = E[(1 - e^(eps - L))_+] for
// L = L_1 + ... + L_T, the L_i independent with the P-laws of the given
// PLDs, by exact enumeration of the product with equal sums merged. A +Inf
// loss contributes its full P-mass; atoms of zero P-mass contribute nothing.
// Any real eps is allowed.
func oracleComposedDeltaPLD(plds [][]oracleAtom, eps float64) float64 {
	cur := []oracleAtom{{Loss: 0, P: 1, Q: 1}}
	for _, d := range plds {
		cur = oracleProduct(cur, d)
	}
	var h oracleSum
	for _, at := range cur {
		switch {
		case at.P == 0 || at.Loss <= eps:
		case math.IsInf(at.Loss, 1):
			h.add(at.P)
		default:
			h.add(at.P * -math.Expm1(eps-at.Loss))
		}
	}
	return h.value()
}

// oracleRRComposedDelta returns the exact delta(eps) of the T-fold
// composition of k-ary randomized response at eps0 without shuffling
// (n = 1). Per round the loss is +eps0 with P-probability e^eps0 c, -eps0
// with c and 0 with (k-2) c, c = 1/(e^eps0 + k - 1), so
//
//	delta(eps) = sum_{i+j+z=T, (i-j) eps0 > eps} T!/(i! j! z!) (e^eps0 c)^i c^j ((k-2) c)^z (1 - e^(eps - (i-j) eps0)),
//
// summed in log space (k = 2: z = 0 only, a binomial sum). The sign of
// (i-j) eps0 - eps is exact (one fused multiply-add). Accurate to about
// 1e-12 relative for T up to 1000 (the log-gamma values are below 6000).
func oracleRRComposedDelta(eps0 float64, k, T int, eps float64) float64 {
	if k < 2 || T < 0 {
		panic(fmt.Sprintf("oracleRRComposedDelta: k = %d, T = %d", k, T))
	}
	// log c = -log(e^eps0 + k - 1) = -(eps0 + log1p((k-1) e^-eps0)).
	logc := -(eps0 + math.Log1p(float64(k-1)*math.Exp(-eps0)))
	lPlus, lMinus := eps0+logc, logc
	lZero := math.Log(float64(k-2)) + logc
	lfact := make([]float64, T+1)
	for i := range lfact {
		lfact[i], _ = math.Lgamma(float64(i + 1))
	}
	var logs []float64
	for i := 0; i <= T; i++ {
		for j := 0; j <= T-i; j++ {
			z := T - i - j
			if k == 2 && z > 0 {
				continue
			}
			g := math.FMA(-float64(i-j), eps0, eps) // eps - (i-j) eps0, one rounding
			if !(g < 0) {
				continue
			}
			lt := lfact[T] - lfact[i] - lfact[j] - lfact[z] + float64(i)*lPlus + float64(j)*lMinus
			if z > 0 {
				lt += float64(z) * lZero
			}
			logs = append(logs, lt+math.Log(-math.Expm1(g)))
		}
	}
	if len(logs) == 0 {
		return 0
	}
	m := slices.Max(logs)
	var s oracleSum
	for _, l := range logs {
		s.add(math.Exp(l - m))
	}
	return math.Exp(m) * s.value()
}

// oracleDirectBlanketDelta returns (1/n) E[(Z_1 + ... + Z_n)_+] with
// Z = (p - e^eps q)/r w.p. r and 0 w.p. 1 - sum r (docs/accounting.md §3)
// by enumerating every tuple of the n users' atoms: the definition, with no
// merging of any kind.
func oracleDirectBlanketDelta(s AtomSet, n int, eps float64) float64 {
	a := math.Exp(eps)
	var z, w []float64
	var gamma oracleSum
	for _, at := range s {
		if at.R > 0 {
			z = append(z, (at.P-a*at.Q)/at.R)
			w = append(w, at.R)
			gamma.add(at.R)
		}
	}
	if res := 1 - gamma.value(); res > 1e-12 {
		z = append(z, 0)
		w = append(w, res)
	}
	m := len(z)
	if math.Pow(float64(m), float64(n)) > oracleMaxTuples {
		panic("oracleDirectBlanketDelta: too many tuples")
	}
	var h oracleSum
	tuple := make([]int, n)
	for {
		prob := 1.0
		var sum oracleSum
		for _, j := range tuple {
			prob *= w[j]
			sum.add(z[j])
		}
		if v := sum.value(); v > 0 {
			h.add(prob * v)
		}
		if !oracleNextTuple(tuple, m) {
			break
		}
	}
	return h.value() / float64(n)
}

// oracleNextTuple advances tuple to the next one in mixed radix m
// (lowest digit first) and reports false after the last.
func oracleNextTuple(tuple []int, m int) bool {
	for i := range tuple {
		tuple[i]++
		if tuple[i] < m {
			return true
		}
		tuple[i] = 0
	}
	return false
}

// oracleKRRRows returns the k x k matrix of k-ary randomized response at eps0.
func oracleKRRRows(k int, eps0 float64) [][]float64 {
	e := math.Exp(eps0)
	c := 1 / (e + float64(k) - 1)
	rows := make([][]float64, k)
	for x := range rows {
		rows[x] = make([]float64, k)
		for y := range rows[x] {
			rows[x][y] = c
		}
		rows[x][x] = e * c
	}
	return rows
}

// --- tests of the oracles ---------------------------------------------------

// Tolerances of the oracle tests.
const (
	// oracleTolHand: hand-computed values are short decimal expressions;
	// the oracles reach them to a few ulps per operation.
	oracleTolHand = 1e-14
	// oracleTolCross: two oracles reaching the same quantity by different
	// enumerations (tuples vs counts, pairs vs PLDs, closed form vs
	// products), each with compensated sums of positive terms and masses
	// carrying a few ulps per factor; T-fold products multiply that by T.
	// Differences of nearly equal masses (P - e^eps Q near eps = loss) can
	// lose a few more digits relative to a small delta.
	oracleTolCross = 1e-10
	// oracleTolLargeT: T = 1000-fold products accumulate ~T ulps in every
	// mass and the closed form's log-gamma values reach 6000 (1e-12
	// absolute in the log).
	oracleTolLargeT = 1e-9
	// oracleTolEngine: SetDelta brackets the exact value rigorously; the
	// oracle's own rounding (a few hundred ulps at most) is what may put
	// it a hair outside.
	oracleTolEngine = 1e-12
	// oracleAbsMass: masses carry a few ulps of relative error, so
	// P - e^eps Q, summed over outcomes, carries an absolute error of a few
	// ulps of the total mass 1. It shows where the exact value is 0 (eps at
	// the largest loss, e.g. eps = eps0 for k-RR, where P = e^eps Q on the
	// top atom) and both sides return rounding noise.
	oracleAbsMass = 2e-15
)

func oracleRelDiff(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
}

// oracleClose reports |got - want| <= tol |want| + abs.
func oracleClose(got, want, tol, abs float64) bool {
	return math.Abs(got-want) <= tol*math.Abs(want)+abs
}

func TestOracleShuffledLawHand(t *testing.T) {
	// Two users, inputs 0 and 1 of a binary randomizer: (2,0) needs both to
	// report 0, (0,2) both 1, (1,1) one of each, in either order.
	R := [][]float64{{0.7, 0.3}, {0.2, 0.8}}
	got := oracleShuffledLaw(R, []int{0, 1})
	want := map[string]float64{"2,0": 0.7 * 0.2, "1,1": 0.7*0.8 + 0.3*0.2, "0,2": 0.3 * 0.8}
	if len(got) != len(want) {
		t.Fatalf("law %v, want %v", got, want)
	}
	for key, w := range want {
		if !oracleClose(got[key], w, oracleTolHand, 0) {
			t.Errorf("P(%s) = %v, want %v", key, got[key], w)
		}
	}

	// Three users with the same input: the counts are multinomial,
	// P(1,1,1) = 3! 0.5 0.3 0.2 = 0.18, P(3,0,0) = 0.5^3, P(0,2,1) = 3 0.3^2 0.2.
	R3 := [][]float64{{0.5, 0.3, 0.2}}
	got = oracleShuffledLaw(R3, []int{0, 0, 0})
	for key, w := range map[string]float64{"1,1,1": 0.18, "3,0,0": 0.125, "0,2,1": 0.054} {
		if !oracleClose(got[key], w, oracleTolHand, 0) {
			t.Errorf("P(%s) = %v, want %v", key, got[key], w)
		}
	}
	if n := len(got); n != 10 { // C(3+2, 2) multisets of size 3 over 3 outputs
		t.Errorf("%d multisets, want 10", n)
	}
	var total oracleSum
	for _, p := range got {
		total.add(p)
	}
	if !oracleClose(total.value(), 1, oracleTolHand, 0) {
		t.Errorf("total mass %v, want 1", total.value())
	}

	// No users: one empty multiset.
	if got := oracleShuffledLaw(R, nil); len(got) != 1 || got["0,0"] != 1 {
		t.Errorf("law of no users = %v, want {0,0: 1}", got)
	}
	// A zero-probability output never appears.
	got = oracleShuffledLaw([][]float64{{1, 0}}, []int{0, 0})
	if len(got) != 1 || got["2,0"] != 1 {
		t.Errorf("law = %v, want {2,0: 1}", got)
	}
}

func TestOracleComposedDeltaHand(t *testing.T) {
	P := map[string]float64{"a": 0.6, "b": 0.4}
	Q := map[string]float64{"a": 0.3, "b": 0.7}
	one := [][2]map[string]float64{{P, Q}}
	two := [][2]map[string]float64{{P, Q}, {P, Q}}
	cases := []struct {
		name  string
		pairs [][2]map[string]float64
		eps   float64
		want  float64
	}{
		// Total variation: (0.6 - 0.3) on a.
		{"one eps=0", one, 0, 0.3},
		// 0.6 - 1.5*0.3 on a; b has P < Q.
		{"one eps=log1.5", one, math.Log(1.5), 0.15},
		// Above the largest loss log 2 nothing is left.
		{"one eps=log2", one, math.Log(2), 0},
		// eps < 0: a gives 0.6 - 0.15, b gives 0.4 - 0.35.
		{"one eps=-log2", one, -math.Log(2), 0.45 + 0.05},
		// Product at eps = 0: aa .36-.09, ab and ba .24-.21 each, bb none.
		{"two eps=0", two, 0, 0.27 + 0.03 + 0.03},
		// Product at eps = log 2: aa .36 - 2*.09 only.
		{"two eps=log2", two, math.Log(2), 0.18},
		// No pairs: P = Q = the point mass, divergence (1 - e^eps)_+.
		{"none eps=-log2", nil, -math.Log(2), 0.5},
	}
	for _, c := range cases {
		if got := oracleComposedDelta(c.pairs, c.eps); !oracleClose(got, c.want, oracleTolHand, 1e-16) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// A pair with an output impossible under Q: loss +Inf with mass 1/2, so
	// T-fold composition gives 1 - (1/2)^T at every eps >= 0 (Q's only
	// outcome has loss log(1/2) < 0).
	Pi := map[string]float64{"a": 0.5, "b": 0.5}
	Qi := map[string]float64{"a": 1}
	for T := 1; T <= 4; T++ {
		pairs := slices.Repeat([][2]map[string]float64{{Pi, Qi}}, T)
		want := 1 - math.Pow(0.5, float64(T))
		for _, eps := range []float64{0, 1, 10} {
			if got := oracleComposedDelta(pairs, eps); !oracleClose(got, want, oracleTolHand, 0) {
				t.Errorf("+Inf pair T=%d eps=%g: %v, want %v", T, eps, got, want)
			}
		}
	}
}

// oracleRandomPair returns a random pair of laws on m outcomes, with some
// outcomes impossible under one side when withZeros.
func oracleRandomPair(rng *rand.Rand, m int, withZeros bool) [2]map[string]float64 {
	var pr [2]map[string]float64
	for s := range pr {
		pr[s] = map[string]float64{}
		var tot float64
		w := make([]float64, m)
		for i := range w {
			w[i] = rng.Float64() + 0.05
			if withZeros && rng.IntN(5) == 0 {
				w[i] = 0
			}
			tot += w[i]
		}
		if tot == 0 {
			w[0], tot = 1, 1
		}
		for i, x := range w {
			pr[s][strconv.Itoa(i)] = x / tot
		}
	}
	return pr
}

func TestOracleComposedDeltaSymmetryAndPLD(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 40 {
		T := 1 + rng.IntN(3)
		pairs := make([][2]map[string]float64, T)
		swapped := make([][2]map[string]float64, T)
		plds := make([][]oracleAtom, T)
		for i := range pairs {
			pairs[i] = oracleRandomPair(rng, 2+rng.IntN(3), trial%2 == 0)
			swapped[i] = [2]map[string]float64{pairs[i][1], pairs[i][0]}
			plds[i] = oraclePLDOfPair(pairs[i][0], pairs[i][1])
		}
		for _, eps := range []float64{-1.3, -0.2, 0, 0.1, 0.5, 1, 2.5} {
			h := oracleComposedDelta(pairs, eps)
			// Same quantity from the PLDs under P alone.
			if d := oracleComposedDeltaPLD(plds, eps); !oracleClose(d, h, oracleTolCross, oracleAbsMass) {
				t.Errorf("trial %d T=%d eps=%g: PLD gives %v, pairs %v", trial, T, eps, d, h)
			}
			// H_a(P||Q) = 1 - a + a H_{1/a}(Q||P) (sum_o (P - aQ)_+ =
			// sum_o (P - aQ) + sum_o (aQ - P)_+).
			a := math.Exp(eps)
			alt := 1 - a + a*oracleComposedDelta(swapped, -eps)
			if !oracleClose(h, alt, oracleTolCross, oracleAbsMass*(1+a)) {
				t.Errorf("trial %d T=%d eps=%g: H = %v, 1-a+aH(Q||P) = %v", trial, T, eps, h, alt)
			}
			if h < 0 || h > 1+1e-15 {
				t.Errorf("trial %d eps=%g: H = %v outside [0,1]", trial, eps, h)
			}
		}
	}
}

func TestOracleBlanketPLDOneUser(t *testing.T) {
	// At n = 1 the blanket pair is the local pair: P-mass r alpha = p and
	// Q-mass r beta = q on each atom, so for k-RR
	// delta(eps) = c (e^eps0 - e^eps)_+ + c (1 - e^(eps+eps0))_+ + (k-2) c (1 - e^eps)_+.
	for _, k := range []int{2, 3, 7} {
		for _, eps0 := range []float64{0.3, 1, 4} {
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			pld := oracleBlanketPLD(d.Upper[0], 1)
			var p, q oracleSum
			for _, a := range pld {
				p.add(a.P)
				q.add(a.Q)
			}
			if !oracleClose(p.value(), 1, oracleTolHand, 0) || !oracleClose(q.value(), 1, oracleTolHand, 0) {
				t.Errorf("k=%d eps0=%g: masses %v, %v, want 1, 1", k, eps0, p.value(), q.value())
			}
			e := math.Exp(eps0)
			c := 1 / (e + float64(k) - 1)
			for _, eps := range []float64{-0.5, 0, 0.2, eps0 / 2, eps0} {
				a := math.Exp(eps)
				want := c*math.Max(e-a, 0) + c*math.Max(1-a*e, 0) + float64(k-2)*c*math.Max(1-a, 0)
				got := oracleComposedDeltaPLD([][]oracleAtom{pld}, eps)
				if !oracleClose(got, want, oracleTolCross, oracleAbsMass) {
					t.Errorf("k=%d eps0=%g eps=%g: %v, want %v", k, eps0, eps, got, want)
				}
			}
		}
	}
}

func TestOracleBlanketPLDMatchesGPARV(t *testing.T) {
	// The identity sum_N Mult (A - e^eps B)_+ / n = (1/n) E[(sum Z)_+],
	// checked against the tuple enumeration of the definition and against
	// the engine's certified bracket (SetDelta).
	for _, k := range []int{2, 3, 5} {
		for _, eps0 := range []float64{0.5, 1, 2} {
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for _, set := range []struct {
				name string
				s    AtomSet
			}{{"upper", d.Upper[0]}, {"lower", d.Lower[0]}} {
				for n := 1; n <= 8; n++ {
					pld := oracleBlanketPLD(set.s, n)
					var p, q oracleSum
					for _, a := range pld {
						p.add(a.P)
						q.add(a.Q)
					}
					if !oracleClose(p.value(), 1, oracleTolCross, 0) || !oracleClose(q.value(), 1, oracleTolCross, 0) {
						t.Errorf("k=%d eps0=%g %s n=%d: masses %v, %v, want 1, 1", k, eps0, set.name, n, p.value(), q.value())
					}
					for _, eps := range []float64{0, 0.05, 0.2, 0.5, 0.9 * eps0, eps0} {
						got := oracleComposedDeltaPLD([][]oracleAtom{pld}, eps)
						direct := oracleDirectBlanketDelta(set.s, n, eps)
						if !oracleClose(got, direct, oracleTolCross, oracleAbsMass) {
							t.Errorf("k=%d eps0=%g %s n=%d eps=%g: PLD %v, tuples %v", k, eps0, set.name, n, eps, got, direct)
						}
						if set.name != "upper" {
							continue
						}
						lo, hi, err := SetDelta(set.s, n, eps)
						if err != nil {
							t.Fatal(err)
						}
						if got < lo*(1-oracleTolEngine)-oracleAbsMass || got > hi*(1+oracleTolEngine)+oracleAbsMass {
							t.Errorf("k=%d eps0=%g n=%d eps=%g: oracle %v outside SetDelta [%v, %v]", k, eps0, n, eps, got, lo, hi)
						}
					}
				}
			}
		}
	}
}

func TestOracleShuffledLowerMatchesBlanketPLD(t *testing.T) {
	// docs/accounting.md §4: the count laws of (x, x3, ..., x3) and
	// (x', x3, ..., x3) are exactly the blanket pair of the lower-bound
	// atoms (r = R[x3]); composing T rounds of either gives the same delta.
	for _, k := range []int{2, 3, 4} {
		for _, eps0 := range []float64{0.5, 1.5} {
			R := oracleKRRRows(k, eps0)
			x, xp, x3 := 0, 1, 2
			if k == 2 {
				x3 = 1 // the only triple: x3 = x'
			}
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 2, 3, 5, 6} {
				dataP := slices.Repeat([]int{x3}, n)
				dataQ := slices.Repeat([]int{x3}, n)
				dataP[0], dataQ[0] = x, xp
				pair := [2]map[string]float64{oracleShuffledLaw(R, dataP), oracleShuffledLaw(R, dataQ)}
				pld := oracleBlanketPLD(d.Lower[0], n)
				for T := 1; T <= 3; T++ {
					pairs := slices.Repeat([][2]map[string]float64{pair}, T)
					plds := slices.Repeat([][]oracleAtom{pld}, T)
					for _, eps := range []float64{-0.3, 0, 0.1, 0.4, 1, 0.9 * eps0 * float64(T)} {
						want := oracleComposedDelta(pairs, eps)
						got := oracleComposedDeltaPLD(plds, eps)
						if !oracleClose(got, want, oracleTolCross, oracleAbsMass) {
							t.Errorf("k=%d eps0=%g n=%d T=%d eps=%g: blanket PLD %v, shuffled laws %v (rel %.2g)",
								k, eps0, n, T, eps, got, want, oracleRelDiff(got, want))
						}
					}
				}
			}
		}
	}
}

func TestOracleShuffledOneUserMatchesRR(t *testing.T) {
	// n = 1: the shuffled laws are the rows R[x] and R[x'] of k-RR, whose
	// T-fold composition is oracleRRComposedDelta's trinomial.
	for _, k := range []int{2, 3, 6} {
		for _, eps0 := range []float64{0.2, 1, 3} {
			R := oracleKRRRows(k, eps0)
			pair := [2]map[string]float64{oracleShuffledLaw(R, []int{0}), oracleShuffledLaw(R, []int{1})}
			for _, T := range []int{1, 2, 5, 12} {
				pairs := slices.Repeat([][2]map[string]float64{pair}, T)
				for _, f := range []float64{0, 0.05, 0.3, 0.5, 0.8, 1} {
					eps := f * eps0 * float64(T)
					want := oracleComposedDelta(pairs, eps)
					got := oracleRRComposedDelta(eps0, k, T, eps)
					if !oracleClose(got, want, oracleTolCross, oracleAbsMass) {
						t.Errorf("k=%d eps0=%g T=%d eps=%g: closed form %v, product %v (rel %.2g)",
							k, eps0, T, eps, got, want, oracleRelDiff(got, want))
					}
				}
			}
		}
	}
}

func TestOracleRRComposedDeltaHand(t *testing.T) {
	for _, eps0 := range []float64{0.1, 1, 5} {
		e := math.Exp(eps0)
		// T = 1: c (e^eps0 - e^eps) for 0 <= eps < eps0, k = 5.
		c := 1 / (e + 4)
		for _, eps := range []float64{0, eps0 / 3} {
			want := c * (e - math.Exp(eps))
			if got := oracleRRComposedDelta(eps0, 5, 1, eps); !oracleClose(got, want, oracleTolHand, 0) {
				t.Errorf("T=1 eps0=%g eps=%g: %v, want %v", eps0, eps, got, want)
			}
		}
		// T = 2, k = 2, eps = 0: p^2 (1 - e^-2eps0) = p^2 - (1-p)^2 = 2p - 1
		// = tanh(eps0/2).
		if got, want := oracleRRComposedDelta(eps0, 2, 2, 0), math.Tanh(eps0/2); !oracleClose(got, want, oracleTolHand, 0) {
			t.Errorf("T=2 k=2 eps0=%g: %v, want tanh = %v", eps0, got, want)
		}
		// At eps >= T eps0 nothing is left; T = 0 is the identity.
		if got := oracleRRComposedDelta(eps0, 4, 3, 3*eps0); got != 0 {
			t.Errorf("eps = T eps0: %v, want 0", got)
		}
		if got := oracleRRComposedDelta(eps0, 4, 0, 0); got != 0 {
			t.Errorf("T = 0: %v, want 0", got)
		}
	}
}

func TestOracleRRComposedDeltaLargeT(t *testing.T) {
	// Against the T-fold product of the one-round PLD (3 atoms, merged to
	// 2T+1 losses), for T up to 1000.
	for _, c := range []struct {
		k    int
		eps0 float64
		T    int
	}{{2, 0.1, 1000}, {3, 0.05, 1000}, {10, 0.5, 300}, {4, 1, 100}} {
		e := math.Exp(c.eps0)
		cc := 1 / (e + float64(c.k) - 1)
		one := []oracleAtom{{c.eps0, e * cc, cc}, {-c.eps0, cc, e * cc}}
		if c.k > 2 {
			one = append(one, oracleAtom{0, float64(c.k-2) * cc, float64(c.k-2) * cc})
		}
		// Compose by repeated squaring of the PLD: log2(T) products.
		acc := []oracleAtom{{0, 1, 1}}
		pow := one
		for T := c.T; T > 0; T >>= 1 {
			if T&1 == 1 {
				acc = oracleProduct(acc, pow)
			}
			pow = oracleProduct(pow, pow)
		}
		mean := float64(c.T) * c.eps0 * (e - 1) * cc // E L per round = eps0 (e-1) c
		sd := math.Sqrt(float64(c.T)) * c.eps0
		for _, z := range []float64{-2, 0, 1, 3, 5} {
			eps := math.Max(0, mean+z*sd)
			want := oracleComposedDeltaPLD([][]oracleAtom{acc}, eps)
			got := oracleRRComposedDelta(c.eps0, c.k, c.T, eps)
			if !oracleClose(got, want, oracleTolLargeT, 1e-300) {
				t.Errorf("k=%d eps0=%g T=%d eps=%g: closed form %v, PLD product %v (rel %.2g)",
					c.k, c.eps0, c.T, eps, got, want, oracleRelDiff(got, want))
			}
		}
	}
}

func TestOracleMergeKeepsMass(t *testing.T) {
	// Merging adds masses and never loses the +Inf or -Inf atoms.
	in := []oracleAtom{
		{1, 0.2, 0.1}, {math.Inf(1), 0.1, 0}, {1 + 1e-14, 0.2, 0.1},
		{math.Inf(-1), 0, 0.3}, {-0.5, 0.5, 0.5}, {0.3, 0, 0},
	}
	out := oracleMerge(in)
	if len(out) != 4 {
		t.Fatalf("merged %v, want 4 atoms", out)
	}
	if out[0].Loss != math.Inf(-1) || out[3].Loss != math.Inf(1) || out[2].P != 0.4 {
		t.Errorf("merged %v", out)
	}
	// Products of a +Inf atom with a P = 0 atom are dropped, not NaN.
	prod := oracleProduct(out, out)
	for _, a := range prod {
		if math.IsNaN(a.Loss) {
			t.Errorf("product has a NaN loss: %v", prod)
		}
	}
}
