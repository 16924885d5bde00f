package ldp

import (
	"math"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// RRDeclaration returns the declaration of k-ary randomized response at
// eps0 (report the input with probability e^eps0/(e^eps0+k-1), else each
// other value with probability c = 1/(e^eps0+k-1)) in the given form; both
// forms decompose identically. labels name the inputs and outputs in
// accountant errors (optional). eps0 must already be checked.
//
// Matrix: R[x][x] = e^eps0 c, R[x][y] = c, stored sparsely (one entry per
// row, so any k is cheap). Atoms (docs/accounting.md §3 and §4; every
// pair of values is alike): for (x, x'), y = x gives (c, e^eps0 c, c),
// y = x' gives (c, c, e^eps0 c), the other k-2 outputs merge into
// ((k-2)c, (k-2)c, (k-2)c). The lower-bound triple (x, x', x3) adds y = x3
// with (e^eps0 c, c, c) and merges the remaining k-3; with k = 2 the only
// triple is x3 = x', giving (c, e^eps0 c, c) and (e^eps0 c, c, e^eps0 c).
func RRDeclaration(k int, eps0 float64, form declare.Form, labels []string) (*declare.Declaration, error) {
	e := math.Exp(eps0)
	kf := float64(k)
	keep, c := e/(e+kf-1), 1/(e+kf-1)
	d := &declare.Declaration{Eps0: eps0, Form: form}
	switch form {
	case declare.FormMatrix:
		rows := make([]declare.SparseRow, k)
		for x := range rows {
			rows[x] = declare.SparseRow{Default: c, Entries: map[int]float64{x: keep}}
		}
		m, err := declare.NewSparseMatrix(k, rows)
		if err != nil {
			return nil, err
		}
		m.InputLabels, m.OutputLabels = labels, labels
		d.Matrix = m
	case declare.FormAtoms:
		pair := []declare.Atom{{R: c, P: keep, Q: c}, {R: c, P: c, Q: keep}}
		if k > 2 {
			pair = append(pair, declare.Atom{R: (kf - 2) * c, P: (kf - 2) * c, Q: (kf - 2) * c})
		}
		var triple []declare.Atom
		if k == 2 {
			triple = []declare.Atom{{R: c, P: keep, Q: c}, {R: keep, P: c, Q: keep}}
		} else {
			triple = []declare.Atom{{R: c, P: keep, Q: c}, {R: c, P: c, Q: keep}, {R: keep, P: c, Q: c}}
			if k > 3 {
				triple = append(triple, declare.Atom{R: (kf - 3) * c, P: (kf - 3) * c, Q: (kf - 3) * c})
			}
		}
		d.Pairs = []declare.DeclaredSet{{Label: "any two values", Atoms: pair}}
		d.Triples = []declare.DeclaredSet{{Label: "any three values", Atoms: triple}}
	default:
		return nil, UnsupportedForm("randomized response", form)
	}
	return d, nil
}
