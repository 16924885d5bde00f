package accountant

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// Review of beaf1de (helper-53): the window's blocked coefficient scan
// against the one-coefficient-at-a-time copy r51Window (skips_oldnew_test.go,
// with skipRun and bandEnd as window has them), on windows latticeEval
// would not choose (any length from 2, odd lengths, bands not a multiple of
// scanBlock, offsets A anywhere), and the pooled coefficient slices under
// concurrent windows.

// review53WindowCase is one window of one lattice.
type review53WindowCase struct {
	l             *lattice
	nf, theta, k0 float64
	A             int64
	L             int
	full, wantLo  bool
}

// review53WindowCases draws windows of random lattices (r51MatrixSet's
// pairs and windowSkipSets' near-eps0 pairs), n from 2 to 1e6.
func review53WindowCases(t *testing.T, seed uint64, count int) []review53WindowCase {
	rng := rand.New(rand.NewPCG(seed, 53))
	near, _, nearB := windowSkipSets(t, []float64{6, 14})
	var cs []review53WindowCase
	for len(cs) < count {
		var s AtomSet
		var eps0 float64
		if rng.IntN(2) == 0 {
			i := rng.IntN(len(near))
			s, eps0 = near[i], nearB[i]
		} else {
			s, eps0 = r51MatrixSet(rng)
		}
		eps := eps0 * rng.Float64() * 0.999
		p := prepare(s, eps)
		if p.maxZ <= 0 {
			continue
		}
		hRel := []float64{0.5, 0.25, 0.125}[rng.IntN(3)]
		h := r51H(p, hRel)
		if latticeTooWide(p, h) {
			continue
		}
		l := newLattice(p, h)
		if l.imax <= 0 {
			continue
		}
		n := max(2, int(math.Pow(10, 0.3+5.7*rng.Float64())))
		nf := float64(n)
		theta := l.tilt()
		k0, _, k2 := l.logMGF(theta)
		sdIdx := math.Sqrt(nf*k2) / h
		var L int
		switch rng.IntN(3) {
		case 0:
			L = 2 + rng.IntN(40)
		case 1:
			L = 2 + rng.IntN(3000)
		default:
			L = fastSize(int(2*math.Ceil(windowSD*sdIdx)) + 5)
		}
		if L > 1<<18 {
			continue
		}
		A := -int64(rng.IntN(L))
		fullLo, fullHi := nf*float64(l.imin), nf*float64(l.imax)
		full := float64(A) <= fullLo && float64(A)+float64(L)-1 >= fullHi
		cs = append(cs, review53WindowCase{l, nf, theta, k0, A, L, full, rng.IntN(2) == 0})
	}
	return cs
}

// TestReview53WindowBlockScan: window and r51Window give the same
// bracket and tail test, bit for bit.
func TestReview53WindowBlockScan(t *testing.T) {
	for _, c := range review53WindowCases(t, 1, 600) {
		got := c.l.window(c.nf, c.theta, c.k0, c.A, c.L, c.full, c.wantLo)
		want := r51Window(c.l, c.nf, c.theta, c.k0, c.A, c.L, c.full, c.wantLo, true)
		if got.bracket != want.bracket || got.tailOK != want.tailOK {
			t.Errorf("n %g theta %v A %d L %d full %v wantLo %v: blocked %+v, one at a time %+v",
				c.nf, c.theta, c.A, c.L, c.full, c.wantLo, got, want)
		}
	}
}

// TestReview53WindowConcurrent: windows computed on 8 goroutines at once
// (the pools shared) give the serial results bit for bit. Run it with
// -race as well.
func TestReview53WindowConcurrent(t *testing.T) {
	cs := review53WindowCases(t, 2, 160)
	want := make([]windowResult, len(cs))
	for i, c := range cs {
		want[i] = c.l.window(c.nf, c.theta, c.k0, c.A, c.L, c.full, c.wantLo)
	}
	got := make([]windowResult, len(cs))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine takes every case, in its own order, so that
			// slices of different lengths pass between windows.
			for j := range cs {
				i := (j*7 + w*13) % len(cs)
				r := cs[i].l.window(cs[i].nf, cs[i].theta, cs[i].k0, cs[i].A, cs[i].L, cs[i].full, cs[i].wantLo)
				if w == 0 {
					got[i] = r
				} else if r != want[i] {
					t.Errorf("goroutine %d case %d: %+v, serial %+v", w, i, r, want[i])
				}
			}
		}()
	}
	wg.Wait()
	for i := range cs {
		if got[i] != want[i] {
			t.Errorf("case %d: %+v, serial %+v", i, got[i], want[i])
		}
	}
}
