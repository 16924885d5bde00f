package ldp

import (
	"context"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
)

// IndexWidth returns the length in bytes of the fixed-width encoding of
// indices in [0, n): the fewest bytes that hold n-1, at least 1. It panics if
// n < 1.
func IndexWidth(n int) int {
	if n < 1 {
		panic("ldp: IndexWidth with n < 1")
	}
	w := 1
	for v := uint64(n-1) >> 8; v != 0; v >>= 8 {
		w++
	}
	return w
}

// PutIndex writes v big-endian into all of dst. It panics if v does not fit
// (a programmer error).
func PutIndex(dst []byte, v int) {
	u := uint64(v)
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte(u)
		u >>= 8
	}
	if u != 0 || v < 0 {
		panic(fmt.Sprintf("ldp: index %d does not fit in %d bytes", v, len(dst)))
	}
}

// ReadIndex decodes a report holding an index in [0, n): exactly
// IndexWidth(n) bytes, big-endian. Errors wrap sdk.ErrBadReport.
func ReadIndex(report []byte, n int) (int, error) {
	w := IndexWidth(n)
	if len(report) != w {
		return 0, fmt.Errorf("%w: %d bytes, want %d", sdk.ErrBadReport, len(report), w)
	}
	var v uint64
	for _, b := range report {
		v = v<<8 | uint64(b)
	}
	if v >= uint64(n) {
		return 0, fmt.Errorf("%w: index %d, want < %d", sdk.ErrBadReport, v, n)
	}
	return int(v), nil
}

// EncodeIndices encodes one index per report, each IndexWidth(n) bytes, into
// a single backing array.
func EncodeIndices(idx []int, n int) [][]byte {
	w := IndexWidth(n)
	buf := PackIndices(idx, n)
	out := make([][]byte, len(idx))
	for i := range idx {
		out[i] = buf[i*w : (i+1)*w : (i+1)*w]
	}
	return out
}

// PackIndices encodes one index per report, each IndexWidth(n) bytes, and
// returns the reports concatenated: EncodeIndices in the form of
// sdk.PackedRandomizer.
func PackIndices(idx []int, n int) []byte {
	w := IndexWidth(n)
	buf := make([]byte, w*len(idx))
	for i, v := range idx {
		PutIndex(buf[i*w:(i+1)*w], v)
	}
	return buf
}

// RandomizePackedIndices is sdk.PackedRandomizer.RandomizePacked for a
// categorical randomizer over d whose reports are output indices (of
// outputs outputs) in the index encoding: it checks eps0, maps the inputs
// to their buckets, has randomize replace each bucket by its randomized
// output, and packs the outputs.
func RandomizePackedIndices(ctx context.Context, eps0 float64, d *Domain, plugin string, in sdk.PackedInputs, outputs int,
	randomize func(ctx context.Context, eps0 float64, idx []int) error) ([]byte, error) {
	if err := CheckEps0(eps0); err != nil {
		return nil, err
	}
	idx, err := d.PackedBatch(plugin, in)
	if err != nil {
		return nil, err
	}
	if err := randomize(ctx, eps0, idx); err != nil {
		return nil, err
	}
	return PackIndices(idx, outputs), nil
}
