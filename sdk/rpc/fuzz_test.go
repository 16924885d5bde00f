package rpc

import (
	"bytes"
	"testing"

	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
)

// FuzzUnpackReports checks that any packed batch either fails or splits
// into reports that concatenate back to the data with the given lengths
// (or common size), and that packing the reports again gives the same
// reports.
func FuzzUnpackReports(f *testing.F) {
	f.Add([]byte("abcdef"), []byte{1, 2, 3}, uint32(0), uint32(0))
	f.Add([]byte(""), []byte{0, 0}, uint32(0), uint32(0))
	f.Add([]byte("ab"), []byte{3}, uint32(0), uint32(0))
	f.Add([]byte("abc"), []byte{1}, uint32(0), uint32(0))
	f.Add([]byte{}, []byte{255, 255, 255, 255}, uint32(0), uint32(0))
	f.Add([]byte("abcdef"), []byte{}, uint32(2), uint32(3))
	f.Add([]byte("abcdef"), []byte{}, uint32(4), uint32(2))
	f.Add([]byte{}, []byte{}, uint32(0), uint32(1<<31))
	f.Add([]byte("ab"), []byte{}, uint32(1<<31), uint32(1<<31))
	f.Fuzz(func(t *testing.T, data, lens []byte, size, count uint32) {
		// Lengths from pairs of bytes, so that large ones occur.
		var lengths []uint32
		for i := 0; i+1 < len(lens); i += 2 {
			lengths = append(lengths, uint32(lens[i])|uint32(lens[i+1])<<24)
		}
		if len(lens)%2 == 1 {
			lengths = append(lengths, uint32(lens[len(lens)-1]))
		}
		reports, err := unpackReports(&randomizerv1.Reports{Data: data, Lengths: lengths, Size: size, Count: count})
		if err != nil {
			return
		}
		if len(lengths) == 0 {
			for range count {
				lengths = append(lengths, size)
			}
		}
		if len(reports) != len(lengths) {
			t.Fatalf("%d reports for %d lengths", len(reports), len(lengths))
		}
		for i, r := range reports {
			if len(r) != int(lengths[i]) || cap(r) != len(r) {
				t.Fatalf("report %d has len %d cap %d, want %d", i, len(r), cap(r), lengths[i])
			}
		}
		if !bytes.Equal(bytes.Join(reports, nil), data) {
			t.Fatal("reports do not concatenate to the data")
		}
		p, err := packReports(reports)
		if err != nil || !bytes.Equal(p.Data, data) {
			t.Fatalf("repacking gave %v, %v", p, err)
		}
		again, err := unpackReports(p)
		if err != nil || len(again) != len(reports) {
			t.Fatalf("unpacking the repacked batch: %d reports, %v", len(again), err)
		}
	})
}

// FuzzDecodeInputs checks that any dictionary-encoded batch either fails
// or decodes to inputs that encode back to the same categories, and that
// packedInputs (the form sdk.PackedRandomizer takes) accepts exactly the same
// batches with the same categories.
func FuzzDecodeInputs(f *testing.F) {
	f.Add([]byte("a\x00b\x00\xff"), []byte{0, 1, 2, 1})
	f.Add([]byte(""), []byte{0})
	f.Add([]byte("x"), []byte{1})
	f.Add([]byte("a\x00b"), []byte{1, 0, 255})
	f.Fuzz(func(t *testing.T, labels, idx []byte) {
		p := &randomizerv1.Inputs{Labels: bytes.Split(labels, []byte{0})}
		for _, b := range idx {
			p.Categories = append(p.Categories, uint32(b))
		}
		in, err := decodeInputs(p)
		packed, perr := packedInputs(p)
		if (err == nil) != (perr == nil) {
			t.Fatalf("decodeInputs error %v, packedInputs error %v", err, perr)
		}
		if err != nil {
			return
		}
		if packed.Len() != len(in.Categories) {
			t.Fatalf("%d packed inputs for %d categories", packed.Len(), len(in.Categories))
		}
		for i, j := range packed.Index {
			if packed.Labels[j] != in.Categories[i] {
				t.Fatalf("packed input %d = %q, want %q", i, packed.Labels[j], in.Categories[i])
			}
		}
		if len(in.Categories) != len(idx) {
			t.Fatalf("%d categories for %d indices", len(in.Categories), len(idx))
		}
		for i, j := range p.Categories {
			if in.Categories[i] != string(p.Labels[j]) {
				t.Fatalf("input %d = %q, want label %d %q", i, in.Categories[i], j, p.Labels[j])
			}
		}
		back, err := decodeInputs(encodeInputs(in))
		if err != nil {
			t.Fatal(err)
		}
		for i := range in.Categories {
			if back.Categories[i] != in.Categories[i] {
				t.Fatalf("round trip changed input %d", i)
			}
		}
	})
}
