package accountant_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// fuzzSeeds are the in-code seeds of FuzzDecodeDeclaration; more are in
// testdata/fuzz/FuzzDecodeDeclaration.
var fuzzSeeds = []string{
	`{"eps0": 1, "rows": [[0.5, 0.5], [0.3, 0.7]]}`,
	`{"rows": [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]]}`,
	`{"eps0": 2, "inputs": ["a","b","c"], "outputs": ["u","v","w"], "rows": [{"default": 0.2, "entries": {"u": 0.6}}, {"default": 0.2, "entries": {"v": 0.6}}, {"default": 0.2, "entries": {"2": 0.6}}]}`,
	`{"eps0": 3, "num_outputs": 4, "rows": [{"default": 0.2, "entries": {"0": 0.4}}, {"default": 0.2, "entries": {"1": 0.4}}]}`,
	`{"form": "generic", "eps0": 1.5}`,
	`{"form": "atoms", "eps0": 1, "pairs": [{"label": "x=a,x'=b", "atoms": [{"r": 0.25, "p": 0.5, "q": 0.25}, {"r": 0.25, "p": 0.25, "q": 0.5}, {"r": 0.25, "p": 0.25, "q": 0.25}]}], "triples": [{"atoms": [{"r": 0.4, "p": 0.5, "q": 0.3}, {"r": 0.6, "p": 0.5, "q": 0.7}]}]}`,
	`{"form": "matrix", "eps0": 0, "matrix": {"rows": [[0.9, 0.1], [0.1, 0.9]]}}`,
	`{"eps0": 1, "rows": [[0.5, 0.5], [0.9, 0.1]]}`,
	`{"eps0": 1, "rows": [[0.5, 0.5, 0], [0.5, 0.3, 0.2]]}`,
	`{"rows": [[1], [1]]}`,
	`{"rows": []}`,
	`{"form": "nope"}`,
	`[1, 2]`,
	`{"rows": [[0.5, 0.5], {"default": 0.5}]}`,
	`{"num_outputs": -3, "rows": [{"default": 0.5}]}`,
	`{"eps0": 1e308, "form": "generic"}`,
	`{"eps0": 1, "outputs": ["1", "0"], "num_outputs": 2, "rows": [{"default": 0.4, "entries": {"0": 0.6}}, {"default": 0.6, "entries": {"0": 0.4}}]}`,
	`{"eps0": 2, "outputs": ["1", "a"], "num_outputs": 3, "rows": [{"default": 0.3, "entries": {"1": 0.6, "a": 0.1}}, {"default": 0.3, "entries": {"1": 0.1, "a": 0.6}}]}`,
	`{"eps0": 1, "outputs": ["u", "u"], "num_outputs": 2, "rows": [{"default": 0.4, "entries": {"0": 0.6}}, {"default": 0.6, "entries": {"0": 0.4}}]}`,
	`{"eps0": 2, "outputs": ["2"], "num_outputs": 3, "rows": [{"default": 0.3, "entries": {"2": 0.4}}, {"default": 0.25, "entries": {"0": 0.5}}]}`,
}

// maxFuzzOutputs skips declarations with more outputs: decomposing a sparse
// matrix costs memory proportional to its declared number of outputs (a
// 140-byte input with num_outputs = 2^26 allocates 3.5 GB), which is a
// resource limit to settle in the decoder, not something the fuzzer should
// rediscover on every run.
const maxFuzzOutputs = 1 << 16

// FuzzDecodeDeclaration feeds arbitrary bytes to DecodeDeclaration and
// Decompose: they must never panic, every error must wrap
// ErrInvalidDeclaration, every accepted declaration must decompose into
// valid atom sets, and it must survive a JSON round trip unchanged.
func FuzzDecodeDeclaration(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decl, err := accountant.DecodeDeclaration(data)
		if err != nil {
			if !errors.Is(err, accountant.ErrInvalidDeclaration) {
				t.Fatalf("DecodeDeclaration error %q does not wrap ErrInvalidDeclaration", err)
			}
			return
		}
		if decl == nil {
			t.Fatal("DecodeDeclaration returned nil, nil")
		}
		if decl.Matrix != nil && decl.Matrix.NumOutputs() > maxFuzzOutputs {
			t.Skipf("%d outputs", decl.Matrix.NumOutputs())
		}
		d, err := accountant.Decompose(decl)
		if err != nil {
			if !errors.Is(err, accountant.ErrInvalidDeclaration) {
				t.Fatalf("Decompose error %q does not wrap ErrInvalidDeclaration", err)
			}
			return
		}
		checkDecomposition(t, d)

		// Round trip.
		enc, err := json.Marshal(decl)
		if err != nil {
			t.Fatalf("Marshal of a valid declaration: %v", err)
		}
		decl2, err := accountant.DecodeDeclaration(enc)
		if err != nil {
			t.Fatalf("decoding the re-encoded declaration %s: %v", enc, err)
		}
		if m, m2 := decl.Matrix, decl2.Matrix; m != nil {
			if m2 == nil || m.NumInputs() != m2.NumInputs() || m.NumOutputs() != m2.NumOutputs() {
				t.Fatalf("JSON round trip changed the matrix shape:\ninput   %s\nencoded %s", data, enc)
			}
			if m.NumInputs()*m.NumOutputs() <= 1<<16 {
				for x := range m.NumInputs() {
					for y := range m.NumOutputs() {
						if m.At(x, y) != m2.At(x, y) {
							t.Fatalf("JSON round trip changed R[%d][%d] from %v to %v:\ninput   %s\nencoded %s", x, y, m.At(x, y), m2.At(x, y), data, enc)
						}
					}
				}
			}
		}
		d2, err := accountant.Decompose(decl2)
		if err != nil {
			t.Fatalf("re-encoded declaration %s no longer decomposes: %v", enc, err)
		}
		if !sameSets(d.Upper, d2.Upper) || !sameSets(d.Lower, d2.Lower) || d.LocalEps != d2.LocalEps {
			t.Fatalf("JSON round trip changed the decomposition:\ninput   %s\nencoded %s\nbefore  %+v\nafter   %+v", data, enc, d, d2)
		}
	})
}

// checkDecomposition checks the invariants of a valid decomposition
// (docs/accounting.md §2-§4).
func checkDecomposition(t *testing.T, d *accountant.Decomposition) {
	t.Helper()
	// sumTol is docs/accounting.md §2's row-sum tolerance (1e-12) plus the rounding of
	// summing and merging up to a few thousand atoms.
	const sumTol = 1e-9
	if !(d.LocalEps > 0 && d.LocalEps <= accountant.MaxEps0) {
		t.Fatalf("LocalEps = %v, outside (0, MaxEps0 = %v]", d.LocalEps, accountant.MaxEps0)
	}
	if len(d.Upper) == 0 {
		t.Fatal("no upper set")
	}
	check := func(what string, s accountant.AtomSet, lower bool) {
		var r, p, q float64
		for _, a := range s {
			for _, v := range []float64{a.R, a.P, a.Q} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("%s: atom %+v", what, a)
				}
			}
			r += a.R
			p += a.P
			q += a.Q
		}
		if math.Abs(p-1) > sumTol || math.Abs(q-1) > sumTol || r > 1+sumTol || (lower && math.Abs(r-1) > sumTol) {
			t.Fatalf("%s: sums r=%v p=%v q=%v", what, r, p, q)
		}
	}
	for _, s := range d.Upper {
		check("upper", s, false)
	}
	for _, s := range d.Lower {
		check("lower", s, true)
	}
}

func sameSets(a, b []accountant.AtomSet) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}
