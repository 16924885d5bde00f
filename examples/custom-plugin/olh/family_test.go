package olh

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// naiveHash is H_seed(v) computed from the definition in Family's
// documentation, independently of Family.Hash and Family.support.
func naiveHash(d, g int, seed uint64, v int) int {
	m := 1
	for p := g; p < d; p *= g {
		m++
	}
	b := int(seed % uint64(g))
	t := int(seed/uint64(g)) + 1
	h := b
	for range m {
		h = (h + (t%g)*(v%g)) % g
		t /= g
		v /= g
	}
	return h
}

// smallFamilies are (d, g) pairs whose seeds can all be enumerated: m from
// 1 to 4, g = 2 (where no triple is dependent) and g >= d (c = 0).
var smallFamilies = [][2]int{{2, 2}, {2, 3}, {3, 2}, {3, 3}, {4, 2}, {5, 2}, {5, 3}, {9, 3}, {10, 3}, {7, 7}, {6, 11}, {12, 5}, {26, 5}, {17, 2}, {30, 3}}

// TestFamilyExact enumerates every seed of small families and checks the
// properties the declaration relies on, as exact integer counts: H(x) is
// uniform; every pair collides for exactly (g^(m-1)-1)·g seeds, that is
// probability c; no map is constant on [0, d); and every triple follows one
// of the two collision patterns of property 4.
func TestFamilyExact(t *testing.T) {
	for _, dg := range smallFamilies {
		d, g := dg[0], dg[1]
		f := NewFamily(d, g)
		t.Run(fmt.Sprintf("d=%d/g=%d", d, g), func(t *testing.T) {
			S := f.Seeds()
			gm1 := uint64(math.Pow(float64(g), float64(f.M()-1)))
			if want := (gm1*uint64(g) - 1) * uint64(g); S != want {
				t.Fatalf("Seeds = %d, want %d", S, want)
			}
			hash := make([][]int, S)
			for s := range S {
				hash[s] = make([]int, d)
				constant := true
				for v := range d {
					hash[s][v] = f.Hash(s, v)
					if n := naiveHash(d, g, s, v); hash[s][v] != n {
						t.Fatalf("Hash(%d, %d) = %d, definition gives %d", s, v, hash[s][v], n)
					}
					constant = constant && hash[s][v] == hash[s][0]
				}
				if constant {
					t.Errorf("seed %d hashes every bucket to %d", s, hash[s][0])
				}
			}
			for x := range d {
				counts := make([]uint64, g)
				for s := range S {
					counts[hash[s][x]]++
				}
				for y, n := range counts {
					if n != S/uint64(g) {
						t.Errorf("bucket %d hashes to %d under %d of %d seeds, want %d", x, y, n, S, S/uint64(g))
					}
				}
			}
			c, notC := f.Collision()
			wantColl := (gm1 - 1) * uint64(g)
			// c and 1-c are ratios of integers below 2^53: one rounding each.
			const tol = 1e-15
			if math.Abs(c-float64(wantColl)/float64(S)) > tol || math.Abs(notC-float64(S-wantColl)/float64(S)) > tol {
				t.Errorf("Collision = %v, %v; enumeration gives %v", c, notC, float64(wantColl)/float64(S))
			}
			for x := range d {
				for xp := range d {
					if x == xp {
						continue
					}
					var n uint64
					for s := range S {
						if hash[s][x] == hash[s][xp] {
							n++
						}
					}
					if n != wantColl {
						t.Fatalf("buckets %d, %d collide under %d seeds, want %d", x, xp, n, wantColl)
					}
					for x3 := range d {
						if x3 != x && x3 != xp {
							checkTriple(t, f, hash, x, xp, x3)
						}
					}
				}
			}
		})
	}
}

