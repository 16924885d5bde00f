package accountant

import (
	"math"
	"testing"
)

// withScanRanges runs f with every window's scan split into r ranges
// (scanRanges), whatever its band.
func withScanRanges(r int, f func()) {
	old := scanRanges
	scanRanges = func(int) int { return r }
	defer func() { scanRanges = old }()
	f()
}

// TestScanRangesSameBits: a window's bracket, tail test and lower bound
// are the same bits whether its scan runs as one range or split into 2, 3
// or 7 (empty ranges included where the band is short), on random windows
// of random lattices (review53WindowCases: short and odd lengths, offsets
// anywhere, bands cut short by bandEnd and skip runs that cross the
// ranges' ends), and the same as the one-coefficient-at-a-time reference
// r51Window.
func TestScanRangesSameBits(t *testing.T) {
	cs := review53WindowCases(t, 3, 300)
	want := make([]windowResult, len(cs))
	withScanRanges(1, func() {
		for i, c := range cs {
			want[i] = c.l.window(c.nf, c.theta, c.k0, c.A, c.L, c.full, c.wantLo)
			ref := r51Window(c.l, c.nf, c.theta, c.k0, c.A, c.L, c.full, c.wantLo, true)
			if want[i].bracket != ref.bracket || want[i].tailOK != ref.tailOK {
				t.Errorf("case %d: one range %+v, one coefficient at a time %+v", i, want[i], ref)
			}
		}
	})
	for _, r := range []int{2, 3, 7} {
		withScanRanges(r, func() {
			for i, c := range cs {
				if got := c.l.window(c.nf, c.theta, c.k0, c.A, c.L, c.full, c.wantLo); got != want[i] {
					t.Errorf("case %d (L %d, wantLo %v), %d ranges: %+v, one range %+v", i, c.L, c.wantLo, r, got, want[i])
				}
			}
		})
	}
}

// tiltedLattice is a lattice at its tilt theta, with k0 = log M(theta).
type tiltedLattice struct {
	l         *lattice
	theta, k0 float64
	set       int     // index in windowSkipSets' sets
	eps       float64 // the eps of the pair's losses
}

// nearEps0Lattices returns the lattices (step a quarter of the tilted
// standard deviation) of windowSkipSets' pairs at the given eps0, at 0.2
// and 0.6 of each pair's budget: near eps0 their tilted laws are nearly
// point masses, and long windows keep many or all of their coefficients.
func nearEps0Lattices(t testing.TB, eps0 []float64) []tiltedLattice {
	sets, _, budgets := windowSkipSets(t, eps0)
	var ls []tiltedLattice
	for i, s := range sets {
		for _, f := range []float64{0.2, 0.6} {
			p := prepare(s, f*budgets[i])
			if p.maxZ <= 0 {
				continue
			}
			l := newLattice(p, 0.25*math.Max(tiltedSD(p), 1e-300))
			if l.imax <= 0 {
				continue
			}
			theta := l.tilt()
			k0, _, _ := l.logMGF(theta)
			ls = append(ls, tiltedLattice{l, theta, k0, i, f * budgets[i]})
		}
	}
	return ls
}

// TestScanRangesLargeBands: near eps0 (nearEps0Lattices) windows keep
// every coefficient of long lattices, where scanRanges' own rule splits
// the scan on a machine with several cores; the split gives one range's
// bits.
func TestScanRangesLargeBands(t *testing.T) {
	checked := 0
	for _, tl := range nearEps0Lattices(t, []float64{14, 20}) {
		for _, L := range []int{1 << 16, 3 * 1 << 15} {
			A := -int64(L / 2)
			for _, wantLo := range []bool{false, true} {
				var one, split windowResult
				withScanRanges(1, func() { one = tl.l.window(3e4, tl.theta, tl.k0, A, L, false, wantLo) })
				withScanRanges(2, func() { split = tl.l.window(3e4, tl.theta, tl.k0, A, L, false, wantLo) })
				if one != split {
					t.Errorf("set %d eps %g L %d wantLo %v: two ranges %+v, one %+v", tl.set, tl.eps, L, wantLo, split, one)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no window checked")
	}
}
