package ldp_test

import (
	"math"
	"testing"

	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// alpha is the false-failure rate of every statistical check in this file.
// Each check compares its statistic with the (1 - alpha) quantile of the
// statistic's null distribution (chi-square with the test's degrees of
// freedom, or |N(0,1)| for z-tests), so a correct sampler fails a check with
// probability alpha over the choice of seed, and the few dozen checks here
// together with probability below 1e-4 (union bound). Seeds are fixed, so a
// run is reproducible.
const alpha = 1e-6

func TestUintnUniform(t *testing.T) {
	tests := []struct {
		n     uint64
		shift uint // observe v >> shift, so that huge n have few cells
		cells int
	}{
		{2, 0, 2},
		{3, 0, 3},
		{5, 0, 5},
		{7, 0, 7},
		{10, 0, 10},
		{100, 0, 100},
		{1000, 0, 1000},
		{1<<10 + 1, 0, 1<<10 + 1}, // rejects almost half of all draws
		{3 << 40, 40, 3},
		{5 << 59, 59, 5},
	}
	for _, tt := range tests {
		src := ldptest.Seeded(tt.n)
		draws := 200 * tt.cells
		obs := make([]int64, tt.cells)
		for range draws {
			v := ldp.Uintn(src, tt.n)
			if v >= tt.n {
				t.Fatalf("Uintn(%d) = %d", tt.n, v)
			}
			obs[v>>tt.shift]++
		}
		probs := make([]float64, tt.cells)
		for i := range probs {
			probs[i] = 1 / float64(tt.cells)
		}
		ldptest.CheckChiSquare(t, "Uintn", obs, probs, alpha)
	}
	if v := ldp.Uintn(ldptest.Seeded(1), 1); v != 0 {
		t.Errorf("Uintn(1) = %d", v)
	}
}

func TestFloat64Uniform(t *testing.T) {
	const cells, draws = 64, 64 * 500
	src := ldptest.Seeded(7)
	obs := make([]int64, cells)
	probs := make([]float64, cells)
	for i := range probs {
		probs[i] = 1.0 / cells
	}
	for range draws {
		f := ldp.Float64(src)
		if f < 0 || f >= 1 {
			t.Fatalf("Float64 = %v", f)
		}
		obs[int(f*cells)]++
	}
	ldptest.CheckChiSquare(t, "Float64", obs, probs, alpha)
}

func TestBernoulliFrequency(t *testing.T) {
	const draws = 400_000
	for _, p := range []float64{0.5, 0.3, 0.9, 0.01, 1e-3, 0.6 * 0x1p-10, 0x1p-12, 1 - 1e-3} {
		src := ldptest.Seeded(uint64(p * 1e6))
		var hits int64
		for range draws {
			if ldp.Bernoulli(src, p) {
				hits++
			}
		}
		// z-test on a binomial count: (hits - n p)/sqrt(n p (1-p)) is close
		// to N(0,1) since n p (1-p) >= 160 here.
		z := (float64(hits) - draws*p) / math.Sqrt(draws*p*(1-p))
		if math.Abs(z) > ldptest.ZCritical(alpha) {
			t.Errorf("Bernoulli(%g): %d of %d, z = %.2f", p, hits, draws, z)
		}
	}
	src := ldptest.Seeded(1)
	for range 100 {
		if ldp.Bernoulli(src, 0) || !ldp.Bernoulli(src, 1) || ldp.Bernoulli(src, -1) || !ldp.Bernoulli(src, 2) {
			t.Fatal("Bernoulli(0 or 1) is not deterministic")
		}
	}
}

// script is a Source that returns fixed words.
type script struct {
	words []uint64
	i     int
}

func (s *script) Uint64() uint64 {
	v := s.words[s.i]
	s.i++
	return v
}

// TestBernoulliExact checks the construction that makes small probabilities
// exact: p = 0.75·2^-30 is true iff the top 30 bits of the first word are
// zero and the low 53 bits of the second word are below 0.75·2^53.
func TestBernoulliExact(t *testing.T) {
	p := 0.75 * 0x1p-30
	thr := uint64(0.75 * (1 << 53))
	tests := []struct {
		words []uint64
		want  bool
		used  int
	}{
		{[]uint64{1 << 34, 0}, false, 1},               // a top bit set
		{[]uint64{1<<34 - 1, 0}, true, 2},              // top 30 bits clear, 0 < thr
		{[]uint64{0, thr}, false, 2},                   // not below the threshold
		{[]uint64{0, thr - 1}, true, 2},                // just below
		{[]uint64{0, 1<<63 | (thr - 1)}, true, 2},      // high bits of word 2 ignored
		{[]uint64{^uint64(0) >> 30, thr - 1}, true, 2}, // low 34 bits of word 1 ignored
	}
	for i, tt := range tests {
		s := &script{words: tt.words}
		if got := ldp.Bernoulli(s, p); got != tt.want || s.i != tt.used {
			t.Errorf("case %d: Bernoulli = %v using %d words, want %v using %d", i, got, s.i, tt.want, tt.used)
		}
	}
	// p = 0.75·2^-3: one word, top 3 bits zero and low 53 bits < thr.
	p = 0.75 * 0x1p-3
	for i, tt := range []struct {
		w    uint64
		want bool
	}{{0, true}, {1 << 61, false}, {1 << 60, true}, {thr, false}, {1<<60 | (thr - 1), true}} {
		s := &script{words: []uint64{tt.w}}
		if got := ldp.Bernoulli(s, p); got != tt.want || s.i != 1 {
			t.Errorf("small-exponent case %d: Bernoulli = %v using %d words, want %v using 1", i, got, s.i, tt.want)
		}
	}
}

func TestChoose(t *testing.T) {
	const draws = 200_000
	for _, pt := range []float64{0.2, 0.5, 0.8, 0.999} {
		src := ldptest.Seeded(uint64(pt * 1000))
		var hits int64
		for range draws {
			if ldp.Choose(src, pt, 1-pt) {
				hits++
			}
		}
		z := (float64(hits) - draws*pt) / math.Sqrt(draws*pt*(1-pt))
		if math.Abs(z) > ldptest.ZCritical(alpha) {
			t.Errorf("Choose(%g): %d of %d, z = %.2f", pt, hits, draws, z)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Choose(0.5, 0.6) did not panic")
		}
	}()
	ldp.Choose(ldptest.Seeded(1), 0.5, 0.6)
}

func TestCryptoSource(t *testing.T) {
	// 3000 words cross several 512-word refills. Each nibble of a word is
	// uniform on 16 values.
	src := ldp.NewCryptoSource()
	obs := make([]int64, 16)
	probs := make([]float64, 16)
	for i := range probs {
		probs[i] = 1.0 / 16
	}
	for range 3000 {
		v := src.Uint64()
		for s := 0; s < 64; s += 4 {
			obs[(v>>s)&15]++
		}
	}
	ldptest.CheckChiSquare(t, "CryptoSource nibbles", obs, probs, alpha)
}

func TestUintnPanicsOnZero(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Uintn(0) did not panic")
		}
	}()
	ldp.Uintn(ldptest.Seeded(1), 0)
}

