package accountant

import (
	"math"
	"testing"
)

// Review of 2aba623, item 1: epsUpper's steered f returns either a value
// l > delta (the compound branch) or the lattice's upper end. The returned
// b has f(b) <= target, so it comes from the lattice branch, whatever the
// compound branch returns (+Inf, the next float above delta, values far
// from the lattice's, out of monotone order). Here f mixes a monotone
// "lattice" with such values at arbitrary points.

func TestReview59SolverRootFromLatticeBranch(t *testing.T) {
	const target = 1e-8
	lattice := func(x float64) float64 { return target * math.Exp(-(x-3)*4) } // root at 3
	steerVals := []float64{math.Inf(1), math.Nextafter(target, 2), 2 * target, 1e300, target * (1 + 1e-15)}
	for i, sv := range steerVals {
		for _, width := range []float64{0.5, 2.9, 3.5, 10} {
			var fromSteer map[float64]bool = map[float64]bool{}
			f := func(x float64) float64 {
				// steer on [0, width): any value above target
				if x < width {
					fromSteer[x] = true
					return sv
				}
				return lattice(x)
			}
			b, ok := solveDecreasing(f, target, 0, 20)
			if !ok {
				if width < 20 {
					t.Errorf("steer %d width %g: not bracketed", i, width)
				}
				continue
			}
			if fromSteer[b] {
				t.Errorf("steer %d width %g: root %g came from the steering branch", i, width, b)
			}
			if !(lattice(b) <= target) {
				t.Errorf("steer %d width %g: root %g has lattice value %g > target", i, width, b, lattice(b))
			}
			if b < 3 {
				t.Errorf("steer %d width %g: root %g below the lattice's own root 3", i, width, b)
			}
		}
	}
	// logDistance of the next float above the target is positive (a
	// steered value never reads as meeting the target).
	for _, tg := range []float64{1e-100, 1e-8, 0.3, 1, 1.5, 3e-300} {
		if g := logDistance(func(float64) float64 { return math.Nextafter(tg, 2*tg+1) }, tg)(0); !(g > 0) {
			t.Errorf("target %g: logDistance of the next float is %g", tg, g)
		}
		if g := logDistance(func(float64) float64 { return math.Inf(1) }, tg)(0); !(g > 0) {
			t.Errorf("target %g: logDistance of +Inf is %g", tg, g)
		}
	}
}
