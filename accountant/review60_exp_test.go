package accountant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestReview60ExpAccuracyWide: the 4u premise of fceb63c for math.Exp
// over the whole range the walk and the weights can pass, positive
// arguments included (rho = exp(d) with d up to +600; review 58 sampled
// x <= 5 only), against 256-bit exp, at 40,000 arguments. Run it also with
// GODEBUG=cpu.fma=off (amd64's exp without FMA, as on CPUs without it).
func TestReview60ExpAccuracyWide(t *testing.T) {
	ln2 := bigLn2()
	rng := rand.New(rand.NewPCG(60, 2))
	worst, worstX := 0.0, 0.0
	for i := range 40000 {
		var x float64
		switch i % 4 {
		case 0:
			x = 709 * rng.Float64()
		case 1:
			x = 1400*rng.Float64() - 700
		case 2:
			x = 2 * (rng.Float64() - 0.5)
		default:
			// next to k ln2/2, where the reduction switches k
			x = (float64(rng.IntN(2000)-1000) + 0.5) * math.Ln2 * (1 + 1e-15*(rng.Float64()-0.5))
		}
		w := math.Exp(x)
		if w < 0x1p-1022 || math.IsInf(w, 0) {
			continue
		}
		ex := bigExp(new(big.Float).SetPrec(bigPrec).SetFloat64(x), ln2)
		d := new(big.Float).SetPrec(bigPrec).SetFloat64(w)
		d.Sub(d, ex)
		d.Quo(d, ex)
		r, _ := d.Float64()
		r = math.Abs(r) / ulp
		if r > worst {
			worst, worstX = r, x
		}
		if r > 4 {
			t.Errorf("math.Exp(%v) = %v: relative error %.3f u > 4u", x, w, r)
		}
	}
	t.Logf("largest relative error of math.Exp: %.3f u at %v", worst, worstX)
}
