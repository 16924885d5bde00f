package accountant

import (
	"math"
	"testing"
)

// The upper search steers by the compound path's lower end where it
// exceeds delta (compoundLower); the figure stays the lattice's proof at
// the root. With steering on and off the two roots are within the search's
// tolerance of each other, and the compound path's lower end at each, an
// independent bound on the same D, is not above delta (it would contradict
// the lattice's proof there).
func TestUpperSteering(t *testing.T) {
	krr, err := KRRMech{K: 1000}.Decompose(20)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		d    *Decomposition
		n    int
	}{
		{"krr:k=1000 eps0 20 n 1e8", krr, 1e8},
		{"hadamard:k=256 eps0 20 n 1e8", hadamardAtoms(t, 256, 20), 1e8},
	}
	const delta = 1e-8
	for _, c := range cases {
		steered := 0
		for i, s := range c.d.Upper {
			on, _ := epsUpper(s, c.n, delta, c.d.LocalEps)
			steerUpper = false
			off, _ := epsUpper(s, c.n, delta, c.d.LocalEps)
			steerUpper = true
			if math.Abs(on-off) > 2*rootTol*math.Max(on, off) {
				t.Errorf("%s set %d: root %g steered, %g not", c.name, i, on, off)
			}
			for _, e := range []float64{on, off} {
				if e >= c.d.LocalEps {
					continue
				}
				if l := compoundLower(s, c.n, e, hRelStart); l > delta {
					t.Errorf("%s set %d: at the root %g the compound lower end %g exceeds delta", c.name, i, e, l)
				}
			}
			if compoundLower(s, c.n, on*0.9, hRelStart) > delta {
				steered++
			}
		}
		if steered == 0 {
			t.Errorf("%s: the compound path proves no point below any root; the case no longer tests steering", c.name)
		}
	}
}
