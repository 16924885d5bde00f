package accountant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// logSumExp returns log sum_i exp(x_i) (-Inf for none).
func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	if math.IsInf(m, -1) {
		return m
	}
	s := 0.0
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// TestKeptLeavesBound checks keptLeaves' claim, that the nd leaves outside
// its band have masses below e^(thr + 0.01) (so sum to at most nd of
// that), against a second derivation: the exact log masses from math.Lgamma (not the walk's
// log-factorial table), summed over the leaves outside the kept band in
// the log domain (masses down to e^-2000). Thresholds run from 100 nats
// below a pair's peak to just above it, where only the leaves around the
// mode decide (the band's core of five); a band that dropped a leaf above
// the threshold, or missed the peak, fails by far more than the bound's
// slack (e^0.01). It also checks that every kept leaf but the core's is
// at or above the threshold (the band is not wider than it says).
func TestKeptLeavesBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	lf := logFactorials(40_000)
	lgf := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	dropped, whole := 0, 0
	for i := range 4000 {
		left := r.IntN(300)
		if i%3 == 0 {
			left = r.IntN(30_000)
		}
		px := r.Float64()
		lx, ly := math.Log(px), math.Log1p(-px)
		if i%7 == 0 {
			ly = -600 * r.Float64()
		}
		if i%2 == 0 {
			lx, ly = ly, lx
		}
		lm := -1500 * r.Float64()
		E := func(c int) float64 {
			e := float64(c)*lx - lf[c]
			e += float64(left-c)*ly - lf[left-c]
			return lm + lf[left] + e
		}
		exact := func(c int) float64 {
			return lm + lgf(left) - lgf(c) - lgf(left-c) + float64(c)*lx + float64(left-c)*ly
		}
		peak := math.Inf(-1)
		for c := 0; c <= left; c++ {
			peak = math.Max(peak, E(c))
		}
		thr := peak - 100*r.Float64()
		if i%5 == 0 {
			thr = peak + 0.05*(2*r.Float64()-1)
		}
		kl, kr, nd, ok := keptLeaves(E, left, lx-ly, thr)
		var out []float64
		for c := 0; c <= left; c++ {
			if !ok || c < kl || c > kr {
				out = append(out, exact(c))
			}
		}
		if !ok {
			whole++
		}
		if len(out) != nd {
			t.Fatalf("case %d: %d leaves dropped, %d counted", i, len(out), nd)
		}
		if nd == 0 {
			continue
		}
		dropped++
		if got, bound := logSumExp(out), math.Log(float64(nd))+thr+0.01; !(got <= bound) {
			t.Fatalf("case %d: left %d lx %g ly %g lm %g thr %g: band [%d, %d] %v drops log mass %.6f, bound %.6f", i, left, lx, ly, lm, thr, kl, kr, ok, got, bound)
		}
		if ok {
			cs := pairMode(left, lx-ly)
			for _, c := range []int{kl, kr} {
				if (c < cs-2 || c > cs+2) && E(c) < thr {
					t.Fatalf("case %d: kept leaf %d below the threshold (%g < %g)", i, c, E(c), thr)
				}
			}
		}
	}
	if dropped < 2000 || whole < 100 {
		t.Fatalf("only %d cases dropped leaves, %d whole pairs", dropped, whole)
	}
}

