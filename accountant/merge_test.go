package accountant

import (
	"math"
	"testing"
)

// TestMergeManyEqualOutputs: a mechanism with hundreds of outputs of one
// likelihood-ratio pair, each computed with its own rounding (here the
// outputs' masses w_i times fixed r, p, q), merges to one atom per pair,
// whatever the order the outputs come in. Merge compares each ratio with
// its group's first, never with the running sum's, whose ratio moves by
// an ulp or so per addition and once split such groups (k-subset with
// k = 14, s = 4).
func TestMergeManyEqualOutputs(t *testing.T) {
	const n = 1000
	var s AtomSet
	for i := range n {
		w := 1 / (3 + float64(i)*0.7193)
		s = append(s, Atom{R: w * 0.1, P: w * 0.7, Q: w * 0.1})
		s = append(s, Atom{R: w * 0.1, P: w * 0.1, Q: w * 0.7})
		s = append(s, Atom{R: w * 0.3, P: w * 0.3, Q: w * 0.3})
	}
	for _, order := range []string{"interleaved", "reversed", "shuffled"} {
		in := make(AtomSet, len(s))
		switch order {
		case "interleaved":
			copy(in, s)
		case "reversed":
			for i := range s {
				in[i] = s[len(s)-1-i]
			}
		case "shuffled":
			for i := range s {
				in[i] = s[(i*7919)%len(s)]
			}
		}
		m := in.Merge()
		if len(m) != 3 {
			t.Errorf("%s: %d atoms after merging, want 3: %v", order, len(m), m)
			continue
		}
		for _, a := range m {
			if pr, qr := a.P/a.R, a.Q/a.R; math.Abs(pr*qr-7) > 1e-12 && math.Abs(pr-1) > 1e-12 {
				t.Errorf("%s: merged atom %v has ratios (%g, %g), want (7, 1), (1, 7) or (1, 1)", order, a, pr, qr)
			}
		}
	}
}

// TestMergeKeepsDistinctRatios: ratios 8 ulps apart, beyond ratioTol, stay
// apart, and an atom with R = 0 but mass under an input is kept (last) for
// validation to report.
func TestMergeKeepsDistinctRatios(t *testing.T) {
	const u = 0x1p-52
	s := AtomSet{
		{R: 0.25, P: 0.25, Q: 0.25},
		{R: 0, P: 0.1, Q: 0.1},
		{R: 0.25, P: 0.25 * (1 + 8*u), Q: 0.25},
		{R: 0, P: 0, Q: 0},
		{R: 0.25, P: 0.25 * (1 + 2*u), Q: 0.25},
	}
	m := s.Merge()
	if len(m) != 3 {
		t.Fatalf("got %d atoms, want 3 (two groups and the R = 0 atom): %v", len(m), m)
	}
	if m[0].R != 0.5 || m[1].R != 0.25 || m[2].R != 0 || m[2].P != 0.1 {
		t.Errorf("got %v, want the 1 and 1+2u atoms merged first, then 1+8u, then the R = 0 atom", m)
	}
}
