package ldp

// Reports that are subsets: a k-bit bitmap encoding, a uniform sampler of
// s-subsets and the colex numbering of subsets, for randomizers whose
// outputs are subsets of their buckets (k-subset randomized response,
// examples/ksubset) or bit vectors (RAPPOR's encoding is the same).
//
// Encoding. A subset Y of [0, k) is a report of BitmapBytes(k) =
// ceil(k/8) bytes; element i is bit i%8 (least significant first) of byte
// i/8, and the 8·ceil(k/8) - k padding bits of the last byte are zero.
// The map from subsets to such byte strings is a bijection, so decoding
// (CheckBitmap, DecodeBitmap) accepts exactly the encodings of subsets of
// [0, k) (of size s, when a size is required) and nothing else.
//
// Sampling (SampleSubset). Floyd's algorithm (Bentley and Floyd, "A sample
// of brilliance", CACM 30(9), 1987) draws a uniform s-subset of [0, m) with
// s uniform integers: for j = m-s, ..., m-1 draw u uniform in [0, j] and add
// u, or j when u is already chosen. Claim: after step j the chosen set S is
// a uniform t-subset of [0, j], t = j - (m-s) + 1. It holds before the
// first step (t = 0). Given S uniform among the (t-1)-subsets of [0, j-1],
// a t-subset T of [0, j] arises (a) when j ∈ T: from S = T \ {j} (prob.
// 1/C(j, t-1)) with u ∈ T (t of the j+1 values: u ∈ S adds j, u = j adds
// j); (b) when j ∉ T: from S = T \ {u} for each of the t values u ∈ T
// (each S has probability 1/C(j, t-1), then u has 1/(j+1)). Either way
// P(T) = t/((j+1) C(j, t-1)) = 1/C(j+1, t), uniform. An excluded element e
// is skipped by running the algorithm on [0, m) = [0, n-1) and mapping i
// to i + [i >= e], a bijection onto [0, n) \ {e}, which maps the uniform
// law on s-subsets to the uniform law on s-subsets of the image. Uniform
// integers come from Intn (rejection sampling), so each draw is exact.
//
// Numbering (ColexRank, ColexSubset). The colex rank of an s-subset
// c_1 < c_2 < ... < c_s of the naturals is sum_j C(c_j, j), with
// C(c, j) = 0 for c < j. It is a bijection from the s-subsets of [0, n)
// onto [0, C(n, s)) for every n > c_s, by induction on s: the s-subsets
// whose largest element is below c number C(c, s), so those with largest
// element c_s take the ranks C(c_s, s) + [0, C(c_s, s-1)), the subset
// without c_s ranked among the (s-1)-subsets of [0, c_s) (induction), and
// C(c_s, s) + C(c_s, s-1) = C(c_s + 1, s) is where the next largest
// element starts. The inverse is greedy: c_s is the largest c with
// C(c, s) <= rank. Binomial computes C(n, r) exactly with the recurrence
// C(n, i+1) = C(n, i)·(n-i)/(i+1), an exact division, through a 128-bit
// product so that no intermediate overflows; it reports a result that
// does not fit an int.

import (
	"context"
	"fmt"
	"math"
	"math/bits"

	"github.com/blanket-dp/blanket/sdk"
)

// BitmapBytes returns the length in bytes of a k-bit bitmap report,
// ceil(k/8). It panics if k < 1.
func BitmapBytes(k int) int {
	if k < 1 {
		panic("ldp: BitmapBytes with k < 1")
	}
	return (k + 7) / 8
}

// SetBit sets bit i of bitmap (bit i%8 of byte i/8).
func SetBit(bitmap []byte, i int) { bitmap[i>>3] |= 1 << (i & 7) }

// HasBit reports whether bit i of bitmap is set.
func HasBit(bitmap []byte, i int) bool { return bitmap[i>>3]>>(i&7)&1 == 1 }

// CheckBitmap returns an error wrapping sdk.ErrBadReport unless report is
// the encoding of a subset of [0, k): exactly BitmapBytes(k) bytes, no bit
// set at k or beyond and, when size >= 0, exactly size bits set (any
// number when size < 0).
func CheckBitmap(report []byte, k, size int) error {
	w := BitmapBytes(k)
	if len(report) != w {
		return fmt.Errorf("%w: %d bytes, want %d (a %d-bit bitmap)", sdk.ErrBadReport, len(report), w, k)
	}
	if tail := k & 7; tail != 0 && report[w-1]>>tail != 0 {
		return fmt.Errorf("%w: bits set beyond the %d of the bitmap", sdk.ErrBadReport, k)
	}
	if size >= 0 {
		n := 0
		for _, b := range report {
			n += bits.OnesCount8(b)
		}
		if n != size {
			return fmt.Errorf("%w: %d bits set, want %d", sdk.ErrBadReport, n, size)
		}
	}
	return nil
}

// EncodeBitmap returns the k-bit bitmap report of the subset members of
// [0, k) (repeated members count once). It panics if a member is outside
// [0, k) (a programmer error).
func EncodeBitmap(members []int, k int) []byte {
	b := make([]byte, BitmapBytes(k))
	for _, i := range members {
		if i < 0 || i >= k {
			panic(fmt.Sprintf("ldp: member %d of a subset of [0, %d)", i, k))
		}
		SetBit(b, i)
	}
	return b
}

