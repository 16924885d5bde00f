package laplace

// The declaration: the library's exact output law, coarsened soundly.
//
// Law (laplace.go). At eps0 the grid step is g = 1/m (m a power of two,
// 2^30..2^44 over the supported eps0 [1e-3, 30]), the rate lam = eps0/(m+1), and an
// input at centre c in {0..m} outputs the grid index k in Z with
// P(k | c) = t·u^|k-c|, t = tanh(lam/2), u = e^-lam. Sums of a run of
// outputs are geometric series; with t/(1-u) = 1/(1+u) exactly,
//
//	sum_{k=a..b} t·u^(k+C) = u^(a+C)·(1 - u^w)/(1 + u),   w = b - a + 1,
//	sum_{k=a..b} t·u^(C-k) = u^(C-b)·(1 - u^w)/(1 + u),
//
// evaluated with expm1 (1 - u^w = -expm1(-lam·w)) so nothing cancels.
//
// Upper bound: the pair (x, x') = (Lo, Hi), centres 0 and m. The blanket
// is r_k = min_c P(k|c) = t·u^max(|k|, |k-m|) (the farther end). The
// ratio points (p/r, q/r) are: (e^(lam·m), 1) for every k < 0 (one exact
// atom: the left tail); (e^(lam(m-2k)), 1) for 0 <= k <= m/2, a straight
// horizontal segment; (1, e^(lam(2k-m))) for m/2 < k <= m, a vertical one;
// (1, e^(lam·m)) for k > m. Each half is cut into Bins runs of outputs; a
// run's points lie on its half's segment between those of its first and
// last output, which is all the segments form asks (accountant/segments.go
// proves the split sound). (Lo, Hi) is the worst pair under the blanket,
// in every composition: worstpair.go proves it (Su et al. 2025, Section 8,
// left it open).
//
// Lower bound: the triple x3 = x = Lo (the other users at the first
// input, which gave the largest lower bound of the centres tried: 0, m/50,
// m/10, m/4, m/2). Then r = p, p/r = 1, and q/r = u^(|k-m| - |k|):
// e^(-lam·m) for k < 0, e^(lam(2k-m)) on [0, m] (one vertical segment),
// e^(lam·m) for k > m. The accountant also evaluates the swapped triple
// (x3 = x').
//
// Both sets use the same partition of the outputs (binning), so that
// Outputs maps a report to its bin in either.

