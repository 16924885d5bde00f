package collector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/sdk/report"
)

// S1: the cover of horizonWindows with period lengths that do not nest
// (90 min, 7 h, 36 h, 5 days) and a current period of any of them.
func TestHorizonWindowsCoverNonNested(t *testing.T) {
	horizonWindowsCoverNonNested(t, 500)
}

// horizonWindowsCoverNonNested runs TestHorizonWindowsCoverNonNested
// over its random cases (TestHorizonWindowsCoverNonNestedDeep,
// make audit, runs 3000).
func horizonWindowsCoverNonNested(t *testing.T, cases int) {
	lengths := []int64{5400, 7 * 3600, 86400, 36 * 3600, 5 * 86400}
	r := rand.New(rand.NewPCG(9, 11))
	for it := range cases {
		var parts []horizonPart
		at := int64(1_700_000_000)
		for range 2 + r.IntN(10) {
			length := lengths[r.IntN(len(lengths))]
			at = (at + length - 1) / length * length
			at += int64(r.IntN(3)) * length
			for _, pool := range []string{"m", "k"}[:1+r.IntN(2)] {
				parts = append(parts, horizonPart{period: report.Period{Start: at, Length: length}, epoch: fmt.Sprint(length), pool: pool, n: 50 + r.Int64N(300)})
			}
			if r.IntN(3) == 0 { // overlapping epochs: a later plan with another period starts inside
				continue
			}
			at += length
		}
		slices.SortStableFunc(parts, func(a, b horizonPart) int { return int(a.period.Start - b.period.Start) })
		l := lengths[r.IntN(len(lengths))]
		for _, h := range []int64{1, 2, 3, 5} {
			ws := horizonWindows(parts, l, h)
			var loads []windowLoad
			for _, w := range ws {
				loads = append(loads, loadOf(parts, w.start, w.end))
			}
			first, last := parts[0].period.Start, parts[len(parts)-1].period.End()
			for s := (first/l - h - 1) * l; s <= last; s += l {
				want := loadOf(parts, s, s+h*l)
				if len(want) == 0 {
					continue
				}
				if !slices.ContainsFunc(loads, func(a windowLoad) bool { return a.covers(want) }) {
					t.Fatalf("it %d l %d h %d: window %d uncovered", it, l, h, s)
				}
			}
		}
	}
}