// TestPairWalkCutCovers checks the walk with the cut on against the
// per-leaf sum (pairDirect, a second derivation): the upper sum plus the
// dropped bound covers it, the lower sum stays below it, and the bound is
// within its budget of the pair's peak term (the cut is not vacuous).
func TestPairWalkCutCovers(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	var w pairWalk
	lf := logFactorials(40_000)
	cut := 0
	for i := range 3000 {
		left := r.IntN(200)
		if i%4 == 0 {
			left = r.IntN(30_000)
		}
		px := r.Float64()
		lx, ly := math.Log(px), math.Log1p(-px)
		if i%2 == 0 {
			lx, ly = ly, lx
		}
		lm := -300 * r.Float64()
		zx := 4*r.Float64() - 1
		zy := zx - 3*r.Float64()
		s := float64(left) * (2*r.Float64() - 1)
		want := pairDirect(lm, 0, left, s, zx, zy, lx, ly)
		var b bandSum
		b.cutOn = true
		b.cut = lm - 80*r.Float64()
		b.cutExp = math.Exp(b.cut)
		w.sum(lm, 0, left, dd{hi: s}, zx, zy, lx, ly, lf, &b)
		tol := 1e-10*want + 1e-300
		if !(b.hi.sum+b.drop.sum >= want-tol) || !(b.lo.sum <= want+tol) {
			t.Fatalf("case %d: left %d lx %g ly %g lm %g s %g zx %g zy %g cut %g: hi %.17g + dropped %.3g, lo %.17g, direct %.17g",
				i, left, lx, ly, lm, s, zx, zy, b.cut, b.hi.sum, b.drop.sum, b.lo.sum, want)
		}
		if b.drop.sum > 0 {
			cut++
			if b.drop.sum > math.Exp(b.cut)*1.1 {
				t.Fatalf("case %d: dropped bound %g over the pair's budget %g", i, b.drop.sum, math.Exp(b.cut))
			}
		}
	}
	if cut < 500 {
		t.Fatalf("only %d cases dropped leaves", cut)
	}
}

// TestSparseCutMatchesFull compares sparseExact with and without the cut
// on the random laws of the skips' comparison (r51SparseLaw): the
// brackets agree within the cut's check (cutCheck of the bracket, plus
// the lower end's share), the check passes, and the cut moves a good
// share of them (it is not idle). And hi with the cut is not below hi
// without it (helper-61): every dropped leaf's upper-sum term is at most
// e^(thr + 0.01 + rel) X < e^cut / (left + 1), so the cut's upper sum plus
// its bound is at least the full upper sum, up to the sums' roundings and
// a differing extension of m_max. That is what a bracket that forgot the
// dropped bound (sparse.go's hi without sum.drop) breaks, which the
// tolerance above does not see (the bound is within sparseRel's margin).
func TestSparseCutMatchesFull(t *testing.T) {
	for _, seed := range []uint64{2, 5} {
		sparseCutMatchesFull(t, seed)
	}
}

func sparseCutMatchesFull(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(61, seed))
	moved, used := 0, 0
	for trial := range 600 {
		p, n := r51SparseLaw(rng)
		if p.maxZ <= 0 {
			continue
		}
		full, fok, _ := sparseExactCut(p, n, false)
		got, gok, tight := sparseExactCut(p, n, true)
		if gok != fok {
			t.Fatalf("trial %d: applies %v with the cut, %v without", trial, gok, fok)
		}
		if !gok {
			continue
		}
		used++
		if !tight {
			t.Errorf("trial %d n %d: the cut's check failed", trial, n)
		}
		if got != full {
			moved++
			if got.hi < full.hi*(1-1e-15) {
				t.Errorf("trial %d n %d: hi with the cut %.17g, without %.17g", trial, n, got.hi, full.hi)
			}
		}
		tol := 2 * cutCheck * full.hi
		if math.Abs(got.hi-full.hi) > tol || math.Abs(got.lo-full.lo) > tol {
			t.Errorf("trial %d n %d z %v w %v: %+v with the cut, %+v without", trial, n, p.z, p.w, got, full)
		}
	}
	if used < 300 || moved < 50 {
		t.Fatalf("%d laws on the sparse path, %d moved by the cut", used, moved)
	}
}

