package declare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDenseToSparseMatchesMap: denseToSparse's default and exceptions are
// those of counting with a map keyed by the values (its first version),
// on rows with few and many distinct values, ties, -0 and +0, and NaNs.
func TestDenseToSparseMatchesMap(t *testing.T) {
	byMap := func(row []float64) (float64, []int) {
		count := map[float64]int{}
		var mode float64
		best := -1
		for _, v := range row {
			count[v]++
			if count[v] > best || (count[v] == best && v < mode) {
				best, mode = count[v], v
			}
		}
		var idx []int
		for y, v := range row {
			if v != mode || math.IsNaN(v) {
				idx = append(idx, y)
			}
		}
		return mode, idx
	}
	rng := rand.New(rand.NewPCG(3, 9))
	pool := []float64{0, math.Copysign(0, -1), 0.25, 0.5, math.NaN(), 1e-300, 0.125}
	for range 5000 {
		row := make([]float64, 1+rng.IntN(60))
		distinct := 1 + rng.IntN(40)
		for y := range row {
			if rng.IntN(5) == 0 {
				row[y] = pool[rng.IntN(len(pool))]
			} else {
				row[y] = float64(rng.IntN(distinct)) / 64
			}
		}
		mode, idx := byMap(row)
		r := denseToSparse(row)
		if math.Float64bits(r.def) != math.Float64bits(mode) && !(math.IsNaN(r.def) && math.IsNaN(mode)) || fmt.Sprint(r.idx) != fmt.Sprint(idx) {
			t.Fatalf("row %v: default %v exceptions %v, by a map %v %v", row, r.def, r.idx, mode, idx)
		}
	}
}
