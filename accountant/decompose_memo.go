package accountant

// The memo of matrix decompositions.
//
// decomposeMatrix is a pure function of the matrix's entries (each row's
// default, explicit columns and values, and the number of outputs) and
// eps0: labels enter only its error messages, its parallel pair search
// keeps the sets in the order of a sequential one
// (TestReview53DecomposeMatrixParallel), and nothing in it depends on the
// order of a range over a map (TestNoMapOrderInAccountant; the order of
// the overlapping pairs did until review 63). A calibration decomposes at every budget it
// probes, and the searches behind one command probe the same budget again
// (calibrate --mech hadamard:k=64 --rounds 365 decomposed 419 times at 296
// distinct budgets; each decomposition of that 64-input matrix is 4,032
// pair sets, about 5 ms). So a successful decomposition is kept under a key
// holding every one of those inputs' bits in full (no hash, so no
// collision) and handed out again as a copy: callers own what they get, and
// no caller can change what the memo holds. Errors are not kept (their
// messages name labels the key leaves out).
//
// Memory is bounded: at most decompMemoBytes of keys and decompositions
// together (a dense 64 x 128 matrix is 128 KB of key; a sparse 120 x 240
// one has a 5.8 KB key but a 2 MB decomposition, so counting keys alone,
// as the first version did, let a server keep gigabytes: review 63),
// dropped all at once when full, and ForgetMemo drops them too.

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
)

// decompMemoBytes bounds the bytes the memo holds (keys and
// decompositions, as entryBytes counts them).
const decompMemoBytes = 64 << 20

var decomps struct {
	sync.Mutex
	m     map[string]*Decomposition
	bytes int
}

// decomposeMatrixMemo is decomposeMatrix, remembered (see above).
func decomposeMatrixMemo(mat *Matrix, eps0 float64) (*Decomposition, error) {
	key := matrixKey(mat, eps0)
	decomps.Lock()
	d, ok := decomps.m[string(key)]
	decomps.Unlock()
	if ok {
		return d.clone(), nil
	}
	d, err := decomposeMatrix(mat, eps0)
	if err != nil {
		return nil, err
	}
	if size := entryBytes(key, d); size <= decompMemoBytes {
		decomps.Lock()
		if decomps.m == nil || decomps.bytes+size > decompMemoBytes {
			decomps.m, decomps.bytes = map[string]*Decomposition{}, 0
		}
		if _, ok := decomps.m[string(key)]; !ok {
			decomps.m[string(key)] = d.clone()
			decomps.bytes += size
		}
		decomps.Unlock()
	}
	return d, nil
}

// entryBytes is what the memo counts for the entry of d under key: the
// key, the struct, a slice header per set and 24 bytes per atom.
func entryBytes(key []byte, d *Decomposition) int {
	n := len(key) + 128
	for _, sets := range d.setLists() {
		n += 24 * len(*sets)
		for _, s := range *sets {
			n += 24 * len(s)
		}
	}
	return n
}

// forgetDecompositions drops every remembered decomposition.
func forgetDecompositions() {
	decomps.Lock()
	defer decomps.Unlock()
	decomps.m, decomps.bytes = nil, 0
}

// matrixKey encodes eps0 and every entry of mat that decomposeMatrix reads,
// each count before the values it counts, so that two keys are equal only
// when the inputs are.
func matrixKey(mat *Matrix, eps0 float64) []byte {
	k := mat.NumInputs()
	key := make([]byte, 0, 24+k*64)
	key = binary.LittleEndian.AppendUint64(key, math.Float64bits(eps0))
	key = binary.LittleEndian.AppendUint64(key, uint64(mat.NumOutputs()))
	key = binary.LittleEndian.AppendUint64(key, uint64(k))
	for x := range k {
		def, idx, val := mat.Row(x)
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(def))
		key = binary.LittleEndian.AppendUint64(key, uint64(len(idx)))
		for i, y := range idx {
			key = binary.LittleEndian.AppendUint64(key, uint64(y))
			key = binary.LittleEndian.AppendUint64(key, math.Float64bits(val[i]))
		}
	}
	return key
}

// setLists returns d's lists of atom sets, every field of d that holds
// memory (the others are numbers and flags).
func (d *Decomposition) setLists() [4]*[]AtomSet {
	return [4]*[]AtomSet{&d.Upper, &d.UpperSame, &d.Lower, &d.LowerSame}
}

// clone returns a copy of d that shares no memory with it.
func (d *Decomposition) clone() *Decomposition {
	c := *d
	for _, sets := range c.setLists() {
		if *sets != nil {
			out := make([]AtomSet, len(*sets))
			for i, s := range *sets {
				out[i] = slices.Clone(s)
			}
			*sets = out
		}
	}
	return &c
}
