package accountant

import (
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
