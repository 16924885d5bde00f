package longitudinal

// The server, Algorithm 2 of Erlingsson et al. (2019), with the exact
// variance of its estimate (the paper's Theorem 6 bounds the error with
// high probability; the variance gives confidence intervals at any level).
//
// Let k be the changes parameter, L the levels, c = (e^eps0-1)/(e^eps0+1),
// and S(N) = #(+1) - #(-1) the sum of the reports of node N. For a user i
// let Z_i(N) be its report's bit when its level is N's, else 0. Given the
// data, the users are independent and:
//
//	E Z_i(N) = P(h_i = level(N)) · Σ_j P(j_i = j) · c·v_ij(N)
//	         = c/(kL) · Σ_{j<=k} v_ij(N),
//
// v_ij(N) the sign of user i's j-th change when it lies in N. The nodes
// that cover [1, p] (at most one per level) add up, for each j <= k, to
// the sign of the j-th change if it happened by p; summed over j that is
// u_i(p), the user's state at p as far as its first k changes go (0 or 1).
// So û(p) = (kL/c) Σ_{N in cover(p)} S(N) is unbiased for u(p) = Σ_i u_i(p).
//
// Variance: Z_i(N)² = 1 when user i's level is N's (probability 1/L), and
// two cover nodes have different levels, so Z_i(N) Z_i(N') = 0. Hence
//
//	Var Σ_N Z_i(N) = |cover|/L - (c u_i(p)/(kL))²,
//	Var û(p) = (kL/c)² Σ_{N in cover} E[n_N] - Σ_i u_i(p)²
//	         = (kL/c)² Σ_{N in cover} E[n_N] - u(p),
//
// with n_N the number of reports of node N (E n_N = (users present)/L) and
// u_i² = u_i. Replacing E[n_N] by n_N and u(p) by û(p) gives an unbiased
// estimate of the variance; it is clamped at 0.

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Estimate implements sdk.Randomizer: one item, labelled with the on
// state, the estimated number of users in that state at the latest period
// the statistic holds reports of (the end of its latest non-empty node),
// from the node sums that cover the tree up to that period. Pass the
// merged statistics of the tree's periods up to the period wanted
// (Description.Span). Post-processing clamps the estimate and its
// interval at 0.
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, 2*r.tree.size(), true); err != nil {
		return nil, err
	}
	p := r.latest(stat.Counts)
	if p == 0 {
		return nil, fmt.Errorf("%w: no node reports", sdk.ErrBadStatistic)
	}
	value, variance := r.estimateAt(stat.Counts, stat.Eps0, p)
	half := r.zScore() * math.Sqrt(variance)
	item := sdk.Item{
		Label:    r.desc.Categories[1],
		Value:    value,
		Variance: variance,
		Lo:       value - half,
		Hi:       value + half,
		Post:     math.Max(0, value),
		PostLo:   math.Max(0, value-half),
		PostHi:   math.Max(0, value+half),
	}
	return ldp.NewEstimate(Name, stat, r.conf, []sdk.Item{item}), nil
}

// Position returns the position in the tree (1..Tree) of the period a
// statistic's estimate is for: the end of its latest node with reports,
// 0 when it has none. Errors wrap sdk.ErrBadStatistic.
func (r *Randomizer) Position(stat *sdk.Statistic) (int, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, 2*r.tree.size(), true); err != nil {
		return 0, err
	}
	return r.latest(stat.Counts), nil
}

// latest returns the largest end of a node with reports, 0 for none.
func (r *Randomizer) latest(counts []int64) int {
	p := 0
	for i := 0; i < r.tree.size(); i++ {
		if counts[2*i]+counts[2*i+1] > 0 {
			h, m := r.tree.node(i)
			p = max(p, end(h, m))
		}
	}
	return p
}

// estimateAt returns û(p) and its estimated variance from node counts.
func (r *Randomizer) estimateAt(counts []int64, eps0 float64, p int) (value, variance float64) {
	scale := float64(r.k) * float64(r.tree.levels) / rrGain(eps0)
	var sum, reports float64
	for _, n := range r.tree.cover(p) {
		i := r.tree.index(n[0], n[1])
		sum += float64(counts[2*i] - counts[2*i+1])
		reports += float64(counts[2*i] + counts[2*i+1])
	}
	value = scale * sum
	return value, math.Max(0, scale*scale*reports-value)
}
