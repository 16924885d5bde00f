package ldp_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

func TestBitmapEncoding(t *testing.T) {
	// Element i is bit i%8 of byte i/8: 0 -> byte 0 bit 0, 9 -> byte 1
	// bit 1, 12 -> byte 1 bit 4.
	if got, want := ldp.EncodeBitmap([]int{12, 0, 9, 9}, 13), []byte{0x01, 0x12}; !slices.Equal(got, want) {
		t.Errorf("EncodeBitmap = %x, want %x", got, want)
	}
	for _, tt := range []struct{ k, w int }{{1, 1}, {7, 1}, {8, 1}, {9, 2}, {16, 2}, {100, 13}, {1 << 16, 1 << 13}} {
		if w := ldp.BitmapBytes(tt.k); w != tt.w {
			t.Errorf("BitmapBytes(%d) = %d, want %d", tt.k, w, tt.w)
		}
	}
	src := ldptest.Seeded(7)
	for _, k := range []int{1, 7, 8, 9, 64, 100, 1000} {
		for range 50 {
			var members []int
			for i := range k {
				if ldp.Intn(src, 3) == 0 {
					members = append(members, i)
				}
			}
			rep := ldp.EncodeBitmap(members, k)
			got, err := ldp.DecodeBitmap(rep, k, len(members))
			if err != nil || !slices.Equal(got, members) {
				t.Fatalf("k=%d: DecodeBitmap(EncodeBitmap(%v)) = %v, %v", k, members, got, err)
			}
			for _, i := range members {
				if !ldp.HasBit(rep, i) {
					t.Fatalf("k=%d: HasBit(%d) false", k, i)
				}
			}
			if err := ldp.CheckBitmap(rep, k, -1); err != nil {
				t.Fatalf("k=%d: CheckBitmap without a size: %v", k, err)
			}
		}
	}
}

func TestCheckBitmapRejects(t *testing.T) {
	tests := []struct {
		name    string
		report  []byte
		k, size int
		want    string // in the error
	}{
		{"nil", nil, 13, -1, "0 bytes, want 2"},
		{"short", []byte{1}, 13, -1, "1 bytes, want 2"},
		{"long", []byte{1, 0, 0}, 13, -1, "3 bytes, want 2"},
		{"bit 13 of 13", []byte{0, 0x20}, 13, -1, "beyond the 13"},
		{"bit 15 of 13", []byte{0, 0x80}, 13, -1, "beyond the 13"},
		{"bit 1 of 1", []byte{2}, 1, -1, "beyond the 1"},
		{"too many", []byte{0x07, 0}, 13, 2, "3 bits set, want 2"},
		{"too few", []byte{0, 0}, 16, 1, "0 bits set, want 1"},
	}
	for _, tt := range tests {
		err := ldp.CheckBitmap(tt.report, tt.k, tt.size)
		if !errors.Is(err, sdk.ErrBadReport) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: CheckBitmap error = %v, want ErrBadReport saying %q", tt.name, err, tt.want)
		}
		if _, err := ldp.DecodeBitmap(tt.report, tt.k, tt.size); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("%s: DecodeBitmap error = %v, want ErrBadReport", tt.name, err)
		}
		if _, err := ldp.ColexRank(tt.report, tt.k, tt.size); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("%s: ColexRank error = %v, want ErrBadReport", tt.name, err)
		}
	}
	for _, ok := range []struct {
		report  []byte
		k, size int
	}{{[]byte{0xff, 0x1f}, 13, 13}, {[]byte{0xff, 0xff}, 16, 16}, {[]byte{0, 0}, 16, 0}, {[]byte{1}, 1, -1}} {
		if err := ldp.CheckBitmap(ok.report, ok.k, ok.size); err != nil {
			t.Errorf("CheckBitmap(%x, %d, %d) = %v", ok.report, ok.k, ok.size, err)
		}
	}
}

