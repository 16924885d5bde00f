package accountant

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"testing"
)

// The longitudinal per-period bound against the exact divergence of every
// pair of state histories that differ only inside a window, for small
// trees (proof point 3 of longitudinal.go, issue 22).
//
// Independence from the code under test: the histories, the changes, the
// node values and the node reports are computed here from the protocol's
// definition (the victim's j-th change of a tree lies in one node of its
// level h, whose value is its sign; every other node of that level is 0),
// by enumerating every pair of histories and every alignment of the window
// with the trees; the view is the count of +1 bits in each differing
// node's batch, among level-mates at fixed node values, and its hockey-stick
// divergence is summed over every outcome. Nothing here calls nodeStep,
// nodePart, rounds or leakPeriods: the only calls into the accountant are
// Longitudinal.Delta (the bound under test) and TreesInWindow (the number
// of trees a window meets, which the expected count is derived from).
//
//   - TestExactWindowHistoriesMatchTrees: the streamed client over a span
//     of several trees (per period, as Algorithm 1 runs) and the per-tree
//     enumeration the other tests use give the same differing node reports,
//     all sent from the window's first period on.
//   - TestExactWindowDifferingNodes: the largest number of differing node
//     reports is 2T (T when H = 1), less one when W - 1 = 1 mod H.
//   - TestExactWindowBoundCoversExact: the exact divergence is at most the
//     bound's delta, for every pattern of differing reports and every
//     configuration of the level-mates. With the rounds capped at the
//     window's length (the count before issue 22) it fails from W = 1 on.
//
// exact_window_audit_test.go runs deeper grids of the first and last
// (build tag audit, make audit).

const (
	// ewMaxJ is the largest change index enumerated: k in {1, 2}, and j
	// ranges over [1, k], so j in {1, 2} covers both (a node value depends
	// on k only through j).
	ewMaxJ = 2
	// ewRelTol is the relative slack of the comparison with the bound. The
	// bound rounds up by construction, and where it is exact (H = 1, one
	// round) it sits at the exact value times 1 + 1e-9, so the slack is
	// for the rounding of the exact sums (at most 4096 products of at most
	// 6 probabilities: relative error below 1e-12), with room; the old
	// count (rounds capped at W) falls short by 0.1% of the exact value or
	// more.
	ewRelTol = 1e-9
	// ewAbsTol is the absolute slack: at eps at or above the local level
	// the bound is exactly 0 and the exact divergence is 0 up to the
	// rounding of a difference of two sums of probabilities (1e-16 times
	// the number of outcomes).
	ewAbsTol = 1e-12
	// ewSpanPairs caps the pairs of span histories the streamed client is
	// run on per alignment and (j, h) in TestExactWindowHistoriesMatchTrees
	// (a tree of 8 alone, or two trees of 4 or less).
	ewSpanPairs = 1 << 16
)

// ewPattern counts the differing node reports of a pair of histories by
// their node values (v under x, v' under x'), at index (v+1)*3 + (v'+1).
type ewPattern [9]int

func ewIndex(v, vp int) int { return (v+1)*3 + (vp + 1) }

// nodes returns the number of differing node reports.
func (p ewPattern) nodes() int {
	n := 0
	for _, c := range p {
		n += c
	}
	return n
}

// swap returns the pattern of (x', x).
func (p ewPattern) swap() ewPattern {
	var q ewPattern
	for v := -1; v <= 1; v++ {
		for vp := -1; vp <= 1; vp++ {
			q[ewIndex(vp, v)] = p[ewIndex(v, vp)]
		}
	}
	return q
}

func (p ewPattern) String() string {
	var s []string
	for v := -1; v <= 1; v++ {
		for vp := -1; vp <= 1; vp++ {
			if c := p[ewIndex(v, vp)]; c > 0 {
				s = append(s, fmt.Sprintf("%dx(%+d,%+d)", c, v, vp))
			}
		}
	}
	return fmt.Sprint(s)
}

// ewSign returns the value of the node holding the j-th change: +1 for
// odd j (a step up from 0, the state before the tree), -1 for even j.
func ewSign(j int) int {
	if j%2 == 1 {
		return 1
	}
	return -1
}

