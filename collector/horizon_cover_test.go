package collector

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// chargeOf is, computed here apart from horizon.go (chargedWindow), what
// the window [s, e) charges per (epoch, pool): for a pool of independent
// reports its periods that overlap the window; for a tree protocol's every
// period from the one holding s to the end of the tree holding the
// period of e-1; with their number, smallest batch (as composeParts
// rounds it), trees and mixes.
func chargeOf(parts []horizonPart, s, e int64) map[poolKey]poolLoad {
	type acc struct {
		ld    poolLoad
		trees map[int64]bool
		mixes map[string]bool
	}
	accs := map[poolKey]*acc{}
	for _, q := range parts {
		in := q.period.Start < e && q.period.End() > s
		if q.tree > 0 {
			l, tree := q.period.Length, int64(q.tree)
			i := q.period.Start / l
			in = i >= s/l && i/tree <= ((e-1)/l)/tree
		}
		if !in {
			continue
		}
		k := poolKey{q.epoch, q.pool}
		a := accs[k]
		if a == nil {
			a = &acc{ld: poolLoad{n: q.n}, trees: map[int64]bool{}, mixes: map[string]bool{}}
			accs[k] = a
		}
		a.ld.reports++
		a.ld.n = min(a.ld.n, q.n)
		if q.tree > 0 {
			a.trees[q.period.Start/q.period.Length/int64(q.tree)] = true
		}
		for _, m := range q.mixes {
			a.mixes[m] = true
		}
	}
	out := map[poolKey]poolLoad{}
	for k, a := range accs {
		a.ld.n = roundDown2(a.ld.n)
		a.ld.trees = len(a.trees)
		a.ld.mixes = slices.Sorted(maps.Keys(a.mixes))
		if len(a.ld.mixes) == 0 {
			a.ld.mixes = nil
		}
		a.ld.bound = parallelBound(a.ld.mixes)
		out[k] = a.ld
	}
	return out
}

// roundDominates reports, apart from horizon.go (boundCovers), whether a
// round bounded by bound (parallelBound) dominates a batch of mix m: m is
// among its mixes, or a floor in it ("floor:" support ":" weights of the
// metrics present) has m's support and weights at most m's.
func roundDominates(bound []string, m string) bool {
	var counts []float64
	var total float64
	for _, f := range strings.Split(m, ",") {
		c, _ := strconv.ParseFloat(f, 64)
		counts = append(counts, c)
		total += c
	}
	for _, k := range bound {
		if k == m {
			return true
		}
		f := strings.Split(k, ":")
		if len(f) != 3 || f[0] != "floor" || len(f[1]) != len(counts) {
			continue
		}
		ws, i, ok := strings.Split(f[2], ","), 0, true
		for j, c := range counts {
			if (c > 0) != (f[1][j] == '1') {
				ok = false
				break
			}
			if c > 0 {
				x, _ := strconv.ParseFloat(ws[i], 64)
				ok = ok && x <= c/total
				i++
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestHorizonWindowsCoverTreesAndMixes checks horizonWindows by brute
// force on random histories of three pools over epochs of 1 h, 24 h and
// 48 h periods: "m" of independent reports, "t" a tree protocol (trees of
// 4 periods), "p" with parallel travel (each period one or two mixes of
// eight: beyond maxHorizonMixes a window bounds them by floors). Every
// window of the current plan's periods that charges anything (its own
// periods, and a tree protocol's periods after it to the end of its last
// tree) is covered by a window the collector composes: one that charges,
// per (epoch, pool), at least as many reports and trees at a smallest
// batch no larger, with a round that dominates each of its mixes
// (roundDominates). And each composed window's loads are chargeOf's.
func TestHorizonWindowsCoverTreesAndMixes(t *testing.T) {
	const l = 86400
	d0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).Unix() // a multiple of 48 h
	mixes := []string{"1,1", "2,1", "1,0", "0,1", "3,2", "4,3", "1,2", "5,4"}
	r := rand.New(rand.NewPCG(5, 22))
	for it := range 300 {
		var parts []horizonPart
		at := d0
		for range 2 + r.IntN(14) {
			length := []int64{3600, l, 2 * l}[r.IntN(3)]
			at = (at + length - 1) / length * length
			at += int64(r.IntN(4)) * length
			for _, pool := range []string{"m", "t", "p"} {
				if r.IntN(3) == 0 {
					continue
				}
				q := horizonPart{period: report.Period{Start: at, Length: length}, epoch: fmt.Sprint(length), pool: pool, n: 50 + r.Int64N(5000)}
				switch pool {
				case "t":
					q.tree = 4
				case "p":
					q.mixes = []string{mixes[r.IntN(len(mixes))]}
					if r.IntN(2) == 0 {
						q.mixes = append(q.mixes, mixes[r.IntN(len(mixes))])
					}
					q.mixes = slices.Compact(slices.Sorted(slices.Values(q.mixes)))
				}
				parts = append(parts, q)
			}
			at += length
		}
		if len(parts) == 0 {
			continue
		}
		slices.SortStableFunc(parts, func(a, b horizonPart) int { return int(a.period.Start - b.period.Start) })
		for _, h := range []int64{1, 2, 3, 7} {
			ws := horizonWindows(parts, l, h)
			for _, w := range ws {
				if want := chargeOf(parts, w.start, w.end); !reflect.DeepEqual(w.loads, want) {
					t.Fatalf("it %d, h %d: window from %d loads %v, chargeOf %v", it, h, w.start, w.loads, want)
				}
			}
			first, last := parts[0].period.Start, parts[len(parts)-1].period.End()
			for s := (first/l - h - 8) * l; s <= last; s += l { // a tree of 4 periods of 48 h reaches 8 days
				want := chargeOf(parts, s, s+h*l)
				if len(want) == 0 {
					continue
				}
				if !slices.ContainsFunc(ws, func(w horizonWindow) bool {
					for k, lb := range want {
						la, ok := w.loads[k]
						if !ok || la.reports < lb.reports || la.n > lb.n || la.trees < lb.trees {
							return false
						}
						for _, m := range lb.mixes {
							if !roundDominates(la.bound, m) {
								return false
							}
						}
					}
					return true
				}) {
					t.Fatalf("it %d, h %d: the window from %d (%v) is covered by none of %d windows composed", it, h, s, want, len(ws))
				}
			}
		}
	}
}