// TestBinomial compares Binomial with math/big's exact coefficient for
// every n <= 70 (C(66, 33) is the largest central coefficient that fits an
// int64, C(67, 33) the first that does not) and a few large n.
func TestBinomial(t *testing.T) {
	check := func(n, r int) {
		want := new(big.Int).Binomial(int64(n), int64(r))
		if r < 0 || r > n {
			want.SetInt64(0)
		}
		got, ok := ldp.Binomial(n, r)
		if fits := want.IsInt64(); ok != fits || fits && int64(got) != want.Int64() {
			t.Errorf("Binomial(%d, %d) = %d, %v; want %v (fits: %v)", n, r, got, ok, want, fits)
		}
	}
	for n := range 71 {
		for r := -1; r <= n+1; r++ {
			check(n, r)
		}
	}
	for _, n := range []int{100, 1000, 1 << 20, math.MaxInt32} {
		for _, r := range []int{1, 2, 3, 5, 8, n - 2} {
			check(n, r)
		}
	}
	for _, n := range []int{100, 1000} {
		check(n, n/2) // far too large: Binomial stops at the first overflow
	}
}

// TestColexRankExact checks ColexRank against an independent definition,
// for every subset of [0, k), k <= 10: colex order compares two subsets by
// the largest element in which they differ, which for bitmasks is their
// numeric order, so the rank of a mask is the number of masks of the same
// popcount below it. It also checks that ColexSubset inverts it and that
// the rank does not depend on k (the same subset in a longer bitmap).
func TestColexRankExact(t *testing.T) {
	for k := 1; k <= 10; k++ {
		below := make([]int, k+1) // masks of each popcount seen so far
		for mask := range 1 << k {
			s := bits.OnesCount(uint(mask))
			want := below[s]
			below[s]++
			var members []int
			for i := range k {
				if mask>>i&1 == 1 {
					members = append(members, i)
				}
			}
			rep := ldp.EncodeBitmap(members, k)
			got, err := ldp.ColexRank(rep, k, s)
			if err != nil || got != want {
				t.Fatalf("k=%d: ColexRank(%v) = %d, %v; want %d", k, members, got, err, want)
			}
			if wide, err := ldp.ColexRank(ldp.EncodeBitmap(members, k+9), k+9, -1); err != nil || wide != want {
				t.Fatalf("k=%d: ColexRank(%v) in %d bits = %d, %v; want %d", k, members, k+9, wide, err, want)
			}
			back := make([]byte, ldp.BitmapBytes(k))
			ldp.ColexSubset(back, want, k, s)
			if !slices.Equal(back, rep) {
				t.Fatalf("k=%d: ColexSubset(%d, s=%d) = %x, want %x", k, want, s, back, rep)
			}
		}
		for s, n := range below {
			if c, _ := ldp.Binomial(k, s); n != c {
				t.Fatalf("k=%d: %d subsets of size %d, C(k, s) = %d", k, n, s, c)
			}
		}
	}
	// Large k: the rank of the s largest elements is C(k, s) - 1, and
	// ColexSubset inverts ranks at both ends.
	k, s := 100, 12
	top := make([]int, s)
	for i := range top {
		top[i] = k - s + i
	}
	total, _ := ldp.Binomial(k, s)
	if r, err := ldp.ColexRank(ldp.EncodeBitmap(top, k), k, s); err != nil || r != total-1 {
		t.Errorf("rank of the top %d of %d = %d, %v; want %d", s, k, r, err, total-1)
	}
	for _, rank := range []int{0, 1, total / 3, total - 1} {
		b := make([]byte, ldp.BitmapBytes(k))
		ldp.ColexSubset(b, rank, k, s)
		if r, err := ldp.ColexRank(b, k, s); err != nil || r != rank {
			t.Errorf("ColexRank(ColexSubset(%d)) = %d, %v", rank, r, err)
		}
	}
	// C(128, 64) does not fit an int: an error, but not a bad report.
	half := make([]int, 64)
	for i := range half {
		half[i] = 2 * i
	}
	if _, err := ldp.ColexRank(ldp.EncodeBitmap(half, 128), 128, 64); err == nil || errors.Is(err, sdk.ErrBadReport) {
		t.Errorf("ColexRank of a 64-subset of 128: error = %v, want an overflow that is not ErrBadReport", err)
	}
}

