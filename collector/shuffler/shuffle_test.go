package shuffler

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/sdk/ldp"
	"gonum.org/v1/gonum/stat/distuv"
)

// falseFailure is the probability that a statistical test in this file
// fails although the code under test is correct.
const falseFailure = 1e-6

// permIndex returns the index of the permutation p of 0..len(p)-1 in
// lexicographic order (its Lehmer code).
func permIndex(p []int) int {
	idx := 0
	for i := range p {
		smaller := 0
		for _, v := range p[i+1:] {
			if v < p[i] {
				smaller++
			}
		}
		idx = idx*(len(p)-i) + smaller
	}
	return idx
}

// chiSquareUniform tests counts against the uniform distribution over
// len(counts) cells with a Pearson chi-square test. The threshold is the
// (1 - rate) quantile of the chi-square distribution with len(counts)-1
// degrees of freedom (the statistic's asymptotic law under the null; with
// >= 10^4 expected per cell the approximation is good far into the tail),
// so a correct shuffle fails with probability about rate.
func chiSquareUniform(t *testing.T, counts []int, trials int, rate float64) {
	t.Helper()
	expected := float64(trials) / float64(len(counts))
	var stat float64
	for _, c := range counts {
		d := float64(c) - expected
		stat += d * d / expected
	}
	threshold := distuv.ChiSquared{K: float64(len(counts) - 1)}.Quantile(1 - rate)
	if stat > threshold {
		t.Errorf("chi-square = %.2f > %.2f (df %d, false-failure rate %g): counts %v", stat, threshold, len(counts)-1, rate, counts)
	}
}

func TestShuffleAllOrdersEquallyLikely(t *testing.T) {
	const trials = 24 * 10000
	for _, tc := range []struct {
		name string
		src  func() ldp.Source
	}{
		// The seeded case always runs the same draws; the crypto case is
		// the production default.
		{"seeded", func() ldp.Source { return rand.NewChaCha8([32]byte{1, 2, 3}) }},
		{"crypto", func() ldp.Source { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src()
			counts := make([]int, 24)
			p := make([]int, 4)
			for range trials {
				for i := range p {
					p[i] = i
				}
				Shuffle(src, p)
				counts[permIndex(p)]++
			}
			chiSquareUniform(t, counts, trials, falseFailure)
		})
	}
}

// TestShufflePositions checks a larger shuffle: every item lands in every
// position equally often (one chi-square test per item, with the
// false-failure rate split among them).
func TestShufflePositions(t *testing.T) {
	const n, trials = 7, 7 * 20000
	src := rand.NewChaCha8([32]byte{9})
	pos := make([][]int, n)
	for i := range pos {
		pos[i] = make([]int, n)
	}
	s := make([]int, n)
	for range trials {
		for i := range s {
			s[i] = i
		}
		Shuffle(src, s)
		for at, v := range s {
			pos[v][at]++
		}
	}
	for v := range pos {
		// Bonferroni: n tests at falseFailure/n each keep the overall
		// false-failure rate at most falseFailure.
		chiSquareUniform(t, pos[v], trials, falseFailure/n)
	}
}

func TestShuffleIsPermutation(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100, 1000} {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		Shuffle(nil, s)
		got := slices.Clone(s)
		slices.Sort(got)
		for i, v := range got {
			if v != i {
				t.Fatalf("n=%d: shuffle lost or duplicated items: %v", n, s)
			}
		}
	}
}

// TestShuffleSeeded checks that the shuffle is a function of the source
// alone, so a seeded source reproduces a release in tests.
func TestShuffleSeeded(t *testing.T) {
	a, b := make([]int, 50), make([]int, 50)
	for i := range a {
		a[i], b[i] = i, i
	}
	Shuffle(rand.NewChaCha8([32]byte{5}), a)
	Shuffle(rand.NewChaCha8([32]byte{5}), b)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different orders")
	}
}