// ewNodeValues returns the values of the level-h nodes of one tree whose
// states x_1..x_H are the bits 0..H-1 of x (x_0 = 0): the sign of the j-th
// change in the node holding it, 0 elsewhere (all 0 with fewer than j
// changes). Entry m-1 is node m, which covers ((m-1)2^(h-1), m 2^(h-1)].
func ewNodeValues(x uint32, H, j, h int) []int {
	vals := make([]int, H>>(h-1))
	// Bit t-1 of changes is set when x_t != x_{t-1}.
	changes := (x ^ x<<1) & (1<<H - 1)
	for i := 1; i < j && changes != 0; i++ {
		changes &= changes - 1
	}
	if changes != 0 {
		pos := bits.TrailingZeros32(changes) + 1
		vals[(pos-1)>>(h-1)] = ewSign(j)
	}
	return vals
}

// ewTreeKey names one tree's enumeration: the tree, the victim's choices
// and the window's positions [a, b] in the tree (1-based).
type ewTreeKey struct{ H, j, h, a, b int }

// ewTreeMemo holds ewTreePatterns' results; the tests run sequentially.
var ewTreeMemo = map[ewTreeKey]map[ewPattern]bool{}

// ewTreePatterns returns the patterns of differing level-h reports over
// every pair of one tree's histories that differ only at positions [a, b]:
// x over all 2^H histories, x' = x with any subset of [a, b] flipped.
func ewTreePatterns(k ewTreeKey) map[ewPattern]bool {
	if out, ok := ewTreeMemo[k]; ok {
		return out
	}
	out := map[ewPattern]bool{}
	window := uint32(1<<(k.b-k.a+1)-1) << (k.a - 1)
	for x := uint32(0); x < 1<<k.H; x++ {
		v := ewNodeValues(x, k.H, k.j, k.h)
		// Every subset d of the window's bits, the empty one included.
		for d := uint32(0); ; d = (d - window) & window {
			vp := ewNodeValues(x^d, k.H, k.j, k.h)
			var p ewPattern
			for m := range v {
				if v[m] != vp[m] {
					p[ewIndex(v[m], vp[m])]++
				}
			}
			out[p] = true
			if d == window {
				break
			}
		}
	}
	ewTreeMemo[k] = out
	return out
}

// ewWindowTrees returns the positions [a, b] (1-based) of the window
// [o, o+W) (0-based periods, tree t covering [tH, (t+1)H)) in each tree it
// meets, from tree 0 on (o < H).
func ewWindowTrees(H, W, o int) [][2]int {
	var out [][2]int
	for t := 0; t*H < o+W; t++ {
		lo, hi := max(o, t*H), min(o+W, (t+1)*H)
		out = append(out, [2]int{lo - t*H + 1, hi - t*H})
	}
	return out
}

// ewWindowPatterns returns the patterns of differing reports over every
// pair of histories that differ only in the window [o, o+W), for the
// victim's choices (j, h). A tree's node values depend only on its own
// periods (the state is 0 before each tree), and the restrictions of x
// and x' to distinct trees range independently over the pairs that differ
// only in the window's part of each tree, so a window's patterns are the
// sums of one pattern per tree it meets (TestExactWindowHistoriesMatchTrees
// checks this against whole span histories).
func ewWindowPatterns(H, W, o, j, h int) map[ewPattern]bool {
	cur := map[ewPattern]bool{{}: true}
	for _, ab := range ewWindowTrees(H, W, o) {
		next := map[ewPattern]bool{}
		for p := range cur {
			for q := range ewTreePatterns(ewTreeKey{H, j, h, ab[0], ab[1]}) {
				var s ewPattern
				for i := range s {
					s[i] = p[i] + q[i]
				}
				next[s] = true
			}
		}
		cur = next
	}
	return cur
}

// ewAllPatterns returns the patterns of every alignment of a window of W
// periods with trees of H and every choice (j, h).
func ewAllPatterns(H, W int) map[ewPattern]bool {
	out := map[ewPattern]bool{}
	for o := range H {
		for j := 1; j <= ewMaxJ; j++ {
			for h := 1; h <= bits.Len(uint(H)); h++ {
				for p := range ewWindowPatterns(H, W, o, j, h) {
					out[p] = true
				}
			}
		}
	}
	return out
}

// ewReport is one node report of the streamed client: the period it is
// sent in (0-based) and the node value it randomizes.
type ewReport struct{ period, value int }