// DecodeBitmap returns the members, in increasing order, of the subset of
// [0, k) that report encodes, after CheckBitmap(report, k, size). Errors
// wrap sdk.ErrBadReport.
func DecodeBitmap(report []byte, k, size int) ([]int, error) {
	if err := CheckBitmap(report, k, size); err != nil {
		return nil, err
	}
	return AppendMembers(nil, report), nil
}

// AppendMembers appends the indices of the set bits of bitmap to dst, in
// increasing order, and returns the extended slice.
func AppendMembers(dst []int, bitmap []byte) []int {
	for by, v := range bitmap {
		for v != 0 {
			dst = append(dst, by<<3+bits.TrailingZeros8(v))
			v &= v - 1
		}
	}
	return dst
}

// AccumulateBitmaps is Accumulate for reports that each hold a k-bit
// bitmap of size bits set (any number when size < 0): Counts[i] is the
// number of reports with bit i set, and a report that CheckBitmap rejects
// is malformed.
func AccumulateBitmaps(ctx context.Context, desc *sdk.Description, eps0 float64, k, size int, reports [][]byte) (*sdk.Statistic, error) {
	return Accumulate(ctx, desc, eps0, k, reports, func(counts []int64, rep []byte) bool {
		if CheckBitmap(rep, k, size) != nil {
			return false
		}
		for by, v := range rep {
			for v != 0 {
				counts[by<<3+bits.TrailingZeros8(v)]++
				v &= v - 1
			}
		}
		return true
	})
}

// SampleSubset sets in bitmap the bits of a uniformly random s-subset of
// [0, n) without except (Floyd's algorithm, s draws of Intn; proof at the
// top of this file). A negative except excludes nothing. The bits of
// bitmap in [0, n), except's aside, must be clear on entry: a randomizer
// that puts except in the subset sets its bit first and draws s-1 more.
// It panics if s is negative or larger than the elements available, or
// if bitmap holds fewer than n bits (programmer errors).
func SampleSubset(src Source, bitmap []byte, n, s, except int) {
	m := n
	if except >= 0 && except < n {
		m--
	} else {
		except = n // maps every i in [0, m) to itself
	}
	if s < 0 || s > m || len(bitmap)*8 < n {
		panic(fmt.Sprintf("ldp: SampleSubset of %d of %d elements in a bitmap of %d bits", s, m, len(bitmap)*8))
	}
	at := func(i int) int {
		if i >= except {
			return i + 1
		}
		return i
	}
	for j := m - s; j < m; j++ {
		u := at(Intn(src, j+1)) // never except
		if HasBit(bitmap, u) {
			u = at(j)
		}
		SetBit(bitmap, u)
	}
}

// Binomial returns the binomial coefficient C(n, r), 0 when r < 0 or
// r > n, and whether it fits an int; it is exact whenever it does. It
// panics if n < 0.
func Binomial(n, r int) (int, bool) {
	if n < 0 {
		panic("ldp: Binomial with n < 0")
	}
	if r < 0 || r > n {
		return 0, true
	}
	r = min(r, n-r)
	c := uint64(1)
	for i := range r {
		hi, lo := bits.Mul64(c, uint64(n-i))
		d := uint64(i + 1)
		if hi >= d {
			return 0, false
		}
		c, _ = bits.Div64(hi, lo, d) // exact: C(n, i)·(n-i) = C(n, i+1)·(i+1)
		if c > math.MaxInt {
			return 0, false
		}
	}
	return int(c), true
}

// ColexRank returns the colex rank of the subset of [0, k) that report
// encodes, after CheckBitmap(report, k, size): its index in
// [0, C(k, s)) among the s-subsets of [0, k), s its number of members
// (sum_j C(c_j, j) over its members c_1 < ... < c_s; proof at the top of
// this file). A randomizer whose outputs are the s-subsets numbered so
// (its matrix declaration's columns) implements sdk.OutputMapper with it.
// Errors wrap sdk.ErrBadReport, or say that C(k, s) does not fit an int.
func ColexRank(report []byte, k, size int) (int, error) {
	if err := CheckBitmap(report, k, size); err != nil {
		return 0, err
	}
	s := 0
	for _, b := range report {
		s += bits.OnesCount8(b)
	}
	if _, ok := Binomial(k, s); !ok {
		return 0, fmt.Errorf("ldp: the %d-subsets of %d elements number more than an int holds", s, k)
	}
	// Each term is at most the total, below C(k, s): no overflow.
	rank, j := 0, 0
	for by, v := range report {
		for v != 0 {
			j++
			c, _ := Binomial(by<<3+bits.TrailingZeros8(v), j)
			rank += c
			v &= v - 1
		}
	}
	return rank, nil
}

// ColexSubset sets in bitmap (whose bits must be clear) the members of the
// s-subset of [0, k) of colex rank rank, the inverse of ColexRank. It
// panics unless 0 <= rank < C(k, s) and bitmap holds k bits (programmer
// errors).
func ColexSubset(bitmap []byte, rank, k, s int) {
	total, ok := Binomial(k, s)
	if s < 0 || rank < 0 || ok && rank >= total || len(bitmap)*8 < k {
		panic(fmt.Sprintf("ldp: ColexSubset of rank %d among the %d-subsets of %d elements in %d bits", rank, s, k, len(bitmap)*8))
	}
	c := k - 1
	for j := s; j >= 1; j-- {
		// The largest c with C(c, j) <= rank; C(c, j) decreases with c.
		for {
			b, ok := Binomial(c, j)
			if ok && b <= rank {
				rank -= b
				break
			}
			c--
		}
		SetBit(bitmap, c)
		c--
	}
}
