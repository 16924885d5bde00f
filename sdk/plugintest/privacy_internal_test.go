package plugintest

import (
	"math"
	"math/rand/v2"
	"testing"
)

// cells returns a sample of cells with the given counts, cell by cell.
func cells(counts ...int) []int {
	var out []int
	for c, k := range counts {
		for range k {
			out = append(out, c)
		}
	}
	return out
}

// exactCP is the Clopper-Pearson bound by Clopper and Pearson's own
// definition, inverted by plain bisection on binomial tails summed term by
// term (cp_test.go): the upper bound, the p with P(X <= k) = a, or the
// lower, the p with P(X >= k) = a.
func exactCP(k, n int64, a float64, upper bool) float64 {
	la := math.Log(a)
	lo, hi := 0.0, 1.0
	for range 200 {
		mid := (lo + hi) / 2
		if upper {
			// P(X <= k) falls as p grows: the answer is above mid while
			// the tail exceeds a.
			if logBinomTail(k, n, mid) > la {
				lo = mid
			} else {
				hi = mid
			}
		} else if logBinomUpper(k, n, mid) > la { // P(X >= k) grows with p
			hi = mid
		} else {
			lo = mid
		}
	}
	return (lo + hi) / 2
}

// TestDistinguishAgainstBeta recomputes distinguish's bound on fixed
// samples with Clopper-Pearson bounds computed independently (exactCP) and
// its own choice of the set: the cells ranked by the first halves'
// ratio, the prefix whose first-half bound is largest.
func TestDistinguishAgainstBeta(t *testing.T) {
	const level = 1e-6
	// Halves: the first 1000 draws of each, then the next 1000.
	xs := append(cells(600, 300, 100), cells(580, 320, 100)...)
	x2s := append(cells(100, 300, 600), cells(90, 310, 600)...)
	bound := func(kx, kx2, n float64) float64 {
		lo := exactCP(int64(kx), int64(n), level/2, false)
		hi := exactCP(int64(kx2), int64(n), level/2, true)
		return math.Log(lo / hi)
	}
	// Ranking by (a_x + 1/2) / (a_x' + 1/2): cell 0 (6.0), cell 1 (1.0),
	// cell 2 (0.17); the first-half bounds of {0}, {0,1}, {0,1,2}:
	b1, b2 := bound(600, 100, 1000), bound(900, 400, 1000)
	if !(b1 > b2) {
		t.Fatalf("the example should choose {0}: first-half bounds %g, %g", b1, b2)
	}
	want := bound(580, 90, 1000)
	d := distinguish(xs, x2s, 3, level)
	if d.size != 1 || d.kx != 580 || d.kx2 != 90 || d.n != 1000 || math.Abs(d.eps-want) > 1e-9 {
		t.Errorf("distinguish = %+v, want the set {0} with 580 and 90 of 1000 and bound %g", d, want)
	}
	rev := distinguish(x2s, xs, 3, level)
	if want := bound(600, 100, 1000); rev.size != 1 || math.Abs(rev.eps-want) > 1e-9 {
		t.Errorf("reversed: %+v, want the set {2} with bound %g", rev, want)
	}
	if p := auditPValue(d, d.eps-0.01); !(p < level) {
		t.Errorf("p-value against %g (below the bound at level %g): %g", d.eps-0.01, level, p)
	}
	if p := auditPValue(d, d.eps+0.01); !(p > level) {
		t.Errorf("p-value against %g (above the bound): %g", d.eps+0.01, p)
	}
}

// TestDistinguishCoverage: the bound is a lower confidence bound. Binary
// randomized response at eps = 1 with 200 draws per input: over 400 runs
// at level 0.1 per direction, the bound exceeds the true eps in at most
// 10% of runs, up to sampling error (Clopper-Pearson is conservative: the
// rate is far lower); a bound built the wrong way round would exceed it in
// most runs.
func TestDistinguishCoverage(t *testing.T) {
	const eps, n, runs, level = 1.0, 200, 400, 0.1
	rng := rand.New(rand.NewPCG(7, 8))
	keep := math.Exp(eps) / (math.Exp(eps) + 1)
	draw := func(x int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = x
			if rng.Float64() >= keep {
				out[i] = 1 - x
			}
		}
		return out
	}
	over := 0
	var sum float64
	for range runs {
		d := distinguish(draw(0), draw(1), 2, level)
		if d.eps > eps {
			over++
		}
		sum += math.Max(d.eps, 0)
	}
	// Binomial(400, 0.1): mean 40, sd 6; allow 4 sd.
	if over > 64 {
		t.Errorf("the bound exceeded the true eps %g in %d of %d runs at level %g", eps, over, runs, level)
	}
	if mean := sum / runs; mean < 0.3 {
		t.Errorf("mean bound %g: the attack barely sees a randomizer at eps %g", mean, eps)
	}
	t.Logf("bound above the true eps in %d of %d runs; mean bound %.3f", over, runs, sum/runs)
}
