package accountant

import (
	"math"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// TestReview60LaplaceShortcut: laplace upper sets near eps0, where the
// shortcut fires: every shortcut takes a root the coarser lattice bounds
// (its upper end there is at most delta), epsUpper gives the copy's bits,
// the root is never certified without c.lo > delta at e/(1+certTol)
// (checked again on a fresh solver at the last lattice and at every
// coarser one: some lattice must give it), and epsilonOf reports eps0, not
// amplified.
func TestReview60LaplaceShortcut(t *testing.T) {
	fired := 0
	for _, eps0 := range []float64{12, 20} {
		d, err := Decompose(laplace.Declaration(eps0, laplace.Bins))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{30, 100} {
			const delta = 1e-6
			for i, s := range d.Upper {
				var tr r60Trace
				e, ok := r60EpsUpper(s, n, delta, eps0, &tr)
				e2, ok2 := epsUpper(s, n, delta, eps0)
				if math.Float64bits(e) != math.Float64bits(e2) || ok != ok2 {
					t.Fatalf("eps0 %g n %d set %d: epsUpper (%v, %v), copy (%v, %v)", eps0, n, i, e2, ok2, e, ok)
				}
				fired += tr.shortcuts
				if tr.unproven > 0 {
					t.Errorf("eps0 %g n %d set %d: a shortcut took an unproven root", eps0, n, i)
				}
				if ok {
					found := false
					for h := hRelStart; h >= hRelStart/4096; h /= 2 {
						if (&setSolver{set: s, n: n, hRel: h}).eval(e/(1+certTol), true).lo > delta {
							found = true
							break
						}
					}
					if !found {
						t.Errorf("eps0 %g n %d set %d: certified, but no lattice gives lo > delta at e/(1+certTol)", eps0, n, i)
					}
				}
			}
			r := epsilonOf(d, n, delta)
			if r.Upper != eps0 || r.Amplified {
				t.Errorf("eps0 %g n %d: epsilonOf = %+v, want Upper eps0, not amplified", eps0, n, r)
			}
		}
	}
	if fired == 0 {
		t.Fatal("the shortcut never fired: the grid no longer tests it")
	}
	t.Logf("%d shortcuts", fired)
}
