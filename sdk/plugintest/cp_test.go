package plugintest

import (
	"fmt"
	"math"
	"testing"
)

// logBinomTail returns log P(Binomial(n, p) <= k), summed term by term in
// log space from log-gamma (independent of gonum's incomplete beta).
func logBinomTail(k, n int64, p float64) float64 { return logBinomSum(0, k, n, p) }

// logBinomUpper returns log P(Binomial(n, p) >= k), summed the same way.
func logBinomUpper(k, n int64, p float64) float64 { return logBinomSum(k, n, n, p) }

// logBinomSum returns log P(a <= Binomial(n, p) <= b).
func logBinomSum(a, b, n int64, p float64) float64 {
	lgn, _ := math.Lgamma(float64(n) + 1)
	lp, lq := math.Log(p), math.Log1p(-p)
	terms := make([]float64, 0, b-a+1)
	top := math.Inf(-1)
	for j := a; j <= b; j++ {
		a, _ := math.Lgamma(float64(j) + 1)
		b, _ := math.Lgamma(float64(n-j) + 1)
		l := lgn - a - b + float64(j)*lp + float64(n-j)*lq
		terms = append(terms, l)
		top = math.Max(top, l)
	}
	var s float64
	for _, l := range terms {
		s += math.Exp(l - top)
	}
	return top + math.Log(s)
}

// TestCPBounds checks the Clopper-Pearson bounds at the kit's levels
// against exact binomial tails summed term by term: at cpUpper(k, n, a)
// the tail P(X <= k) is at most a, and 1e-6 below it, above a (the bound is
// sound and tight); cpLower by symmetry (P(X >= k) under p is P(X <= n-k)
// under 1-p); and the closed forms 1 - a^(1/n) at k = 0 and a^(1/n) at
// k = n. gonum's InvRegIncBeta, used before, gave cpUpper(0, 10^4, 7e-9)
// near 1 and cpLower(n, n, 7e-9) = 0.9375 for n >= 20,000.
func TestCPBounds(t *testing.T) {
	for _, n := range []int64{10, 1000, 20000, 1_000_000} {
		for _, a := range []float64{0.05, 1e-6, 7e-9, 3e-10, 1e-13} {
			want0 := -math.Expm1(math.Log(a) / float64(n))
			if got := cpUpper(0, n, a); math.Abs(got-want0) > 1e-9*want0 {
				t.Errorf("cpUpper(0, %d, %g) = %.9g, want 1 - a^(1/n) = %.9g", n, a, got, want0)
			}
			wantN := math.Exp(math.Log(a) / float64(n))
			if got := cpLower(n, n, a); math.Abs(got-wantN) > 1e-12 {
				t.Errorf("cpLower(%d, %d, %g) = %.9g, want a^(1/n) = %.9g", n, n, a, got, wantN)
			}
			for _, k := range []int64{1, 3, 22, n / 2, n - 3, n - 1} {
				if k <= 0 || k >= n || k > 20000 && k < n-20000 {
					continue // keep the term-by-term sums short
				}
				name := fmt.Sprintf("n=%d a=%g k=%d", n, a, k)
				la := math.Log(a)
				up := cpUpper(k, n, a)
				if k < n-20000 || n <= 20000 {
					if l := logBinomTail(k, n, up); l > la+1e-6 {
						t.Errorf("%s: at cpUpper = %.9g the tail is e^%.9g > a", name, up, l)
					}
					if l := logBinomTail(k, n, up*(1-1e-6)); l <= la {
						t.Errorf("%s: cpUpper = %.9g is not tight: 1e-6 below it the tail is already e^%.9g <= a", name, up, l)
					}
				}
				lo := cpLower(k, n, a)
				if n <= 20000 {
					if l := logBinomUpper(k, n, lo); l > la+1e-6 {
						t.Errorf("%s: at cpLower = %.9g the tail is e^%.9g > a", name, lo, l)
					}
					if l := logBinomUpper(k, n, lo*(1+1e-6)); lo*(1+1e-6) < 1 && l <= la {
						t.Errorf("%s: cpLower = %.9g is not tight: 1e-6 above it the tail is still e^%.9g <= a", name, lo, l)
					}
				}
			}
		}
	}
}

// TestAuditSeesZeroCounts: a sampler with infinite eps (x puts half its
// mass on cell 0, which x' never draws; otherwise both uniform on cells
// 1..3), at the kit's default 20,000 draws per input and its default
// per-direction level: the attack proves eps >= ln(cpLower(5000, 10000) /
// (1 - a^(1/10000))) = 5.5. With gonum's inverse (cpUpper(0, ...) near 1)
// it reported 0.57 and passed a declared eps0 = 2 (found in review).
func TestAuditSeesZeroCounts(t *testing.T) {
	const level = 1e-6 / families / 18
	var xs, x2s []int
	for i := range 20000 {
		if i%2 == 0 {
			xs = append(xs, 0)
		} else {
			xs = append(xs, 1+(i/2)%3)
		}
		x2s = append(x2s, 1+i%3)
	}
	d := distinguish(xs, x2s, 4, level)
	if d.eps < 5.5 || d.size != 1 || d.kx != 5000 || d.kx2 != 0 {
		t.Errorf("an infinite-eps sampler: %+v, want the set {0} with 5000 and 0 of 10000 and a bound above 5.5", d)
	}
}