// draws is a Source that returns given words: Intn(n) of a word u < n is
// u (Uintn keeps the low bits of a word under a mask >= n-1, and accepts
// them when below n), so it feeds SampleSubset chosen draws.
type draws struct {
	words []uint64
	i     int
}

func (d *draws) Uint64() uint64 {
	v := d.words[d.i]
	d.i++
	return v
}

// TestSampleSubsetExact enumerates every sequence of draws of Floyd's
// algorithm for small n, s and excluded elements, each sequence as likely
// as any other (draw j is uniform on j+1 values), and checks that every
// allowed s-subset comes out the same number of times, s! (the m!/(m-s)!
// sequences over the C(m, s) subsets), and nothing else comes out.
func TestSampleSubsetExact(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for _, except := range []int{-1, 0, n / 2, n - 1} {
			m := n
			if except >= 0 {
				m--
			}
			for s := 0; s <= m; s++ {
				for _, preset := range []bool{false, true} {
					if preset && except < 0 {
						continue
					}
					name := fmt.Sprintf("n=%d s=%d except=%d preset=%v", n, s, except, preset)
					counts := map[string]int{}
					seqs := 0
					eachSequence(m-s, m, func(words []uint64) {
						b := make([]byte, ldp.BitmapBytes(n))
						if preset {
							ldp.SetBit(b, except)
						}
						src := &draws{words: words}
						ldp.SampleSubset(src, b, n, s, except)
						if src.i != len(words) {
							t.Fatalf("%s: %d draws, want %d", name, src.i, len(words))
						}
						counts[string(b)]++
						seqs++
					})
					want := 1
					for i := 2; i <= s; i++ {
						want *= i
					}
					subsets, _ := ldp.Binomial(m, s)
					if len(counts) != subsets {
						t.Fatalf("%s: %d distinct subsets, want C(%d, %d) = %d", name, len(counts), m, s, subsets)
					}
					for b, c := range counts {
						members := ldp.AppendMembers(nil, []byte(b))
						size := s
						if preset {
							size++
						}
						if c != want || len(members) != size || except >= 0 && preset != slices.Contains(members, except) {
							t.Fatalf("%s: subset %v drawn by %d of %d sequences, want %d, size %d", name, members, c, seqs, want, size)
						}
					}
				}
			}
		}
	}
}

// eachSequence calls f with every sequence of words u_lo, ..., u_(hi-1),
// u_j in [0, j].
func eachSequence(lo, hi int, f func([]uint64)) {
	words := make([]uint64, hi-lo)
	var rec func(i int)
	rec = func(i int) {
		if i == len(words) {
			f(slices.Clone(words))
			return
		}
		for u := range lo + i + 1 {
			words[i] = uint64(u)
			rec(i + 1)
		}
	}
	rec(0)
}

