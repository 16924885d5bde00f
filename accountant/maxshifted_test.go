package accountant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaxShiftedIsMathMaxFold: maxShifted returns the bits of folding
// math.Max from -Inf over logw[i] + lambda v[i], on random terms with
// NaNs, infinities and zeros of both signs.
func TestMaxShiftedIsMathMaxFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 5))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), -1, 1e-300}
	for range 200000 {
		n := rng.IntN(6)
		logw, v := make([]float64, n), make([]float64, n)
		lambda := []float64{0, 1, -2.5, math.Copysign(0, -1)}[rng.IntN(4)]
		for i := range logw {
			if rng.IntN(3) == 0 {
				logw[i] = special[rng.IntN(len(special))]
			} else {
				logw[i] = -rng.Float64() * 3
			}
			if rng.IntN(4) == 0 {
				v[i] = special[rng.IntN(len(special))]
			} else {
				v[i] = rng.Float64() - 0.5
			}
		}
		want := math.Inf(-1)
		for i := range logw {
			want = math.Max(want, logw[i]+lambda*v[i])
		}
		got := maxShifted(logw, v, lambda)
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("logw %v v %v lambda %v: %v (%x), math.Max fold %v (%x)", logw, v, lambda, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
}
