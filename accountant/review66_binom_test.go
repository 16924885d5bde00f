package accountant

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentReview66LogBinomPMFsFrom: goroutines ask logBinomPMFsFrom
// for random ranges of a few shared laws (and, between, of many other laws
// so that tables are extended and evicted), and read their entries after
// the call returns while the others fill other entries of the same
// tables: each entry read is logBinomPMF's bits. Run it with -race.
func TestConcurrentReview66LogBinomPMFsFrom(t *testing.T) {
	laws := []struct {
		n int
		p float64
	}{{900_000, 0.0123}, {5000, 0.31}, {1 << 20, 3e-3}}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(66, uint64(g)))
			for i := range 120 {
				if i%10 == 9 {
					// Pressure: a new law, evicting older tables.
					logBinomPMFsFrom(1000+rng.IntN(1<<30), 0.001+rng.Float64()/4, 0, rng.IntN(30000))
					continue
				}
				law := laws[rng.IntN(len(laws))]
				m1 := min(law.n, rng.IntN(12000)*rng.IntN(3))
				m0 := rng.IntN(m1 + 1)
				got := logBinomPMFsFrom(law.n, law.p, m0, m1)
				if got.lo != m0 || len(got.v) != m1-m0+1 || cap(got.v) != m1-m0+1 {
					errs <- "window, length or capacity"
					return
				}
				for m := m0; m <= m1; m += 1 + m/64 {
					if w := logBinomPMF(m, law.n, law.p); math.Float64bits(got.at(m)) != math.Float64bits(w) {
						errs <- "entry differs from logBinomPMF"
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestReview66LogBinomPMFsFromUncached: a range longer than pmfCacheMax
// (a fresh slice, not cached), and one past it in m, are logBinomPMF's
// bits, both ends included.
func TestReview66LogBinomPMFsFromUncached(t *testing.T) {
	n, p := 10_000_000_000, 2.1e-4
	for _, r := range [][2]int{{pmfCacheMax - 3, pmfCacheMax + 2}, {1_000_000, 1_000_000 + pmfCacheMax}} {
		m0, m1 := r[0], r[1]
		got := logBinomPMFsFrom(n, p, m0, m1)
		if got.lo != m0 || len(got.v) != m1-m0+1 {
			t.Fatalf("window [%d, %d) of %d entries, want [%d, %d]", got.lo, got.lo+len(got.v), len(got.v), m0, m1)
		}
		for m := m0; m <= m1; m += max(1, (m1-m0)/5000) {
			if w := logBinomPMF(m, n, p); math.Float64bits(got.at(m)) != math.Float64bits(w) {
				t.Fatalf("entry %d: %v, logBinomPMF %v", m, got.at(m), w)
			}
		}
		if w := logBinomPMF(m1, n, p); math.Float64bits(got.at(m1)) != math.Float64bits(w) {
			t.Fatalf("entry %d: %v, logBinomPMF %v", m1, got.at(m1), w)
		}
	}
}

// TestReview66SparseUncachedSameBits: one non-dominant atom at n = 1e10
// with about 2.1e6 non-dominant draws (m_max past pmfCacheMax, the
// uncached tables), rootCounts cutting [0, m_max] near the mean: the same
// bracket bits walking every m or the counting ones only (the skipping
// walk first, on empty tables).
func TestReview66SparseUncachedSameBits(t *testing.T) {
	defer func() { sparseWalkEveryCount = false }()
	n := 10_000_000_000
	pi := 2.1e-4
	nf := float64(n)
	for _, target := range []float64{nf*pi - 3000, nf*pi + 1500} {
		z0 := -1e-3
		zmax := -z0 * (nf - target) / target
		p := prepared{z: []float64{z0, zmax}, w: []float64{1 - pi, pi}}
		forgetSparseTables()
		got, ok := sparseExact(p, n)
		sparseWalkEveryCount = true
		want, okW := sparseExact(p, n)
		sparseWalkEveryCount = false
		if ok != okW || math.Float64bits(got.lo) != math.Float64bits(want.lo) || math.Float64bits(got.hi) != math.Float64bits(want.hi) {
			t.Fatalf("target %g: %+v %v, walking every m %+v %v", target, got, ok, want, okW)
		}
		if !ok {
			t.Errorf("target %g: the sparse path declined", target)
		}
	}
}
