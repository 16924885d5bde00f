package accountant

import (
	"fmt"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// Review of 2aba623, items 1 and the steering grid: the root epsUpper
// returns with steering is a point the lattice itself proves (some
// lattice step's upper end at the root is at most delta), the refined
// bracket of D there does not exceed delta at its lower end, and no
// compound lower end there exceeds delta. With steering off the root is
// within the search's tolerance.

type r59SteerCase struct {
	name  string
	s     AtomSet
	n     int
	delta float64
	cap   float64
}

func r59SteerCases(t testing.TB, mechs []string, eps0s []float64, ns []int, deltas []float64) []r59SteerCase {
	var out []r59SteerCase
	for _, m := range mechs {
		for _, eps0 := range eps0s {
			var d *Decomposition
			var err error
			switch m {
			case "krr:k=2", "krr:k=10", "krr:k=100", "krr:k=1000":
				var k int
				fmt.Sscanf(m, "krr:k=%d", &k)
				d, err = KRRMech{K: k}.Decompose(eps0)
			case "hadamard:k=64":
				d = hadamardAtoms(t, 64, eps0)
			case "hadamard:k=256":
				d = hadamardAtoms(t, 256, eps0)
			case "laplace":
				d, err = Decompose(laplace.Declaration(eps0, laplace.Bins))
			default:
				t.Fatalf("unknown %s", m)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range d.Upper {
				for _, n := range ns {
					for _, delta := range deltas {
						out = append(out, r59SteerCase{fmt.Sprintf("%s eps0 %g upper %d n %d delta %g", m, eps0, i, n, delta), s, n, delta, d.LocalEps})
					}
				}
			}
		}
	}
	return out
}

// r59LatticeProves reports whether some lattice step hRelStart / 2^k, k <=
// maxRefine, has an upper end at most delta at eps.
func r59LatticeProves(s AtomSet, n int, eps, delta float64) (bool, float64) {
	h := hRelStart
	best := math.Inf(1)
	for range maxRefine + 1 {
		b := evaluate(s, n, eps, h, false)
		best = math.Min(best, b.hi)
		if b.hi <= delta {
			return true, b.hi
		}
		h /= 2
	}
	return false, best
}

func r59CheckSteer(t *testing.T, cases []r59SteerCase, compareOff bool) {
	t.Helper()
	steered, moved := 0, 0
	maxUp, maxDown := 0.0, 0.0
	for _, c := range cases {
		on, _ := epsUpper(c.s, c.n, c.delta, c.cap)
		if on < c.cap {
			if ok, hi := r59LatticeProves(c.s, c.n, on, c.delta); !ok {
				t.Errorf("%s: steered root %.17g: no lattice proves it (smallest upper end %g)", c.name, on, hi)
			}
			if on > 0 {
				if b, _ := deltaBracket(c.s, c.n, on); b.lo > c.delta {
					t.Errorf("%s: steered root %.17g: D there is at least %g > delta", c.name, on, b.lo)
				}
				for _, h := range []float64{hRelStart, hRelStart / 4, hRelStart / 64} {
					if l := compoundLower(c.s, c.n, on, h); l > c.delta {
						t.Errorf("%s: steered root %.17g: the compound lower end %g (hRel %g) exceeds delta", c.name, on, l, h)
					}
				}
			}
		}
		if on > 0 && compoundLower(c.s, c.n, on/(1+10*rootTol), hRelStart) > c.delta {
			steered++
		}
		if compareOff {
			steerUpper = false
			off, _ := epsUpper(c.s, c.n, c.delta, c.cap)
			steerUpper = true
			if math.Abs(on-off) > 2*rootTol*math.Max(on, off) {
				t.Errorf("%s: root %.17g steered, %.17g not", c.name, on, off)
			}
			if on != off {
				moved++
				rel := (on - off) / off
				maxUp, maxDown = math.Max(maxUp, rel), math.Min(maxDown, rel)
			}
		}
	}
	t.Logf("%d cases, %d where the compound path proves a point just below the root, %d roots moved by steering (relative moves in [%.3g, %.3g])", len(cases), steered, moved, maxDown, maxUp)
	if steered == 0 {
		t.Errorf("no case steers near its root")
	}
}

func TestReview59SteeredRootProven(t *testing.T) {
	cases := r59SteerCases(t, []string{"krr:k=1000"}, []float64{20}, []int{1e8}, []float64{1e-8})
	cases = append(cases, r59SteerCases(t, []string{"krr:k=2", "krr:k=100"}, []float64{8, 16}, []int{100, 10000}, []float64{1e-8})...)
	cases = append(cases, r59SteerCases(t, []string{"hadamard:k=64"}, []float64{14}, []int{1e6}, []float64{1e-10})...)
	r59CheckSteer(t, cases, true)
}
