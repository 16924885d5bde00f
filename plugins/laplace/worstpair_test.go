package laplace

import (
	"math"
	"slices"
	"testing"
)

// stopLoss returns sum w·(z - s)_+.
func stopLoss(z, w []float64, s float64) float64 {
	var out float64
	for i, v := range z {
		if v > s {
			out += w[i] * (v - s)
		}
	}
	return out
}

// pairLaw returns the amplification variable of the pair (a, b) of a
// discrete Laplace on centres {0..m} at rate lam and c = e^eps, as values
// and blanket masses over the outputs j in [-tail, m + tail] (the tails
// beyond carry less than u^tail; both pairs' tails are the same constant
// points, so they are folded into their last outputs exactly below).
func pairLaw(m, a, b int, lam, c float64) (z, w []float64) {
	t := math.Tanh(lam / 2)
	u := math.Exp(-lam)
	d := func(j int) int { return max(abs(j), abs(j-m)) }
	for j := -1; j <= m+1; j++ {
		r := t * math.Pow(u, float64(d(j)))
		if j == -1 || j == m+1 {
			r /= 1 - u // every output beyond shares this ratio point
		}
		pa := t * math.Pow(u, float64(abs(j-a)))
		pb := t * math.Pow(u, float64(abs(j-b)))
		if j == -1 || j == m+1 {
			pa /= 1 - u
			pb /= 1 - u
		}
		z = append(z, pa/r-c*pb/r)
		w = append(w, r)
	}
	return z, w
}

func abs(x int) int { return max(x, -x) }

// mean returns sum w·z.
func mean(z, w []float64) float64 {
	var out float64
	for i := range z {
		out += w[i] * z[i]
	}
	return out
}

// TestWorstPairConvexOrder checks worstpair.go's theorem by exact
// enumeration: on small grids, for every ordered pair (a, b) and eps in
// [-eps0, eps0], the stop-loss transform of the pair's amplification
// variable is at most that of (0, m) at every kink of either (where the
// largest difference of the piecewise linear transforms is), and the means
// agree. A pair beating (0, m) anywhere fails.
func TestWorstPairConvexOrder(t *testing.T) {
	for _, m := range []int{4, 5, 8, 9} {
		for _, eps0 := range []float64{0.25, 1, 4, 8} {
			lam := eps0 / float64(m+1)
			for k := -20; k <= 20; k++ {
				c := math.Exp(eps0 * float64(k) / 20)
				z0, w0 := pairLaw(m, 0, m, lam, c)
				for a := 0; a <= m; a++ {
					for b := 0; b <= m; b++ {
						z, w := pairLaw(m, a, b, lam, c)
						if d := mean(z, w) - mean(z0, w0); math.Abs(d) > 1e-12*(1+c) {
							t.Fatalf("m=%d eps0=%g c=%g pair (%d,%d): means differ by %g", m, eps0, c, a, b, d)
						}
						for _, s := range slices.Concat(z, z0) {
							got, top := stopLoss(z, w, s), stopLoss(z0, w0, s)
							if got > top+1e-12*(1+c) {
								t.Fatalf("m=%d eps0=%g eps=%g pair (%d,%d) at s=%g: stop-loss %g above (0,m)'s %g", m, eps0, math.Log(c), a, b, s, got, top)
							}
						}
					}
				}
			}
		}
	}
}
