package accountant

// WorstOf: one report shuffled by a mechanism known only to be one of
// several, M_1, ..., M_k (a period's batch whose mix of metrics is one of
// several, say), bounded by one dominating pair.
//
// Proof sketch (the bound is sound).
//
//  1. For each M_i at n, every neighbouring pair (x, x') of M_i has a
//     candidate set s in M_i's Decomposition.Upper whose pair (P*_s, Q*_s)
//     (pld.go, "Why the single-report bound is the profile of a pair")
//     dominates the shuffled output of M_i on (x, x'): H_a(M_i(x) ||
//     M_i(x')) <= H_a(P*_s || Q*_s) for every a >= 0. The engine bounds M_i
//     by F_i(a) = max over its candidates of H_a(P*_s || Q*_s) (and their
//     swaps), the profile of a dominating pair of M_i.
//  2. WorstOf's Upper is the union of the M_i's Upper sets, so the engine
//     bounds it by F(a) = max over the union = max_i F_i(a) >= F_i(a) for
//     every i and a: the pair the engine builds from F dominates every
//     M_i at n. Its eps at delta for one report is max_i of the M_i's
//     (both are the largest root over the same candidates).
//     The mechanism M_i is the whole batch's: every user of the batch runs
//     it (M_i's blanket is drawn from the others running M_i), as when a
//     parallel batch's mix is one of several; a choice of mechanism per
//     user is not covered.
//  3. A round whose mechanism is any M_i, chosen by anything that does not
//     depend on the victim's data (even adaptively, from earlier outputs),
//     is dominated by that one pair, and the composition of rounds each
//     dominated by a fixed pair is dominated by the composition of the
//     pairs (the adaptive composition theorem for dominating pairs, Zhu,
//     Dong, Wang 2022; docs/time.md section 2): Composition over rounds of
//     WorstOf bounds every sequence of the M_i.
//  4. UpperSame is the union too: it matters only when WorstOf is a
//     component of a joint or parallel composition, which takes the
//     maximum over every choice of one set per component; the choices that
//     describe the mechanism actually run are among those of the union,
//     and more candidates only raise the maximum.
//  5. LocalEps is max_i of the M_i's (each M_i is at most that LDP), and
//     no lower bound is claimed (Lower is nil: which mechanism ran is not
//     known, and the lower bound 0 is always valid). KRR is 0: the k-RR
//     closed forms do not apply to the mixture of possibilities.
//
// ParallelFloor: the parallel compositions ParallelMech{w, R_1..R_m} of
// the same components over every weights w >= f (componentwise, f_j > 0,
// sum f <= 1; the mixes of metrics of many batches at once), bounded by
// m candidate families instead of one per w. Let rho = 1 - sum f, and for
// a w >= f let e = w - f (e >= 0, sum e = rho).
//
//  6. Blanket. Every other user's output (j, y) has mass w_j R_j(x_u)(y)
//     >= f_j r_j(y), r_j the blanket of R_j's decomposition. Taking the
//     smaller blanket f_j r_j is sound: the rest of each user's law is
//     handed to the adversary, and the pair with the larger blanket is a
//     post-processing of the pair with the smaller one (each residual
//     draw moved to blanket atom a with probability
//     (r_a - r'_a)/(1 - gamma'); the victim never lands in the residual,
//     its atoms' P and Q summing to 1).
//  7. Victim. Its law is sum_j w_j R_j(x_j) = sum_i (e_i/rho) [sum_j f_j
//     R_j(x_j) + rho R_i(x_i)]: a mixture over i, with the same
//     coefficients under x and x', of the randomizers whose weights are
//     v = f + rho 1_i (1_i the i-th unit vector). The shuffled view is
//     then the same mixture of the views with the victim drawn from each,
//     and by joint convexity of the hockey-stick divergence it is at most
//     the largest, over i, of the views with weights v (with rho = 0 there
//     is one, ParallelMech{f}).
//  8. So for each i, and each set of changed components with one candidate
//     set each (as ParallelMech enumerates them), the blanket argument of
//     pld.go applied to victim weights v and blanket weights f gives the
//     atoms (f_j r, v_j p, v_j q) of each component j's atoms (r, p, q);
//     the largest, over i, of their pairs' profiles bounds ParallelMech{w}
//     on that neighbouring pair, for the true mechanism and for the pair
//     of each of ParallelMech{w}'s own
//     candidate sets alike (that pair is the shuffle of a victim drawn
//     from atoms (w_j p) among others drawn from blanket (w_j r), to which
//     6 and 7 apply): the pair of each of its candidates has a profile at
//     most the largest, over i, of the pairs with the same changed
//     components and choices here. So the engine's maximum over these
//     candidates is at least ParallelMech{w}'s, for every w >= f, and
//     point 3 composes it. Its price is the blanket fraction rho given up,
//     small when the mixes are close.
//     LocalEps, Lower and KRR as in 5.

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// WorstOfMech is a mechanism known only to be one of Parts: its upper bound
// dominates each of them (the union of their candidate neighbouring pairs;
// see the proof at the top of worst.go). It claims no lower bound.
type WorstOfMech struct {
	// Parts are the mechanisms one of which runs. Required, at least one.
	// Each is decomposed at the budget WorstOfMech is given, or at its own
	// when it fixes one.
	Parts []Mechanism
}

