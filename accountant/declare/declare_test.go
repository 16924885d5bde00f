package declare_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// TestMatrixJSONRoundTrip encodes a sparse matrix declaration and decodes
// it back: every entry, the labels and the rows' exceptions (Row) survive.
func TestMatrixJSONRoundTrip(t *testing.T) {
	m, err := declare.NewSparseMatrix(4, []declare.SparseRow{
		{Default: 0.1, Entries: map[int]float64{0: 0.7}},
		{Default: 0.1, Entries: map[int]float64{3: 0.7}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.OutputLabels = []string{"a", "b", "c", "d"}
	b, err := json.Marshal(&declare.Declaration{Eps0: 2, Form: declare.FormMatrix, Matrix: m})
	if err != nil {
		t.Fatal(err)
	}
	d, err := declare.DecodeDeclaration(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Eps0 != 2 || d.Form != declare.FormMatrix || d.Matrix.NumInputs() != 2 || d.Matrix.NumOutputs() != 4 {
		t.Fatalf("decoded %+v", d)
	}
	for x := range 2 {
		for y := range 4 {
			if got, want := d.Matrix.At(x, y), m.At(x, y); got != want {
				t.Errorf("At(%d, %d) = %v, want %v", x, y, got, want)
			}
		}
	}
	def, outs, probs := d.Matrix.Row(1)
	if def != 0.1 || !slices.Equal(outs, []int{3}) || !slices.Equal(probs, []float64{0.7}) {
		t.Errorf("Row(1) = %v, %v, %v; want 0.1, [3], [0.7]", def, outs, probs)
	}
}

// TestDecodeRejects names the malformed inputs the decoder and the
// constructors refuse, each with an error wrapping ErrInvalid.
func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"not JSON", `{`},
		{"neither form nor rows", `{"eps0": 1}`},
		{"ragged dense rows", `{"rows": [[0.5, 0.5], [1]]}`},
		{"mixed rows", `{"num_outputs": 2, "rows": [[0.5, 0.5], {"default": 0.5}]}`},
		{"unknown output label", `{"outputs": ["a"], "rows": [{"default": 0, "entries": {"b": 1}}]}`},
	} {
		if _, err := declare.DecodeDeclaration([]byte(tc.json)); !errors.Is(err, declare.ErrInvalid) {
			t.Errorf("%s: error %v, want one wrapping ErrInvalid", tc.name, err)
		}
	}
	if _, err := declare.NewSparseMatrix(2, []declare.SparseRow{{Entries: map[int]float64{2: 1}}}); !errors.Is(err, declare.ErrInvalid) {
		t.Errorf("entry outside the outputs: error %v, want one wrapping ErrInvalid", err)
	}
}

// TestNode checks the tree of a longitudinal declaration: a power of two
// up to MaxTree gives the node's declaration with Tree cleared.
func TestNode(t *testing.T) {
	d := &declare.Declaration{Eps0: 1, Form: declare.FormGeneric, Tree: 8, Changes: 2}
	n, err := d.Node()
	if err != nil || n.Tree != 0 || n.Changes != 2 || d.Tree != 8 {
		t.Fatalf("Node() = %+v, %v", n, err)
	}
	for _, tree := range []int{0, 3, -2, 2 * declare.MaxTree} {
		if _, err := (&declare.Declaration{Tree: tree}).Node(); !errors.Is(err, declare.ErrInvalid) {
			t.Errorf("tree %d: error %v, want one wrapping ErrInvalid", tree, err)
		}
	}
}