import (
	"math"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// Bins is the number of bins per half of [0, m] in the declaration: 32,
// with which the upper bound is within 0.02% of its limit (finer bins
// change eps by less; see the README's evidence).
const Bins = 32

// binning is the partition of the outputs k: the left tail k < 0, bins
// runs of [0, m/2], bins runs of (m/2, m], the right tail k > m.
type binning struct {
	m, w, bins int64 // grid steps, run width m/(2·bins), runs per half
	lam        float64
}

func newBinning(eps0 float64, bins int) binning {
	m := int64(math.Round(1 / Grid(eps0)))
	return binning{m: m, w: m / int64(2*bins), bins: int64(bins), lam: Rate(eps0)}
}

// runs returns the first and last output of each bin of [0, m], in order:
// bins of [0, m/2] (the last one ends at m/2), then of (m/2, m].
func (b binning) runs() [][2]int64 {
	h := b.m / 2
	out := make([][2]int64, 0, 2*b.bins)
	for i := range b.bins {
		end := (i+1)*b.w - 1
		if i == b.bins-1 {
			end = h
		}
		out = append(out, [2]int64{i * b.w, end})
	}
	for i := range b.bins {
		end := h + (i+1)*b.w
		if i == b.bins-1 {
			end = b.m // whatever bins divides
		}
		out = append(out, [2]int64{h + 1 + i*b.w, end})
	}
	return out
}

// binOf returns the index of output k's bin: 0 for the left tail, then the
// runs in order, then the right tail.
func (b binning) binOf(k int64) int {
	h := b.m / 2
	switch {
	case k < 0:
		return 0
	case k <= h:
		return 1 + int(min(k/b.w, b.bins-1))
	case k <= b.m:
		return 1 + int(b.bins) + int(min((k-h-1)/b.w, b.bins-1))
	default:
		return 1 + 2*int(b.bins)
	}
}

// geometric sums over a run [a, b] of t·u^(k+c) (up) and t·u^(c-k) (down).
func (b binning) up(a, z, c int64) float64 {
	return math.Exp(-b.lam*float64(a+c)) * -math.Expm1(-b.lam*float64(z-a+1)) / (1 + math.Exp(-b.lam))
}

func (b binning) down(a, z, c int64) float64 {
	return math.Exp(-b.lam*float64(c-z)) * -math.Expm1(-b.lam*float64(z-a+1)) / (1 + math.Exp(-b.lam))
}

// ratio returns e^(lam·x).
func (b binning) ratio(x int64) float64 { return math.Exp(b.lam * float64(x)) }

// Declaration returns the segments declaration at eps0 with bins bins per
// half (see the comment at the top of this file): the pair (Lo, Hi) and
// the triple with x3 = Lo.
func Declaration(eps0 float64, bins int) *declare.Declaration {
	b := newBinning(eps0, bins)
	m := b.m
	tail := math.Exp(-b.lam) / (1 + math.Exp(-b.lam)) // sum_{j>=1} t·u^j
	far := math.Exp(-b.lam*float64(m)) * tail         // sum_{j>=1} t·u^(m+j)
	point := func(x, y float64) [2]float64 { return [2]float64{x, y} }

	pair := declare.DeclaredSet{Label: "x=lo, x'=hi"}
	pair.Bins = append(pair.Bins, declare.Bin{R: far, P: tail, Q: far, Lo: point(b.ratio(m), 1), Hi: point(b.ratio(m), 1)})
	triple := declare.DeclaredSet{Label: "x=lo, x'=hi, x3=lo"}
	triple.Bins = append(triple.Bins, declare.Bin{R: tail, P: tail, Q: far, Lo: point(1, b.ratio(-m)), Hi: point(1, b.ratio(-m))})
	for i, run := range b.runs() {
		a, z := run[0], run[1]
		up, down := b.up(a, z, 0), b.down(a, z, m) // sum t·u^k, sum t·u^(m-k)
		if i < bins {
			// k <= m/2: r = q = t·u^(m-k), p = t·u^k.
			pair.Bins = append(pair.Bins, declare.Bin{R: down, P: up, Q: down, Lo: point(b.ratio(m-2*a), 1), Hi: point(b.ratio(m-2*z), 1)})
		} else {
			// k > m/2: r = p = t·u^k, q = t·u^(m-k).
			pair.Bins = append(pair.Bins, declare.Bin{R: up, P: up, Q: down, Lo: point(1, b.ratio(2*a-m)), Hi: point(1, b.ratio(2*z-m))})
		}
		// x3 = 0: r = p = t·u^k, q = t·u^(m-k).
		triple.Bins = append(triple.Bins, declare.Bin{R: up, P: up, Q: down, Lo: point(1, b.ratio(2*a-m)), Hi: point(1, b.ratio(2*z-m))})
	}
	pair.Bins = append(pair.Bins, declare.Bin{R: far, P: far, Q: tail, Lo: point(1, b.ratio(m)), Hi: point(1, b.ratio(m))})
	triple.Bins = append(triple.Bins, declare.Bin{R: far, P: far, Q: tail, Lo: point(1, b.ratio(m)), Hi: point(1, b.ratio(m))})
	return &declare.Declaration{Eps0: eps0, Form: declare.FormSegments,
		Pairs: []declare.DeclaredSet{pair}, Triples: []declare.DeclaredSet{triple}}
}