// WorstOf returns the mechanism that is one of parts, not known which.
func WorstOf(parts ...Mechanism) WorstOfMech { return WorstOfMech{Parts: parts} }

// String implements Mechanism. The form worst(a,b,...) is for messages:
// the --mech grammar has no worst.
func (m WorstOfMech) String() string { return "worst(" + joinNames(m.Parts) + ")" }

// FixedEps0 implements Mechanism: fixed when every part is fixed, at the
// largest of their budgets.
func (m WorstOfMech) FixedEps0() (float64, bool) {
	var mx float64
	for _, p := range m.Parts {
		e, ok := p.FixedEps0()
		if !ok {
			return 0, false
		}
		mx = math.Max(mx, e)
	}
	return mx, len(m.Parts) > 0
}

// Decompose implements Mechanism: every part at eps0 (or its own fixed
// budget), their upper candidate sets united, no lower sets.
func (m WorstOfMech) Decompose(eps0 float64) (*Decomposition, error) {
	if len(m.Parts) == 0 {
		return nil, argError("worst-of parts", 0, "at least 1")
	}
	d := &Decomposition{}
	for i, p := range m.Parts {
		if p == nil {
			return nil, argError(fmt.Sprintf("worst-of part %d", i+1), nil, "set")
		}
		pd, err := p.Decompose(eps0)
		if err != nil {
			return nil, fmt.Errorf("worst-of part %d: %w", i+1, err)
		}
		if len(pd.Upper) == 0 {
			return nil, fmt.Errorf("%w: worst-of part %d (%s) has no upper candidate set", ErrInvalidArgument, i+1, p)
		}
		d.LocalEps = math.Max(d.LocalEps, pd.LocalEps)
		d.Upper = append(d.Upper, pd.Upper...)
		d.UpperSame = append(d.UpperSame, pd.UpperSame...)
	}
	d.Upper, d.UpperSame = dedupe(d.Upper), dedupe(d.UpperSame)
	return d, nil
}

// ParallelFloorMech is the worst of the parallel compositions of Parts
// over every weights w with w_j >= Floor[j] for each j (the mixes of
// metrics of many batches, bounded together): its bound dominates
// ParallelMech{Weights: w, Parts: Parts} for each such w. See the proof at
// the top of worst.go.
type ParallelFloorMech struct {
	// Floor are the smallest weights, one per part. Required: each in
	// (0, 1], their sum at most 1.
	Floor []float64
	// Parts are the components, one per floor weight. Required.
	Parts []Mechanism
}

// ParallelFloor returns the worst of the parallel compositions of parts
// over every weights at least floor.
func ParallelFloor(floor []float64, parts ...Mechanism) ParallelFloorMech {
	return ParallelFloorMech{Floor: floor, Parts: parts}
}

// String implements Mechanism. The form parallel>=(...) is for messages:
// the --mech grammar has no floor.
func (m ParallelFloorMech) String() string {
	return "parallel>=" + strings.TrimPrefix(ParallelMech{Weights: m.Floor, Parts: m.Parts}.String(), "parallel")
}

// FixedEps0 implements Mechanism: fixed when every part is fixed.
func (m ParallelFloorMech) FixedEps0() (float64, bool) {
	return ParallelMech{Weights: m.Floor, Parts: m.Parts}.FixedEps0()
}

// floorSumTol is how far above 1 the floor weights may sum: the weights
// of a batch's mix are counts/total, each rounded, so that the smallest
// of each over several mixes can sum to 1 plus a few ulps.
const floorSumTol = 1e-9

// Decompose implements Mechanism. Every component gets the whole budget.
// With rho = 1 - sum Floor, the candidate sets are, for every part i and
// every set of changed components with one candidate set each, the union
// of each component j's atoms (r, p, q) as (Floor[j] r, v_j p, v_j q),
// v = Floor + rho 1_i (the victim's excess weight on part i); no lower
// sets.
func (m ParallelFloorMech) Decompose(eps0 float64) (*Decomposition, error) {
	sum, parts, d, err := weightedParts("parallel floor", m.Floor, m.Parts, eps0)
	if err != nil {
		return nil, err
	}
	if sum > 1+floorSumTol {
		return nil, argError("parallel floor weights sum", sum, "at most 1")
	}
	rho := max(0, 1-sum)
	for top := range m.Parts {
		v := slices.Clone(m.Floor)
		v[top] += rho
		// combine groups identical components of equal weight: key them
		// by their (floor, victim weight) pair, so that components scaled
		// differently are never taken as interchangeable.
		keys := make([]float64, len(v))
		ids := map[[2]float64]float64{}
		for j := range v {
			k := [2]float64{m.Floor[j], v[j]}
			if _, ok := ids[k]; !ok {
				ids[k] = float64(len(ids))
			}
			keys[j] = ids[k]
		}
		scaled := scaledUnion(m.Floor, v)
		up, err := combine(parts, keys, upperOptions, scaled)
		if err != nil {
			return nil, err
		}
		same, err := combineSame(parts, func(p *Decomposition) []AtomSet { return p.UpperSame }, scaled)
		if err != nil {
			return nil, err
		}
		d.Upper, d.UpperSame = append(d.Upper, up...), append(d.UpperSame, same...)
		if rho == 0 {
			break // every part gives the same sets
		}
	}
	d.Upper, d.UpperSame = dedupe(d.Upper), dedupe(d.UpperSame)
	return d, nil
}
