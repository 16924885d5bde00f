package accountant

import (
	"math"
	"testing"

	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// sparseMerged's bracket contains the enumerated value of the set with
// its almost-never-drawn atom, and it declines when that atom could move
// D by more than 1e-9 of it.
func TestSparseMergedContainsEnumeration(t *testing.T) {
	const n = 12
	for _, c := range []struct {
		wTiny, zTiny float64
		want         bool
	}{
		{1e-19, 1e3, true},
		{3e-11, 5, true},     // W about 1e-10: inside the guard
		{4e-8, -40, false},   // W about 1.6e-6: declined
		{1e-12, -1e8, false}, // far out: declined
	} {
		p := prepared{z: []float64{-1, 7, 3, c.zTiny}, w: []float64{0.8, 0.15, 0.05 - c.wTiny, c.wTiny}, maxZ: 7}
		b, ok, _ := sparseMerged(p, 0, n, false)
		if ok != c.want {
			t.Errorf("w %g z %g: taken %v, want %v", c.wTiny, c.zTiny, ok, c.want)
			continue
		}
		if !ok {
			continue
		}
		ex := enumerateDelta(p.z, p.w, n)
		if b.lo > ex*(1+1e-13) || b.hi < ex*(1-1e-13) {
			t.Errorf("w %g z %g: [%.15g, %.15g] misses %.15g", c.wTiny, c.zTiny, b.lo, b.hi, ex)
		}
	}
}

// summation:k=8 at eps0 16, n 1e8: its lower set carries a residual atom of
// mass about 1e-16 (the matrix's masses sum to 1 - 1e-16), which put the
// sparse path over its term limit and the lattice to a minute for an
// uncertified bound; merged, the sparse path certifies it, below the
// lattice's upper bound for the same set.
func TestSparseMergedSummationLowerSet(t *testing.T) {
	r, err := summation.New(summation.Options{Lo: 0, Hi: 1, K: 8})
	if err != nil {
		t.Fatal(err)
	}
	decl, err := r.Declaration(16, ldp.FormFor(9, summation.MatrixMaxLevels))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decompose(decl)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Lower[0]
	if p := prepare(s, 11); len(p.z) != 5 || p.w[4] > 1e-12 {
		t.Fatalf("the lower set no longer has the tiny residual atom: %v %v", p.z, p.w)
	}
	const n = 100_000_000
	lo, ok, _ := epsLower(s, n, 1e-8, 16, nil)
	up, _ := epsUpper(s, n, 1e-8, 16)
	if !ok || !(lo > 0) || lo > up || math.Abs(up-lo) > 2*Tolerance*up {
		t.Errorf("lower %v (certified %v), upper %v", lo, ok, up)
	}
}