// TestSampleSubsetUniform draws subsets with a seeded source and checks
// their law by Pearson's chi-square at ldptest.Alpha over every allowed
// subset (9 elements: 126 subsets of 4, or the 56 of 3 more beside a set
// element 3), and, for 100 elements, each element's inclusion rate by a
// z-test (Bonferroni over the elements).
func TestSampleSubsetUniform(t *testing.T) {
	src := ldptest.Seeded(11)
	for _, tt := range []struct {
		s, except int
		preset    bool
	}{{4, -1, false}, {4, 3, false}, {3, 3, true}} {
		const n = 9
		name := fmt.Sprintf("n=%d s=%d except=%d preset=%v", n, tt.s, tt.except, tt.preset)
		size := tt.s
		if tt.preset {
			size++
		}
		total, _ := ldp.Binomial(n, size)
		index := map[int]int{} // colex rank -> cell
		for rank := range total {
			b := make([]byte, ldp.BitmapBytes(n))
			ldp.ColexSubset(b, rank, n, size)
			if tt.except < 0 || ldp.HasBit(b, tt.except) == tt.preset {
				index[rank] = len(index)
			}
		}
		obs := make([]int64, len(index))
		for range 200 * len(index) {
			b := make([]byte, ldp.BitmapBytes(n))
			if tt.preset {
				ldp.SetBit(b, tt.except)
			}
			ldp.SampleSubset(src, b, n, tt.s, tt.except)
			rank, err := ldp.ColexRank(b, n, size)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cell, ok := index[rank]
			if !ok {
				t.Fatalf("%s: drew %v, not an allowed subset", name, ldp.AppendMembers(nil, b))
			}
			obs[cell]++
		}
		probs := make([]float64, len(obs))
		for i := range probs {
			probs[i] = 1 / float64(len(probs))
		}
		ldptest.CheckChiSquare(t, name, obs, probs, ldptest.Alpha)
	}

	const n, s, except, draws = 100, 12, 37, 20000
	counts := make([]int64, n)
	for range draws {
		b := make([]byte, ldp.BitmapBytes(n))
		ldp.SampleSubset(src, b, n, s, except)
		for _, i := range ldp.AppendMembers(nil, b) {
			counts[i]++
		}
	}
	if counts[except] != 0 {
		t.Fatalf("the excluded element was drawn %d times", counts[except])
	}
	p := float64(s) / (n - 1)
	sd := math.Sqrt(draws * p * (1 - p))
	z := ldptest.ZCritical(ldptest.Alpha / (n - 1))
	for i, c := range counts {
		if i != except && math.Abs(float64(c)-draws*p) > z*sd {
			t.Errorf("element %d drawn %d times in %d, want %.0f ± %.0f", i, c, draws, draws*p, z*sd)
		}
	}
}

func TestAccumulateBitmaps(t *testing.T) {
	desc := &sdk.Description{Name: "subsets", Digest: "d"}
	reports := [][]byte{
		ldp.EncodeBitmap([]int{0, 9}, 10),
		ldp.EncodeBitmap([]int{9, 3}, 10),
		ldp.EncodeBitmap([]int{1}, 10),    // one bit: malformed at size 2
		{0x01, 0x04},                      // bit 10: malformed
		{0x03},                            // short: malformed
		ldp.EncodeBitmap([]int{1, 2}, 10), // valid
	}
	stat, err := ldp.AccumulateBitmaps(context.Background(), desc, 1, 10, 2, reports)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 1, 1, 1, 0, 0, 0, 0, 0, 2}
	if stat.N != 3 || stat.Malformed != 3 || !slices.Equal(stat.Counts, want) || stat.Plugin != "subsets" || stat.Digest != "d" {
		t.Errorf("statistic %+v, want N 3, Malformed 3, counts %v", stat, want)
	}
	any, _ := ldp.AccumulateBitmaps(context.Background(), desc, 1, 10, -1, reports)
	if any.N != 4 || any.Malformed != 2 {
		t.Errorf("without a size: N %d, Malformed %d; want 4 and 2", any.N, any.Malformed)
	}
	if _, err := ldp.AccumulateBitmaps(context.Background(), desc, math.NaN(), 10, 2, reports); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("eps0 NaN: error = %v", err)
	}
}

func TestSubsetPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"EncodeBitmap member k":   func() { ldp.EncodeBitmap([]int{10}, 10) },
		"EncodeBitmap member -1":  func() { ldp.EncodeBitmap([]int{-1}, 10) },
		"SampleSubset s > m":      func() { ldp.SampleSubset(ldptest.Seeded(1), make([]byte, 2), 10, 10, 3) },
		"SampleSubset short":      func() { ldp.SampleSubset(ldptest.Seeded(1), make([]byte, 1), 10, 2, -1) },
		"ColexSubset rank C(k,s)": func() { ldp.ColexSubset(make([]byte, 1), 10, 5, 2) },
		"BitmapBytes 0":           func() { ldp.BitmapBytes(0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
