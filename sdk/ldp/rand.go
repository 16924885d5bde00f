package ldp

import (
	cryptorand "crypto/rand"
	"encoding/binary"
	"math"
	"math/bits"
)

// Source is a source of uniformly distributed 64-bit values. The sources of
// math/rand/v2 (*rand.ChaCha8, *rand.PCG) implement it; seed one to make a
// test reproducible. The default everywhere is a CryptoSource.
type Source interface {
	// Uint64 returns 64 uniformly random bits.
	Uint64() uint64
}

// cryptoBlock is the number of bytes a CryptoSource reads from crypto/rand
// at a time.
const cryptoBlock = 4096

// CryptoSource is a Source that reads the operating system's cryptographic
// random number generator (crypto/rand) in blocks and erases each word once
// used. It is not safe for concurrent use; make one per goroutine or per
// batch, which is cheap.
type CryptoSource struct {
	buf [cryptoBlock]byte
	off int
}

// NewCryptoSource returns a CryptoSource.
func NewCryptoSource() *CryptoSource {
	return &CryptoSource{off: cryptoBlock}
}

// Uint64 implements Source.
func (s *CryptoSource) Uint64() uint64 {
	if s.off+8 > cryptoBlock {
		// Since Go 1.24 crypto/rand.Read never returns an error: it crashes
		// the program irrecoverably if the operating system fails it.
		_, _ = cryptorand.Read(s.buf[:])
		s.off = 0
	}
	w := s.buf[s.off : s.off+8]
	v := binary.LittleEndian.Uint64(w)
	clear(w)
	s.off += 8
	return v
}

// DefaultSource returns src, or a new CryptoSource when src is nil: the
// source of one batch of a randomizer whose options leave the randomness
// unset (crypto-backed) or inject a source for tests.
func DefaultSource(src Source) Source {
	if src != nil {
		return src
	}
	return NewCryptoSource()
}

// Uintn returns a uniform integer in [0, n) by rejection sampling: it draws
// the ceil(log2 n) low bits of a word and retries when they are >= n (fewer
// than two words on average). It panics if n is 0.
func Uintn(src Source, n uint64) uint64 {
	if n == 0 {
		panic("ldp: Uintn with n = 0")
	}
	if n&(n-1) == 0 {
		return src.Uint64() & (n - 1)
	}
	mask := ^uint64(0) >> bits.LeadingZeros64(n-1)
	for {
		if v := src.Uint64() & mask; v < n {
			return v
		}
	}
}

// Intn returns a uniform integer in [0, n). It panics if n <= 0.
func Intn(src Source, n int) int {
	if n <= 0 {
		panic("ldp: Intn with n <= 0")
	}
	return int(Uintn(src, uint64(n)))
}

// Float64 returns a uniform float64 in [0, 1) on the grid of multiples of
// 2^-53 (the top 53 bits of one word).
func Float64(src Source) float64 {
	return float64(src.Uint64()>>11) * 0x1p-53
}

// Bernoulli returns true with probability exactly p (the float64 value
// given), for every p in [0, 1]: write p = f·2^e with f in [1/2, 1) (a
// 53-bit significand) and e <= 0; the draw is true when -e fresh uniform bits
// are all zero (probability 2^e, exact) and, independently, a uniform 53-bit
// integer is below f·2^53 (an integer, so probability f, exact). Small p are
// therefore as exact as large ones; a probability close to 1 is not (1 - p
// loses precision when p is formed), which is why randomizers draw the rarer
// of two complementary events with Choose. It panics if p is NaN.
func Bernoulli(src Source, p float64) bool {
	switch {
	case math.IsNaN(p):
		panic("ldp: Bernoulli probability is NaN")
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	frac, exp := math.Frexp(p)
	threshold := uint64(frac * (1 << 53)) // exact: frac has 53 significant bits
	s := -exp                             // bits that must be zero, >= 0
	u := src.Uint64()
	for s > 11 {
		take := min(s, 64)
		if u>>(64-take) != 0 {
			return false
		}
		s -= take
		u = src.Uint64()
	}
	// The top s <= 11 bits and the low 53 bits of u are disjoint.
	if s > 0 && u>>(64-s) != 0 {
		return false
	}
	return u&(1<<53-1) < threshold
}

// Choose returns true with probability pTrue, where pTrue and pFalse are the
// probabilities of complementary events, each computed in closed form. It
// draws the rarer event with Bernoulli, so that its probability is exact
// however small. It panics if they do not sum to 1 within 1e-12.
func Choose(src Source, pTrue, pFalse float64) bool {
	if !(math.Abs(pTrue+pFalse-1) <= 1e-12) {
		panic("ldp: Choose probabilities do not sum to 1")
	}
	if pTrue <= pFalse {
		return Bernoulli(src, pTrue)
	}
	return !Bernoulli(src, pFalse)
}

// Bits64 returns 64 independent bits, each 1 with probability exactly p (the
// float64 value given), using about log2(64) + 2 words on average instead of
// one per bit. Bit i is 1 when a uniform real U_i in [0, 1) is below p; the
// binary digits of all 64 U_i are drawn together, one word per digit
// position, and compared with the digits of p from the most significant on.
// A U_i is decided at its first digit that differs from p's (below p when its
// digit is 0 and p's is 1); the loop stops when all 64 are decided, and U_i
// equal to p in every digit of p is not below it. p = f·2^e (f in [1/2, 1),
// 53 significant bits) has -e leading zero digits, then the 53 bits of f.
func Bits64(src Source, p float64) uint64 {
	switch {
	case math.IsNaN(p):
		panic("ldp: Bits64 probability is NaN")
	case p <= 0:
		return 0
	case p >= 1:
		return ^uint64(0)
	}
	frac, exp := math.Frexp(p)
	m := uint64(frac * (1 << 53)) // exact
	undecided := ^uint64(0)
	for range -exp {
		undecided &^= src.Uint64() // U digit 1 > p digit 0: U > p
		if undecided == 0 {
			return 0
		}
	}
	var ones uint64
	for k := 52; k >= 0; k-- {
		r := src.Uint64()
		if m>>k&1 == 1 {
			ones |= undecided &^ r // U digit 0 < p digit 1: U < p
			undecided &= r
		} else {
			undecided &^= r
		}
		if undecided == 0 {
			break
		}
	}
	return ones
}