// TestBits64Frequency checks every bit position's rate (z-tests with a
// Bonferroni split of alpha over 64 positions) and the independence of
// neighbouring positions (chi-square on the 4 joint cells of bits 0 and 1,
// and of bits 31 and 32, 3 degrees of freedom each).
func TestBits64Frequency(t *testing.T) {
	const words = 100_000
	for _, p := range []float64{0.5, 0.3, 1 / (math.E*math.E + 1), 1e-2, 0.75 * 0x1p-9, 0.9} {
		src := ldptest.Seeded(uint64(p*1e6) + 1)
		var perBit [64]int64
		pairs := [2][4]int64{}
		for range words {
			v := ldp.Bits64(src, p)
			for i := range 64 {
				perBit[i] += int64(v >> i & 1)
			}
			pairs[0][v&3]++
			pairs[1][v>>31&3]++
		}
		zc := ldptest.ZCritical(alpha / 64)
		for i, c := range perBit {
			if z := (float64(c) - words*p) / math.Sqrt(words*p*(1-p)); math.Abs(z) > zc {
				t.Errorf("Bits64(%g) bit %d: %d of %d, z = %.2f", p, i, c, words, z)
			}
		}
		joint := []float64{(1 - p) * (1 - p), p * (1 - p), (1 - p) * p, p * p}
		ldptest.CheckChiSquare(t, "Bits64 bits 0,1", pairs[0][:], joint, alpha)
		ldptest.CheckChiSquare(t, "Bits64 bits 31,32", pairs[1][:], joint, alpha)
	}
	src := ldptest.Seeded(1)
	if ldp.Bits64(src, 0) != 0 || ldp.Bits64(src, 1) != ^uint64(0) || ldp.Bits64(src, -2) != 0 {
		t.Error("Bits64(0 or 1) is not deterministic")
	}
}

// TestBits64Exact follows the digit comparison by hand: p = 0.75 = 0.11 in
// binary, so U < p iff its first digit is 0, or its first is 1 and its
// second 0; p = 0.375 = 0.011 adds a leading zero digit.
func TestBits64Exact(t *testing.T) {
	r1, r2 := uint64(0b1100), uint64(0b1010)
	want := ^r1 | (r1 &^ r2) // ...0111 with bit 2 set: r1 bit 2 = 1, r2 bit 2 = 0
	s := &script{words: []uint64{r1, r2, ^uint64(0), ^uint64(0)}}
	if got := ldp.Bits64(s, 0.75); got != want {
		t.Errorf("Bits64(0.75) = %b, want %b", got, want)
	}
	// p = 0.375: digit 1 is 0 (U_i with digit 1 set are above), then 1, 1.
	r0 := ^uint64(15) // positions 4.. are above p
	s = &script{words: []uint64{r0, r1, r2, ^uint64(0)}}
	if got := ldp.Bits64(s, 0.375); got != want&^r0 {
		t.Errorf("Bits64(0.375) = %b, want %b", got, want&^r0)
	}
}