// checkTriple compares the collision pattern counts of a triple with
// property 4 of Family.
func checkTriple(t *testing.T, f Family, hash [][]int, x, xp, x3 int) {
	t.Helper()
	g := f.G()
	var pD, p12, p13, p23, pA uint64
	for s := range hash {
		h1, h2, h3 := hash[s][x], hash[s][xp], hash[s][x3]
		switch {
		case h1 == h2 && h2 == h3:
			pA++
		case h1 == h2:
			p12++
		case h1 == h3:
			p13++
		case h2 == h3:
			p23++
		default:
			pD++
		}
	}
	S := f.Seeds()
	gm := S/uint64(g) + 1 // g^m
	if dependent(g, f.M(), x, xp, x3) {
		coll := (gm/uint64(g) - 1) * uint64(g)
		if pA != coll || pD != S-coll || p12+p13+p23 != 0 {
			t.Fatalf("dependent triple (%d,%d,%d): patterns D %d, 12 %d, 13 %d, 23 %d, A %d of %d", x, xp, x3, pD, p12, p13, p23, pA, S)
		}
		return
	}
	gm2 := gm / uint64(g) / uint64(g)
	g64 := uint64(g)
	if pA != (gm2-1)*g64 || p12 != (g64-1)*gm2*g64 || p13 != p12 || p23 != p12 || pD != (g64-1)*(g64-2)*gm2*g64 {
		t.Fatalf("independent triple (%d,%d,%d): patterns D %d, 12 %d, 13 %d, 23 %d, A %d of %d", x, xp, x3, pD, p12, p13, p23, pA, S)
	}
}

// dependent reports whether the digit vectors x3 - x and xp - x are
// linearly dependent over GF(g).
func dependent(g, m, x, xp, x3 int) bool {
	digits := func(v int) []int {
		out := make([]int, m)
		for i := range out {
			out[i] = v % g
			v /= g
		}
		return out
	}
	a, b, c := digits(x), digits(xp), digits(x3)
	for lambda := 1; lambda < g; lambda++ {
		ok := true
		for i := range m {
			if ((c[i]-a[i])%g+g)%g != (lambda*(b[i]-a[i])%g+g*g)%g {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestSupportMatchesHash compares the incremental support walk with Hash on
// random seeds and values, including families with many digits.
func TestSupportMatchesHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dg := range [][2]int{{2, 2}, {3, 2}, {10, 3}, {100, 7}, {1000, 2}, {1 << 20, 2}, {1000, 1009}, {500, 23}} {
		d, g := dg[0], dg[1]
		f := NewFamily(d, g)
		a, prefix, digits := make([]uint64, f.M()), make([]uint64, f.M()), make([]uint64, f.M())
		trials := 20
		if d > 10000 {
			trials = 2
		}
		for range trials {
			seed := rng.Uint64N(f.Seeds())
			y := rng.Uint64N(uint64(g))
			counts := make([]int64, d)
			f.support(seed, y, counts, a, prefix, digits)
			for v := range d {
				want := int64(0)
				if f.Hash(seed, v) == int(y) {
					want = 1
				}
				if counts[v] != want {
					t.Fatalf("d=%d g=%d seed %d y %d: support of %d is %d, Hash gives %d", d, g, seed, y, v, counts[v], want)
				}
			}
		}
	}
}

func TestPrimes(t *testing.T) {
	primes := []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31}
	for n := range 32 {
		want := false
		for _, p := range primes {
			want = want || p == n
		}
		if isPrime(n) != want {
			t.Errorf("isPrime(%d) = %v", n, !want)
		}
	}
	for _, tt := range []struct{ n, atLeast, atMost int }{{0, 2, 0}, {1, 2, 0}, {2, 2, 2}, {4, 5, 3}, {24, 29, 23}, {1 << 20, 1048583, 1048573}} {
		if got := primeAtLeast(tt.n); got != tt.atLeast {
			t.Errorf("primeAtLeast(%d) = %d, want %d", tt.n, got, tt.atLeast)
		}
		if got := primeAtMost(tt.n); got != tt.atMost {
			t.Errorf("primeAtMost(%d) = %d, want %d", tt.n, got, tt.atMost)
		}
	}
}