// ewStream runs the client of the protocol over periods 0..len(x)-1 (tree
// t covering [tH, (t+1)H)), one period at a time as Algorithm 1 does: at a
// tree's first period the state is 0 and no change is seen; a state that
// differs from the last one is a change; at the end of a level-h node the
// node's value is sent (the j-th change's sign when it lies in the node).
// The reports are appended to out[:0].
func ewStream(out []ewReport, x []int, H, j, h int) []ewReport {
	span := 1 << (h - 1)
	out = out[:0]
	var bit, changes, jPos int
	for p, xp := range x {
		pos := p%H + 1
		if pos == 1 {
			bit, changes, jPos = 0, 0, 0
		}
		if xp != bit {
			changes++
			if changes == j {
				jPos = pos
			}
			bit = xp
		}
		if pos%span == 0 {
			v := 0
			if jPos > pos-span && jPos <= pos {
				v = ewSign(j)
			}
			out = append(out, ewReport{p, v})
		}
	}
	return out
}

// TestExactWindowHistoriesMatchTrees enumerates whole histories over the
// span of trees a window meets (every x, and x' = x changed in any subset
// of the window's periods) through the streamed client, and checks that
// the patterns of differing reports are those of ewWindowPatterns (the
// per-tree enumeration the bound is checked with), and that every
// differing report is sent from the window's first period on.
func TestExactWindowHistoriesMatchTrees(t *testing.T) {
	ewCheckSpans(t, func(H int) int { return H + 1 }, ewSpanPairs)
}

// ewCheckSpans runs the check of TestExactWindowHistoriesMatchTrees for
// trees of 1 to 8 periods and windows of 1 to maxW(H) periods at every
// alignment, skipping the alignments with more than pairs pairs of span
// histories.
func ewCheckSpans(t *testing.T, maxW func(H int) int, pairs int) {
	checked, skipped := 0, 0
	for _, H := range []int{1, 2, 4, 8} {
		for W := 1; W <= maxW(H); W++ {
			for o := range H {
				periods := len(ewWindowTrees(H, W, o)) * H
				if 1<<(periods+W) > pairs {
					skipped++
					continue
				}
				for j := 1; j <= ewMaxJ; j++ {
					for h := 1; h <= bits.Len(uint(H)); h++ {
						got := ewSpanPatterns(t, H, W, o, j, h, periods)
						if want := ewWindowPatterns(H, W, o, j, h); !ewSamePatterns(got, want) {
							t.Errorf("H=%d W=%d o=%d j=%d h=%d: span histories give %v, the per-tree enumeration %v", H, W, o, j, h, ewSortedPatterns(got), ewSortedPatterns(want))
						}
					}
				}
				checked++
			}
		}
	}
	t.Logf("%d alignments checked on whole spans, %d over the budget of %d pairs", checked, skipped, pairs)
	if checked < 50 {
		t.Fatalf("only %d alignments checked: the span budget is too small to mean anything", checked)
	}
}

// ewSpanPatterns returns the patterns of differing reports of the streamed
// client over every pair of histories of periods 0..periods-1 that differ
// only in the window [o, o+W), and fails t if a differing report is sent
// before the window's first period.
func ewSpanPatterns(t *testing.T, H, W, o, j, h, periods int) map[ewPattern]bool {
	got := map[ewPattern]bool{}
	x, xp := make([]int, periods), make([]int, periods)
	var r, rp []ewReport
	for xs := range 1 << periods {
		for i := range x {
			x[i] = xs >> i & 1
		}
		r = ewStream(r, x, H, j, h)
		for d := range 1 << W {
			copy(xp, x)
			for i := range W {
				xp[o+i] ^= d >> i & 1
			}
			rp = ewStream(rp, xp, H, j, h)
			var p ewPattern
			for i := range r {
				if r[i].value == rp[i].value {
					continue
				}
				p[ewIndex(r[i].value, rp[i].value)]++
				if r[i].period < o {
					t.Fatalf("H=%d W=%d o=%d j=%d h=%d: the report of period %d differs, before the window's first period %d", H, W, o, j, h, r[i].period, o)
				}
			}
			got[p] = true
		}
	}
	return got
}

func ewSamePatterns(a, b map[ewPattern]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for p := range a {
		if !b[p] {
			return false
		}
	}
	return true
}

