package accountant

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// laplace at eps0 16, n 1e3: the lattice's bracket at the certification
// point widens with every halving (the far atoms' window margins grow
// faster than the resolution helps), the root stays at eps0, and epsUpper
// stops after the second lattice instead of twelve (minutes) with the
// same root, uncertified.
func TestEpsUpperStopsWhereRefiningWidens(t *testing.T) {
	d, err := Decompose(laplace.Declaration(16, laplace.Bins))
	if err != nil {
		t.Fatal(err)
	}
	const n, delta = 1000, 1e-8
	s := d.Upper[0]
	// The premise: at eps0/(1+certTol) the finer bracket is no tighter.
	x := 16 / (1 + certTol)
	c1 := (&setSolver{set: s, n: n, hRel: hRelStart}).eval(x, true)
	c2 := (&setSolver{set: s, n: n, hRel: hRelStart / 2}).eval(x, true)
	if !(c2.hi >= c1.hi && c2.lo <= c1.lo) {
		t.Fatalf("the finer bracket [%g, %g] is tighter than [%g, %g]: the case no longer shows the rule", c2.lo, c2.hi, c1.lo, c1.hi)
	}
	e, ok := epsUpper(s, n, delta, 16)
	if e != 16 || ok {
		t.Errorf("epsUpper = (%v, %v), want (16, false)", e, ok)
	}
	r := epsilonOf(d, n, delta)
	if r.Upper != 16 || r.Amplified || r.Tight {
		t.Errorf("epsilonOf = %+v, want Upper 16, not amplified, not tight", r)
	}
}

// The early stop's 10% rule and the root at the cap (epsUpper skips the
// search when the previous root is within rootTol of cap and the finer
// lattice is still above delta just below it) against the loop as it was
// before e7160b1 (review56_test.go), both without the compound path's
// steering (which moves roots within rootTol, either way: steer_test.go):
// on k-RR and hadamard sets whose roots reach the cap and sets whose roots
// do not, the upper figure is never below the old loop's and never
// certified where the old loop was not.
func TestEpsUpperCapRootAgainstOldLoop(t *testing.T) {
	steerUpper = false
	defer func() { steerUpper = true }()
	type cse struct {
		name string
		d    *Decomposition
		ns   []int
	}
	var cs []cse
	for _, c := range []struct {
		k    int
		eps0 float64
	}{{2, 8}, {2, 12}, {10, 12}, {100, 8}} {
		d, err := KRR(c.k).Decompose(c.eps0)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, cse{fmt.Sprintf("krr:k=%d eps0 %g", c.k, c.eps0), d, []int{100, 1000, 100000}})
	}
	cs = append(cs, cse{"hadamard:k=64 eps0 12", hadamardAtoms(t, 64, 12), []int{1000, 100000}})
	atCap := 0
	for _, c := range cs {
		for _, n := range c.ns {
			for _, delta := range []float64{1e-6, 1e-10} {
				for i, s := range c.d.Upper {
					e, ok := epsUpper(s, n, delta, c.d.LocalEps)
					eo, oko := r56OldEpsUpper(s, n, delta, c.d.LocalEps)
					if e < eo {
						t.Errorf("%s n %d delta %g set %d: upper %v below the old loop's %v", c.name, n, delta, i, e, eo)
					}
					if ok && !oko {
						t.Errorf("%s n %d delta %g set %d: certified where the old loop was not", c.name, n, delta, i)
					}
					if e >= c.d.LocalEps*(1-rootTol) {
						atCap++
					}
				}
			}
		}
	}
	if atCap == 0 {
		t.Fatal("no root reached the cap: the grid no longer tests the shortcut")
	}
	t.Logf("%d roots at the cap", atCap)
}
