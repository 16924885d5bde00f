package ldp

import (
	"math"
	"slices"

	"github.com/blanket-dp/blanket/sdk"
)

// Pure is a pure frequency protocol (Wang et al. 2017, Def. 3): every report
// "supports" a set of values, and supports the sender's value with
// probability P and any other given value with probability Q < P.
type Pure struct {
	// P is p*, the probability that a report supports its sender's value.
	P float64
	// Q is q*, the probability that it supports another given value.
	Q float64
	// Diff is P - Q, computed in closed form so that it keeps its precision
	// when eps0 is small.
	Diff float64
}

// Count returns the unbiased count estimate (C - n·Q)/(P - Q) of a value
// supported by C of n reports (Wang et al. 2017, Thm. 2).
func (p Pure) Count(support, n int64) float64 {
	return (float64(support) - float64(n)*p.Q) / p.Diff
}

// Variance returns the variance of Count for n reports of which nv have the
// value (Wang et al. 2017, eq. 3):
//
//	n·Q(1-Q)/(P-Q)² + nv·(1-P-Q)/(P-Q).
//
// Estimate plugs in the estimate itself, clamped to [0, n], for nv.
func (p Pure) Variance(n, nv float64) float64 {
	v := n*p.Q*(1-p.Q)/(p.Diff*p.Diff) + nv*(1-p.P-p.Q)/p.Diff
	return math.Max(v, 0)
}

// Items returns one Item per label from the support counts of n reports:
// Value is Count, Variance is Variance with the clamped estimate plugged in,
// [Lo, Hi] is Value ± z·sqrt(Variance). Post is the Norm-Sub projection of
// the values onto {c >= 0, sum c = n} (Wang, Lopuhaä-Zwakenberg, Li, Skoric,
// Li, "Locally Differentially Private Frequency Estimation with
// Consistency", NDSS 2020), i.e. max(Value + shift, 0) with one common
// shift; [PostLo, PostHi] is [Lo, Hi] moved by the same shift and clipped to
// [0, n], so it contains Post (its coverage is not guaranteed).
func (p Pure) Items(labels []string, support []int64, n int64, confidence float64) []sdk.Item {
	return p.items(labels, support, n, 0, nil, confidence)
}

// items is Items with draws of n drawn from the blanket, each supporting
// label i with probability s(i) (FloorItems; floor.go).
func (p Pure) items(labels []string, support []int64, n, draws int64, s func(int) float64, confidence float64) []sdk.Item {
	z := ZScore(confidence)
	nf := float64(n - draws)
	items := make([]sdk.Item, len(labels))
	values := make([]float64, len(labels))
	for i, l := range labels {
		v := p.Count(support[i], n-draws)
		var vd float64
		if draws > 0 {
			si := s(i)
			v -= float64(draws) * si / p.Diff
			vd = float64(draws) * si * (1 - si) / (p.Diff * p.Diff)
		}
		vr := p.Variance(nf, min(max(v, 0), nf)) + vd
		h := z * math.Sqrt(vr)
		items[i] = sdk.Item{Label: l, Value: v, Variance: vr, Lo: v - h, Hi: v + h}
		values[i] = v
	}
	shift := NormSubShift(values, nf)
	for i := range items {
		it := &items[i]
		it.Post = max(it.Value+shift, 0)
		it.PostLo = min(max(it.Lo+shift, 0), nf)
		it.PostHi = min(max(it.Hi+shift, 0), nf)
	}
	return items
}

// NormSubShift returns the shift s such that sum_i max(v_i + s, 0) = total
// (total > 0): the Euclidean projection of v onto the scaled simplex is
// max(v + s, 0) (Duchi, Shalev-Shwartz, Singer, Chandra, ICML 2008).
func NormSubShift(v []float64, total float64) float64 {
	sorted := slices.Clone(v)
	slices.SortFunc(sorted, func(a, b float64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	var cum, shift float64
	for i, x := range sorted {
		cum += x
		s := (total - cum) / float64(i+1)
		if x+s > 0 {
			shift = s
		} else {
			break
		}
	}
	return shift
}

// ClippedItem returns the Item of an unbiased estimate v of a real
// quantity with the given variance: [Lo, Hi] is v ± z·sqrt(variance),
// and Post, PostLo and PostHi are v, Lo and Hi clipped to the feasible
// [lo, hi] (a sum's or a mean's range).
func ClippedItem(z float64, label string, v, variance, lo, hi float64) sdk.Item {
	h := z * math.Sqrt(variance)
	clip := func(x float64) float64 { return min(max(x, lo), hi) }
	return sdk.Item{Label: label, Value: v, Variance: variance, Lo: v - h, Hi: v + h,
		Post: clip(v), PostLo: clip(v - h), PostHi: clip(v + h)}
}