func ewSortedPatterns(s map[ewPattern]bool) []ewPattern {
	out := make([]ewPattern, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b ewPattern) int { return slices.Compare(a[:], b[:]) })
	return out
}

// ewWantNodes returns the largest number of differing node reports over
// the pairs of histories of a window of W periods with trees of H periods,
// from T = TreesInWindow(H, W). With H = 1 a tree is one node: T. With
// H >= 2, in a tree the window meets at positions [a, b], x and x' agree
// before a, so the j-th change lies at the same position under both or at
// positions >= a under both: two reports can differ (the change moving
// between two leaves, as in 1,1 against 0,1) exactly when a < H. Every tree
// the window meets but the first has a = 1; the first has a = H - l + 1,
// where l is the window's length in it. A window meeting T >= 2 trees
// spends W - (T-2)H periods in its first and last trees, at most H in
// each, so some alignment gives l >= 2 unless W - (T-2)H = 2, that is
// W - 1 = 1 mod H: then every alignment meeting T trees gives 2T - 1, and
// one meeting fewer trees at most 2T - 2. (W = 1: one tree, a = b < H for
// some alignment: 2.)
func ewWantNodes(H, W int) int {
	T := TreesInWindow(H, W)
	switch {
	case H == 1:
		return T
	case T >= 2 && (W-1)%H == 1:
		return 2*T - 1
	}
	return 2 * T
}

// TestExactWindowDifferingNodes checks the number of differing node
// reports: the largest over every pair of histories, alignment and (j, h)
// equals ewWantNodes (so at most two per tree the window meets, one when
// H = 1, and exactly that but for W - 1 = 1 mod H), and every differing
// node goes between 0 and the sign fixed by j.
func TestExactWindowDifferingNodes(t *testing.T) {
	for _, H := range []int{1, 2, 4, 8} {
		for W := 1; W <= 3*H+2; W++ {
			var most int
			for p := range ewAllPatterns(H, W) {
				most = max(most, p.nodes())
				for i, c := range p {
					if v, vp := i/3-1, i%3-1; c > 0 && v != 0 && vp != 0 {
						t.Errorf("H=%d W=%d: pattern %v has a node from %+d to %+d: the j-th change's sign is fixed by j", H, W, p, v, vp)
					}
				}
			}
			T := TreesInWindow(H, W)
			if want := ewWantNodes(H, W); most != want {
				t.Errorf("H=%d W=%d: at most %d node reports differ, want %d (T = %d trees)", H, W, most, want, T)
			}
			if perTree := min(H, 2); most > perTree*T {
				t.Errorf("H=%d W=%d: %d node reports differ, more than %d per tree the window meets (T = %d)", H, W, most, perTree, T)
			}
		}
	}
}

// ewCountLaw returns the law of the number of +1 bits among m reports of
// one node batch: the victim's, on node value v, and the mates', n[0] on
// -1, n[1] on 0 and n[2] on +1 (sum m-1). Each report is binary randomized
// response: b = v with probability e^eps0/(e^eps0+1) for v = ±1, uniform
// for v = 0.
func ewCountLaw(eps0 float64, v int, n [3]int) []float64 {
	hi := 1 / (1 + math.Exp(-eps0)) // e^eps0/(e^eps0+1)
	up := [3]float64{1 - hi, 0.5, hi}
	law := []float64{1}
	add := func(p float64) {
		next := make([]float64, len(law)+1)
		for c, w := range law {
			next[c] += w * (1 - p)
			next[c+1] += w * p
		}
		law = next
	}
	add(up[v+1])
	for i, k := range n {
		for range k {
			add(up[i])
		}
	}
	return law
}

// ewMateConfigs returns every configuration of m-1 mates' node values:
// the numbers at -1, 0 and +1 (their order does not change the count).
func ewMateConfigs(m int) [][3]int {
	var out [][3]int
	for a := 0; a < m; a++ {
		for b := 0; a+b < m; b++ {
			out = append(out, [3]int{a, b, m - 1 - a - b})
		}
	}
	return out
}

// ewExactKey names an exact divergence: the pattern, eps0 and the mates.
type ewExactKey struct {
	p    ewPattern
	eps0 float64
	m    int
}

// ewExactMemo holds ewExactDelta's results, by eps.
var ewExactMemo = map[ewExactKey]map[float64]float64{}

