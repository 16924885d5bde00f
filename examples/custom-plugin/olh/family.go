package olh

import (
	"fmt"
	"math"
)

// Family is the hash family of OLH at one eps0: the affine maps over the
// prime field GF(g),
//
//	H_{a,b}(v) = (a_0 v_0 + a_1 v_1 + ... + a_{m-1} v_{m-1} + b) mod g,
//
// where v_0..v_{m-1} are the base-g digits of the bucket index v in [0, d)
// (least significant first), m = ceil(log_g d) is the fewest digits that
// hold d-1, a = (a_0..a_{m-1}) is any non-zero vector of GF(g)^m and b any
// element of GF(g).
//
// A seed s in [0, Seeds()) with Seeds() = (g^m - 1)·g names one map:
// b = s mod g and a is the base-g digit vector of s/g + 1. Seeds are drawn
// uniformly, so (a, b) is uniform over (GF(g)^m \ {0}) × GF(g).
//
// Exact properties, over a uniform seed, for distinct buckets x, x' in
// [0, d) (they are what the declaration needs; TestFamilyExact checks them
// by enumerating every seed of small families):
//
//  1. H(x) is uniform on [0, g): b is uniform and independent of a.
//  2. P(H(x) = H(x')) = c = (g^(m-1) - 1)/(g^m - 1), the same for every
//     pair: H(x) = H(x') iff a·(x - x') = 0, and the digit vector x - x' is
//     non-zero, so that hyperplane holds g^(m-1) - 1 of the g^m - 1 non-zero
//     a. (c is a little below 1/g; it is 0 when m = 1, i.e. d <= g.)
//  3. No map is constant on [0, d): the buckets 1, g, ..., g^(m-1) are all
//     below d (g^(m-1) < d by the choice of m), their digit vectors are the
//     unit vectors, so a·v = 0 for every bucket v would force a = 0, which
//     is excluded. Hence every (seed, y) is reported with the smaller GRR
//     probability by some input, which fixes the blanket.
//  4. For three distinct buckets x, x', x3 the collision pattern depends
//     only on whether the digit vectors x' - x and x3 - x are linearly
//     dependent (x3 - x = λ(x' - x): all three collide with probability c,
//     else all differ) or independent (possible when m >= 2; the pair
//     (a·(x'-x), a·(x3-x)) is uniform on GF(g)² minus the excluded a = 0).
//     See Declaration for the resulting atoms.
type Family struct {
	g     uint64
	m     int
	d     int
	seeds uint64
}

// maxDigits bounds m: with g >= 2 and d <= MaxBuckets = 2^20, m <= 20.
const maxDigits = 21

// NewFamily returns the family of maps from d buckets to a prime number g of
// values. It panics unless d >= 2, g is prime and (g^m - 1)·g < 2^63 (a
// programmer error: the randomizer checks its configuration first).
func NewFamily(d, g int) Family {
	if d < 2 || d > MaxBuckets || !isPrime(g) {
		panic(fmt.Sprintf("olh: family with d = %d, g = %d", d, g))
	}
	f := Family{g: uint64(g), m: 1, d: d}
	gm := uint64(g) // g^m
	for gm < uint64(d) {
		f.m++
		gm *= uint64(g)
	}
	if gm > (1<<63)/uint64(g) {
		panic(fmt.Sprintf("olh: family with d = %d, g = %d has too many seeds", d, g))
	}
	f.seeds = (gm - 1) * uint64(g)
	return f
}

// G returns the number of hash values g.
func (f Family) G() int { return int(f.g) }

// M returns the number of base-g digits of a bucket index.
func (f Family) M() int { return f.m }

// Seeds returns the number of seeds, (g^m - 1)·g.
func (f Family) Seeds() uint64 { return f.seeds }

// Collision returns c = P(H(x) = H(x')) for distinct buckets,
// (g^(m-1) - 1)/(g^m - 1), and 1 - c in closed form,
// g^(m-1)(g - 1)/(g^m - 1). Both are exact up to one rounding: g^m < 2^53.
func (f Family) Collision() (c, notC float64) {
	gm1 := math.Pow(float64(f.g), float64(f.m-1))
	den := gm1*float64(f.g) - 1
	return (gm1 - 1) / den, gm1 * float64(f.g-1) / den
}