// TestSparseCutFallback forces the check to fail (a budget as large as the
// sum itself): sparseExact then gives the bits of the path without the
// cut.
func TestSparseCutFallback(t *testing.T) {
	old := cutRel
	defer func() { cutRel = old }()
	rng := rand.New(rand.NewPCG(62, 2))
	fell := 0
	for range 200 {
		p, n := r51SparseLaw(rng)
		if p.maxZ <= 0 {
			continue
		}
		cutRel = 1
		_, ok, tight := sparseExactCut(p, n, true)
		got, gok := sparseExact(p, n)
		cutRel = old
		want, wok, _ := sparseExactCut(p, n, false)
		if got != want || gok != wok {
			t.Fatalf("n %d: %+v %v, without the cut %+v %v", n, got, gok, want, wok)
		}
		if ok && !tight {
			fell++
		}
	}
	if fell < 20 {
		t.Fatalf("only %d laws failed the check at budget 1", fell)
	}
}

// TestSparseCutMechanismSets runs the cut on the sets the mechanisms
// declare (k-RR, generic; upper and lower sides) over eps0, n and eps:
// its check never sends them back to the full walk (which would cost both
// passes), and the brackets agree with the full walk's within cutCheck.
func TestSparseCutMechanismSets(t *testing.T) {
	used := 0
	for _, m := range []Mechanism{KRRMech{K: 2}, KRRMech{K: 10}, KRRMech{K: 100}, Generic()} {
		for _, e0 := range []float64{2, 5, 8, 12, 16, 20} {
			d, err := m.Decompose(e0)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range append(append([]AtomSet{}, d.Upper...), d.Lower...) {
				for _, n := range []int{100, 1e4, 1e6, 1e8} {
					for _, f := range []float64{0, 0.1, 0.3, 0.6, 0.9} {
						p := prepare(s, f*e0)
						if p.maxZ <= 0 {
							continue
						}
						got, ok, tight := sparseExactCut(p, n, true)
						if !ok {
							continue
						}
						used++
						if !tight {
							t.Errorf("%v eps0 %v n %d eps %v: the cut's check failed", m, e0, n, f*e0)
						}
						full, _, _ := sparseExactCut(p, n, false)
						if tol := 2 * cutCheck * full.hi; math.Abs(got.hi-full.hi) > tol || math.Abs(got.lo-full.lo) > tol {
							t.Errorf("%v eps0 %v n %d eps %v: %+v with the cut, %+v without", m, e0, n, f*e0, got, full)
						}
					}
				}
			}
		}
	}
	if used < 500 {
		t.Fatalf("only %d evaluations took the sparse path", used)
	}
}

// TestSparseCutMerged: sparseMerged passes the cut on to the merged set
// (and the path without the cut keeps it off all the way down, a
// reviewer's finding): with it, the bracket still contains the enumerated
// value and agrees with the one without it within cutCheck.
func TestSparseCutMerged(t *testing.T) {
	for _, c := range []struct{ wTiny, zTiny float64 }{{1e-19, 1e3}, {3e-11, 5}} {
		for _, n := range []int{12, 200} {
			p := prepared{z: []float64{-1, 7, 3, c.zTiny}, w: []float64{0.8, 0.15, 0.05 - c.wTiny, c.wTiny}, maxZ: 7}
			got, ok, tight := sparseMerged(p, 0, n, true)
			full, fok, _ := sparseMerged(p, 0, n, false)
			if !ok || !fok || !tight {
				t.Fatalf("w %g n %d: ok %v %v, tight %v", c.wTiny, n, ok, fok, tight)
			}
			if tol := 2 * cutCheck * full.hi; math.Abs(got.hi-full.hi) > tol || math.Abs(got.lo-full.lo) > tol {
				t.Errorf("w %g n %d: %+v with the cut, %+v without", c.wTiny, n, got, full)
			}
			if n == 12 {
				if ex := enumerateDelta(p.z, p.w, n); got.lo > ex*(1+1e-13) || got.hi < ex*(1-1e-13) {
					t.Errorf("w %g: [%.15g, %.15g] misses %.15g", c.wTiny, got.lo, got.hi, ex)
				}
			}
		}
	}
}
