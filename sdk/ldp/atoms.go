package ldp

import (
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/sdk"
)

// SetBuckets reads the inputs of a declared set of a categorical
// randomizer with buckets buckets (sdk.AtomMapper's inputs: bucket
// indices): want of them (2 for a pair, 3 for a triple), whole, in
// [0, buckets) and distinct. Errors wrap sdk.ErrBadInput.
func SetBuckets(inputs []float64, want, buckets int) ([]int, error) {
	if len(inputs) != want {
		return nil, fmt.Errorf("%w: %d inputs for a declared set of %d", sdk.ErrBadInput, len(inputs), want)
	}
	out := make([]int, want)
	for i, x := range inputs {
		if x != math.Trunc(x) || x < 0 || x >= float64(buckets) {
			return nil, fmt.Errorf("%w: input %d of the set is %v, not a bucket index in [0, %d)", sdk.ErrBadInput, i, x, buckets)
		}
		out[i] = int(x)
		for j := range i {
			if out[j] == out[i] {
				return nil, fmt.Errorf("%w: inputs %d and %d of the set are both bucket %d", sdk.ErrBadInput, j, i, out[i])
			}
		}
	}
	return out, nil
}

// TripleX3IsXPrime reads the inputs of a triple whose x3 is x' (the only
// triples over two buckets): x and x' distinct buckets in [0, buckets),
// and x3 equal to x'. Errors wrap sdk.ErrBadInput.
func TripleX3IsXPrime(inputs []float64, buckets int) ([]int, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("%w: %d inputs for a declared triple", sdk.ErrBadInput, len(inputs))
	}
	xs, err := SetBuckets(inputs[:2], 2, buckets)
	if err != nil {
		return nil, err
	}
	if inputs[2] != inputs[1] {
		return nil, fmt.Errorf("%w: the triple over %d buckets has x3 = x', not inputs %v", sdk.ErrBadInput, buckets, inputs)
	}
	return append(xs, xs[1]), nil
}

// RRAtoms maps the outputs ys (bucket indices) of k-ary randomized
// response to the atoms of RRDeclaration's atoms form: set 0 is its pair
// at inputs (x, x'), whose atoms are y = x, y = x' and the other outputs;
// set 1 its triple at (x, x', x3), whose atoms are y = x, y = x', y = x3
// and the others (with k = 2, x3 is x': y = x, then y = x'). Errors wrap
// sdk.ErrBadInput.
func RRAtoms(k, set int, inputs []float64, ys []int) ([]int, error) {
	var xs []int
	var err error
	switch {
	case set == 0:
		xs, err = SetBuckets(inputs, 2, k)
	case set == 1 && k == 2:
		if xs, err = TripleX3IsXPrime(inputs, k); err == nil {
			xs = xs[:2] // y = x, then y = x'
		}
	case set == 1:
		xs, err = SetBuckets(inputs, 3, k)
	default:
		err = fmt.Errorf("%w: randomized response declares 2 sets, not set %d", sdk.ErrBadInput, set)
	}
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ys))
	for i, y := range ys {
		out[i] = len(xs) // the others
		for j, x := range xs {
			if y == x {
				out[i] = j
				break
			}
		}
	}
	return out, nil
}

// DecodeAll decodes each report with decode (errors name the report).
func DecodeAll(reports [][]byte, decode func([]byte) (int, error)) ([]int, error) {
	out := make([]int, len(reports))
	for i, rep := range reports {
		y, err := decode(rep)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		out[i] = y
	}
	return out, nil
}