// key returns the map (a, b) of a seed; a has m digits.
func (f Family) key(seed uint64, a []uint64) (b uint64) {
	b = seed % f.g
	t := seed/f.g + 1 // in [1, g^m)
	for i := range a {
		a[i] = t % f.g
		t /= f.g
	}
	return b
}

// Hash returns H_seed(v). It panics if seed >= Seeds() or v is outside
// [0, d).
func (f Family) Hash(seed uint64, v int) int {
	if seed >= f.seeds || v < 0 || v >= f.d {
		panic(fmt.Sprintf("olh: Hash(%d, %d) outside [0,%d) × [0,%d)", seed, v, f.seeds, f.d))
	}
	var buf [maxDigits]uint64
	a := buf[:f.m]
	h := f.key(seed, a)
	x := uint64(v)
	for _, ai := range a {
		h = (h + ai*(x%f.g)) % f.g
		x /= f.g
	}
	return int(h)
}

// support adds 1 to counts[v] for every bucket v with H_seed(v) = y, in
// O(d) amortized time: it walks v = 0, 1, ..., d-1 updating the hash as
// the digits of v increment. When v+1 turns the lowest i digits from g-1
// to 0 and increments digit i, the hash changes by
// a_i - (g-1)(a_0 + ... + a_{i-1}) = a_0 + ... + a_i (mod g).
// a and prefix are scratch buffers of length m.
func (f Family) support(seed, y uint64, counts []int64, a, prefix, digits []uint64) {
	h := f.key(seed, a)
	var s uint64
	for i, ai := range a {
		s = (s + ai) % f.g
		prefix[i] = s
		digits[i] = 0
	}
	for v := range f.d {
		if h == y {
			counts[v]++
		}
		i := 0
		for i < f.m-1 && digits[i] == f.g-1 {
			digits[i] = 0
			i++
		}
		digits[i]++
		h = (h + prefix[i]) % f.g
	}
}

// collinear reports whether the digit vectors x' - x and x3 - x of three
// distinct buckets are linearly dependent over GF(g) (property 4): x3 - x
// = λ(x' - x) with λ = (x3 - x)_i / (x' - x)_i at a digit i where x' - x is
// not zero, the inverse taken as u^(g-2) (Fermat). It panics if x' = x.
func (f Family) collinear(x, x2, x3 int) bool {
	g := f.g
	var u, v [maxDigits]uint64
	a, b, c := uint64(x), uint64(x2), uint64(x3)
	for i := range f.m {
		u[i] = (b%g + g - a%g) % g
		v[i] = (c%g + g - a%g) % g
		a, b, c = a/g, b/g, c/g
	}
	i := 0
	for i < f.m && u[i] == 0 {
		i++
	}
	if i == f.m {
		panic(fmt.Sprintf("olh: collinear(%d, %d, %d) with x' = x", x, x2, x3))
	}
	inv := uint64(1)
	for base, e := u[i], g-2; e > 0; e >>= 1 {
		if e&1 == 1 {
			inv = inv * base % g
		}
		base = base * base % g
	}
	lambda := v[i] * inv % g
	for j := range f.m {
		if v[j] != lambda*u[j]%g {
			return false
		}
	}
	return true
}

// isPrime reports whether n is prime, by trial division (n < 2^22 here).
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for p := 2; p*p <= n; p++ {
		if n%p == 0 {
			return false
		}
	}
	return true
}

// primeAtLeast returns the smallest prime >= n.
func primeAtLeast(n int) int {
	for !isPrime(n) {
		n++
	}
	return n
}

// primeAtMost returns the largest prime <= n, or 0 if n < 2.
func primeAtMost(n int) int {
	for ; n >= 2; n-- {
		if isPrime(n) {
			return n
		}
	}
	return 0
}
