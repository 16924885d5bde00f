package accountant

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestRowProfilesGroupAsText: rowProfiles groups the rows, and orders the
// groups, exactly as keys made of the values' %v text did (the first
// version of the profiles), on matrices with repeated rows, permuted rows
// and rows that differ in one entry.
func TestRowProfilesGroupAsText(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 4))
	byText := func(m *matrixRows, stats []colStat) (groups [][]int) {
		index := map[string]int{}
		for x, r := range m.rows {
			var b strings.Builder
			fmt.Fprintf(&b, "%v", r.def)
			type ent struct{ r, v float64 }
			var ents []ent
			for i, y := range r.idx {
				ents = append(ents, ent{stats[y].min, r.val[i]})
			}
			slices.SortFunc(ents, func(a, b ent) int {
				switch {
				case a.r < b.r:
					return -1
				case a.r > b.r:
					return 1
				case a.v < b.v:
					return -1
				case a.v > b.v:
					return 1
				}
				return 0
			})
			for _, e := range ents {
				fmt.Fprintf(&b, ";%v:%v", e.r, e.v)
			}
			i, ok := index[b.String()]
			if !ok {
				i = len(groups)
				index[b.String()] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], x)
		}
		return groups
	}
	distinct := 0
	for range 300 {
		k, K := 2+rng.IntN(12), 2+rng.IntN(12)
		base := make([][]float64, 1+rng.IntN(3))
		for i := range base {
			base[i] = make([]float64, K)
			for y := range base[i] {
				base[i][y] = float64(1 + rng.IntN(3))
			}
		}
		rows := make([][]float64, k)
		for x := range rows {
			rows[x] = slices.Clone(base[rng.IntN(len(base))])
			switch rng.IntN(3) {
			case 0:
				rng.Shuffle(K, func(i, j int) { rows[x][i], rows[x][j] = rows[x][j], rows[x][i] })
			case 1:
				rows[x][rng.IntN(K)] += 1
			}
			normalizeRow(rows[x])
		}
		mx, err := NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		m := rowsOf(mx)
		_, stats, _ := m.columns()
		_, groups, order := rowProfiles(m, stats)
		var got [][]int
		for _, pr := range order {
			got = append(got, groups[pr])
		}
		want := byText(m, stats)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("rows %v: groups %v, by text %v", rows, got, want)
		}
		if len(want) > 1 && len(want) < k {
			distinct++
		}
	}
	if distinct < 50 {
		t.Errorf("only %d matrices with both shared and distinct profiles", distinct)
	}
}