// ewExactDelta returns, for each eps, the exact hockey-stick divergence
// max over orders of sum_o (P(o) - e^eps Q(o))_+ of the view of the
// pattern's differing node reports (the other reports have the same law
// under both histories, and a product with identical factors has the
// divergence of the rest): o is the tuple of counts of +1 bits, one per
// differing node, P its law under x and Q under x'. Each node's mates are
// chosen independently among every configuration, and the maximum is over
// the joint choice (nodes of the same (v, v') are exchangeable, so their
// configurations are enumerated as multisets).
func ewExactDelta(p ewPattern, eps0 float64, m int, epss []float64) map[float64]float64 {
	key := ewExactKey{p, eps0, m}
	if d, ok := ewExactMemo[key]; ok && !slices.ContainsFunc(epss, func(e float64) bool { _, ok := d[e]; return !ok }) {
		return d
	}
	configs := ewMateConfigs(m)
	// The nodes, grouped by (v, v'), and each node's laws per configuration.
	type node struct {
		typ  int
		P, Q [][]float64
	}
	var nodes []node
	for i, c := range p {
		v, vp := i/3-1, i%3-1
		for range c {
			nd := node{typ: i}
			for _, cfg := range configs {
				nd.P = append(nd.P, ewCountLaw(eps0, v, cfg))
				nd.Q = append(nd.Q, ewCountLaw(eps0, vp, cfg))
			}
			nodes = append(nodes, nd)
		}
	}
	expEps := make([]float64, len(epss))
	for i, e := range epss {
		expEps[i] = math.Exp(e)
	}
	best := make([]float64, len(epss))
	// P[d], Q[d] are the product laws of nodes[:d], flattened; P[0] = Q[0]
	// = {1}, and each level is a buffer reused across configurations.
	P, Q := make([][]float64, len(nodes)+1), make([][]float64, len(nodes)+1)
	P[0], Q[0] = []float64{1}, []float64{1}
	for d := range nodes {
		size := len(P[d]) * (m + 1)
		P[d+1], Q[d+1] = make([]float64, size), make([]float64, size)
	}
	cfgOf := make([]int, len(nodes))
	var rec func(d int)
	rec = func(d int) {
		if d == len(nodes) {
			for i, a := range expEps {
				var pq, qp float64
				for o, po := range P[d] {
					qo := Q[d][o]
					pq += max(0, po-a*qo)
					qp += max(0, qo-a*po)
				}
				best[i] = max(best[i], pq, qp)
			}
			return
		}
		first := 0
		if d > 0 && nodes[d-1].typ == nodes[d].typ {
			first = cfgOf[d-1]
		}
		for c := first; c < len(configs); c++ {
			cfgOf[d] = c
			np, nq := nodes[d].P[c], nodes[d].Q[c]
			for o := range P[d] {
				for y := range np {
					P[d+1][o*len(np)+y] = P[d][o] * np[y]
					Q[d+1][o*len(np)+y] = Q[d][o] * nq[y]
				}
			}
			rec(d + 1)
		}
	}
	rec(0)
	out := make(map[float64]float64, len(epss))
	for i, e := range epss {
		out[e] = best[i]
	}
	ewExactMemo[key] = out
	return out
}

// ewBoundKey names one bound: Longitudinal{Tree: H, Eps0: eps0, Periods:
// W, Mates: m}.Delta(eps).
type ewBoundKey struct {
	H, W      int
	eps0, eps float64
	m         int
}

// ewBoundMemo holds the bounds computed (each costs about 10 ms).
var ewBoundMemo = map[ewBoundKey]LongitudinalDeltaResult{}

func ewBound(t *testing.T, k ewBoundKey) LongitudinalDeltaResult {
	t.Helper()
	if r, ok := ewBoundMemo[k]; ok {
		return r
	}
	r, err := Longitudinal{Tree: k.H, Eps0: k.eps0, Periods: k.W, Mates: k.m}.Delta(k.eps)
	if err != nil {
		t.Fatalf("%+v: %v", k, err)
	}
	ewBoundMemo[k] = r
	return r
}

// ewGrid is a grid of the bound check: per tree H, windows of 1 to
// maxW(H) periods.
type ewGrid struct {
	trees []int
	maxW  func(H int) int
	eps0s []float64
	mates []int
	epss  []float64
}

