package accountant

import (
	"testing"
)

// Review of 2aba623, item 2 at large n (no enumeration reaches it): the
// compound lower end and the lattice's upper end bracket the same D of the
// same prepared upper set, so L <= hi at every point, whatever the lattice
// step.
func r59Overlap(t *testing.T, mechs []string, eps0s []float64, ns []int, fs []float64) {
	t.Helper()
	positive := 0
	for _, c := range r59SteerCases(t, mechs, eps0s, ns, []float64{1}) {
		for _, f := range fs {
			eps := f * c.cap
			for _, h := range []float64{hRelStart, hRelStart / 4} {
				l := compoundLower(c.s, c.n, eps, h)
				if l == 0 {
					continue
				}
				positive++
				if hi := evaluate(c.s, c.n, eps, h, false).hi; !(l <= hi) {
					t.Errorf("%s eps %g hRel %g: compound lower end %.17g above the lattice's upper end %.17g", c.name, eps, h, l, hi)
				}
			}
		}
	}
	t.Logf("%d points with a positive compound lower end", positive)
	if positive == 0 {
		t.Errorf("no point tested")
	}
}

func TestReview59CompoundLowerBelowLatticeUpper(t *testing.T) {
	r59Overlap(t, []string{"krr:k=1000", "hadamard:k=64"}, []float64{14, 20}, []int{100000, 10000000}, []float64{0.1, 0.3, 0.5, 0.7})
}