// ewTightness is the largest exact/bound ratio over the eps of one
// (H, W, eps0, m), at the pattern that reached it.
type ewTightness struct {
	H, W    int
	eps0    float64
	m       int
	ratio   float64
	eps     float64
	pattern ewPattern
}

// ewCheckGrid checks that, for every (H, W, eps0, m, eps) of g, the exact
// divergence of every pattern of differing reports (both orders, every
// joint mate configuration) is at most the per-period bound's delta and
// the reported Upper, and returns the largest ratio exact/PerPeriod of
// each (H, W, eps0, m) over the eps where the bound is positive.
func ewCheckGrid(t *testing.T, g ewGrid) []ewTightness {
	var out []ewTightness
	for _, H := range g.trees {
		for W := 1; W <= g.maxW(H); W++ {
			// Every pattern is the swap of another (the relation is
			// symmetric) and both orders are summed, so one of each pair
			// is enough.
			all := ewAllPatterns(H, W)
			var pats []ewPattern
			for _, p := range ewSortedPatterns(all) {
				if s := p.swap(); p.nodes() == 0 || (all[s] && slices.Compare(s[:], p[:]) < 0) {
					continue
				}
				pats = append(pats, p)
			}
			for _, eps0 := range g.eps0s {
				for _, m := range g.mates {
					tight := ewTightness{H: H, W: W, eps0: eps0, m: m}
					for _, eps := range g.epss {
						b := ewBound(t, ewBoundKey{H, W, eps0, eps, m})
						var exact float64
						var worst ewPattern
						for _, p := range pats {
							if d := ewExactDelta(p, eps0, m, g.epss)[eps]; d > exact {
								exact, worst = d, p
							}
						}
						switch {
						case exact > b.PerPeriod*(1+ewRelTol)+ewAbsTol:
							t.Errorf("H=%d W=%d eps0=%g mates=%d eps=%g: exact delta %.6g (pattern %v) exceeds the per-period bound's %.6g", H, W, eps0, m, eps, exact, worst, b.PerPeriod)
						case exact > b.Upper*(1+ewRelTol)+ewAbsTol:
							t.Errorf("H=%d W=%d eps0=%g mates=%d eps=%g: exact delta %.6g (pattern %v) exceeds the bound's Upper %.6g", H, W, eps0, m, eps, exact, worst, b.Upper)
						}
						if b.PerPeriod > 0 && exact/b.PerPeriod > tight.ratio {
							tight.ratio, tight.eps, tight.pattern = exact/b.PerPeriod, eps, worst
						}
					}
					out = append(out, tight)
				}
			}
		}
	}
	return out
}

// ewLogTightness logs the largest ratio exact/bound per (H, W, eps0, m).
func ewLogTightness(t *testing.T, ts []ewTightness) {
	slices.SortFunc(ts, func(a, b ewTightness) int {
		return cmp.Or(cmp.Compare(a.H, b.H), cmp.Compare(a.W, b.W), cmp.Compare(a.eps0, b.eps0), cmp.Compare(a.m, b.m))
	})
	for _, x := range ts {
		t.Logf("H=%d W=%-2d eps0=%-3g m=%d: exact/bound %.4f at eps %g (%v)", x.H, x.W, x.eps0, x.m, x.ratio, x.eps, x.pattern)
	}
}

// ewEps is the eps grid of the fast check.
var ewEps = []float64{0.1, 0.5, 1, 2}

// TestExactWindowBoundCoversExact checks the per-period bound with the
// mates known against the exact divergence of every pair of histories
// that differ only inside a window, for trees of 1 to 8 periods, windows
// of 1 to H+1 periods at every alignment, j in {1, 2} (k <= 2), every
// level, and every configuration of 1, 2 or 4 level-mates per differing
// node. At eps at or above the local level the bound is 0, and so must be
// the exact divergence.
func TestExactWindowBoundCoversExact(t *testing.T) {
	ts := ewCheckGrid(t, ewGrid{
		trees: []int{1, 2, 4, 8}, // more in TestExactWindowBoundCoversExactDeep
		maxW:  func(H int) int { return H + 1 },
		eps0s: []float64{0.5, 3},
		mates: []int{2, 5},
		epss:  ewEps,
	})
	ewLogTightness(t, ts)
}
