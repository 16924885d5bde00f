package declare

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Matrix is a randomizer's full output distribution R[x][y], stored as a
// default value per row plus the entries that differ from it, so that
// structured mechanisms (k-RR with k = 10^4: one entry per row) stay small.
type Matrix struct {
	// InputLabels names the inputs in error messages. Optional.
	InputLabels []string
	// OutputLabels names the outputs in error messages. Optional.
	OutputLabels []string
	outputs      int
	rows         []sparseRow
}

type sparseRow struct {
	def float64
	idx []int // sorted ascending, distinct
	val []float64
}

func (r *sparseRow) at(y int) float64 {
	if i, ok := slices.BinarySearch(r.idx, y); ok {
		return r.val[i]
	}
	return r.def
}

// SparseRow is one row of a sparse matrix: every output has probability
// Default except those listed in Entries.
type SparseRow struct {
	// Default is the probability of every output not in Entries.
	Default float64
	// Entries maps output index to probability.
	Entries map[int]float64
}

// NewMatrix returns the matrix with the given dense rows; every row must have
// the same length.
func NewMatrix(rows [][]float64) (*Matrix, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: matrix has no rows", ErrInvalid)
	}
	m := &Matrix{outputs: len(rows[0])}
	for x, row := range rows {
		if len(row) != m.outputs {
			return nil, fmt.Errorf("%w: matrix row %d has %d entries, row 0 has %d", ErrInvalid, x, len(row), m.outputs)
		}
		m.rows = append(m.rows, denseToSparse(row))
	}
	return m, nil
}

// denseToSparse stores a row as its most frequent value plus exceptions.
func denseToSparse(row []float64) sparseRow {
	var mode float64
	best := -1
	counts := valueCounts{}
	for _, v := range row {
		c := counts.inc(v)
		if c > best || (c == best && v < mode) {
			best, mode = c, v
		}
	}
	r := sparseRow{def: mode}
	for y, v := range row {
		if v != mode || math.IsNaN(v) {
			r.idx = append(r.idx, y)
			r.val = append(r.val, v)
		}
	}
	return r
}

// valueCounts counts float64 values as a map keyed by them would (== on
// keys: -0 and +0 share a count, every NaN has its own), in a short list
// while few distinct values occur (a randomizer's row takes a handful),
// in a map beyond: a map per row was 5% of a Hadamard calibration.
type valueCounts struct {
	vals   []float64
	counts []int
	m      map[float64]int
}

// inc counts v once more and returns its count: 0 for a NaN, which a
// map's lookup does not find again.
func (c *valueCounts) inc(v float64) int {
	if v != v {
		return 0
	}
	if c.m != nil {
		c.m[v]++
		return c.m[v]
	}
	for i, w := range c.vals {
		if w == v {
			c.counts[i]++
			return c.counts[i]
		}
	}
	if len(c.vals) == 16 {
		c.m = make(map[float64]int, 32)
		for i, w := range c.vals {
			c.m[w] = c.counts[i]
		}
		c.m[v]++
		return c.m[v]
	}
	c.vals = append(c.vals, v)
	c.counts = append(c.counts, 1)
	return 1
}

// NewSparseMatrix returns a matrix with the given number of outputs and
// sparse rows.
func NewSparseMatrix(outputs int, rows []SparseRow) (*Matrix, error) {
	if outputs < 1 {
		return nil, fmt.Errorf("%w: matrix has %d outputs, need at least 1", ErrInvalid, outputs)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: matrix has no rows", ErrInvalid)
	}
	m := &Matrix{outputs: outputs}
	for x, sr := range rows {
		r := sparseRow{def: sr.Default}
		for y := range sr.Entries {
			if y < 0 || y >= outputs {
				return nil, fmt.Errorf("%w: matrix row %d has an entry for output %d, outside [0,%d)", ErrInvalid, x, y, outputs)
			}
			r.idx = append(r.idx, y)
		}
		slices.Sort(r.idx)
		r.val = make([]float64, len(r.idx))
		for i, y := range r.idx {
			r.val[i] = sr.Entries[y]
		}
		m.rows = append(m.rows, r)
	}
	return m, nil
}

// NumInputs returns the number of inputs (rows).
func (m *Matrix) NumInputs() int { return len(m.rows) }

// NumOutputs returns the number of outputs (columns).
func (m *Matrix) NumOutputs() int { return m.outputs }

// At returns R[x][y].
func (m *Matrix) At(x, y int) float64 { return m.rows[x].at(y) }

// Row returns row x as the decomposition reads it: the probability def of
// every output except those in outputs (sorted ascending, distinct), whose
// probabilities are probs. The slices are the matrix's own: the caller
// must not modify them.
func (m *Matrix) Row(x int) (def float64, outputs []int, probs []float64) {
	r := &m.rows[x]
	return r.def, r.idx, r.val
}

// matrixJSON is the file format of a matrix declaration.
type matrixJSON struct {
	Eps0       float64           `json:"eps0,omitempty"`
	Inputs     []string          `json:"inputs,omitempty"`
	Outputs    []string          `json:"outputs,omitempty"`
	NumOutputs int               `json:"num_outputs,omitempty"`
	Rows       []json.RawMessage `json:"rows"`
}

type sparseRowJSON struct {
	Default float64            `json:"default"`
	Entries map[string]float64 `json:"entries"`
}

// UnmarshalJSON decodes a matrix: {"inputs": [...], "outputs": [...],
// "num_outputs": m, "rows": [...]} where each row is either a dense array of
// probabilities or {"default": v, "entries": {"output": v}} with outputs named
// by index or label.
func (m *Matrix) UnmarshalJSON(data []byte) error {
	var mj matrixJSON
	if err := json.Unmarshal(data, &mj); err != nil {
		return fmt.Errorf("%w: matrix: %v", ErrInvalid, err)
	}
	dec, err := mj.matrix()
	if err != nil {
		return err
	}
	*m = *dec
	return nil
}

// MarshalJSON encodes the matrix in the sparse row format.
func (m *Matrix) MarshalJSON() ([]byte, error) {
	mj := struct {
		Inputs     []string        `json:"inputs,omitempty"`
		Outputs    []string        `json:"outputs,omitempty"`
		NumOutputs int             `json:"num_outputs"`
		Rows       []sparseRowJSON `json:"rows"`
	}{m.InputLabels, m.OutputLabels, m.outputs, nil}
	for _, r := range m.rows {
		sr := sparseRowJSON{Default: r.def, Entries: map[string]float64{}}
		for i, y := range r.idx {
			key := strconv.Itoa(y)
			if y < len(m.OutputLabels) {
				key = m.OutputLabels[y] // labels take precedence when decoding
			}
			sr.Entries[key] = r.val[i]
		}
		mj.Rows = append(mj.Rows, sr)
	}
	return json.Marshal(mj)
}

func (mj *matrixJSON) matrix() (*Matrix, error) {
	if len(mj.Rows) == 0 {
		return nil, fmt.Errorf("%w: matrix has no rows", ErrInvalid)
	}
	if len(mj.Inputs) > 0 && len(mj.Inputs) != len(mj.Rows) {
		return nil, fmt.Errorf("%w: matrix has %d input labels and %d rows", ErrInvalid, len(mj.Inputs), len(mj.Rows))
	}
	outputs := mj.NumOutputs
	if outputs == 0 {
		outputs = len(mj.Outputs)
	}
	labelIdx := map[string]int{}
	for i, l := range mj.Outputs {
		if _, dup := labelIdx[l]; dup {
			return nil, fmt.Errorf("%w: output label %q appears twice", ErrInvalid, l)
		}
		labelIdx[l] = i
	}
	// maxOutputs bounds the memory a declaration file can make Decompose
	// allocate (about 60 bytes per output).
	const maxOutputs = 1 << 20
	var dense [][]float64
	var sparse []SparseRow
	for x, raw := range mj.Rows {
		t := strings.TrimSpace(string(raw))
		switch {
		case strings.HasPrefix(t, "["):
			var row []float64
			if err := json.Unmarshal(raw, &row); err != nil {
				return nil, fmt.Errorf("%w: matrix row %d: %v", ErrInvalid, x, err)
			}
			dense = append(dense, row)
		case strings.HasPrefix(t, "{"):
			var sr sparseRowJSON
			if err := json.Unmarshal(raw, &sr); err != nil {
				return nil, fmt.Errorf("%w: matrix row %d: %v", ErrInvalid, x, err)
			}
			row := SparseRow{Default: sr.Default, Entries: map[int]float64{}}
			for k, v := range sr.Entries {
				y, ok := labelIdx[k]
				if !ok {
					n, err := strconv.Atoi(k)
					if err != nil {
						return nil, fmt.Errorf("%w: matrix row %d: output %q is neither an index nor a label", ErrInvalid, x, k)
					}
					y = n
				}
				row.Entries[y] = v
			}
			sparse = append(sparse, row)
		default:
			return nil, fmt.Errorf("%w: matrix row %d is neither an array nor an object", ErrInvalid, x)
		}
	}
	var m *Matrix
	var err error
	switch {
	case dense != nil && sparse != nil:
		return nil, fmt.Errorf("%w: matrix mixes dense and sparse rows", ErrInvalid)
	case dense != nil:
		m, err = NewMatrix(dense)
		if err == nil && outputs != 0 && outputs != m.outputs {
			err = fmt.Errorf("%w: matrix rows have %d entries but %d outputs are named", ErrInvalid, m.outputs, outputs)
		}
	default:
		if outputs < 1 || outputs > maxOutputs {
			return nil, fmt.Errorf("%w: sparse matrix needs num_outputs (or output labels) in [1,%d], got %d", ErrInvalid, maxOutputs, outputs)
		}
		m, err = NewSparseMatrix(outputs, sparse)
	}
	if err != nil {
		return nil, err
	}
	m.InputLabels, m.OutputLabels = mj.Inputs, mj.Outputs
	return m, nil
}

// DecodeDeclaration decodes a declaration from JSON: either a full
// Declaration ({"form": ..., "eps0": ..., ...}) or a bare matrix with an
// optional "eps0" field (the format of `--mech matrix:FILE.json`). The result
// is not yet validated; call Validate or Decompose.
func DecodeDeclaration(data []byte) (*Declaration, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, ok := probe["form"]; ok {
		var d Declaration
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return &d, nil
	}
	if _, ok := probe["rows"]; !ok {
		return nil, fmt.Errorf(`%w: JSON has neither "form" (a declaration) nor "rows" (a matrix)`, ErrInvalid)
	}
	var mj matrixJSON
	if err := json.Unmarshal(data, &mj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	m, err := mj.matrix()
	if err != nil {
		return nil, err
	}
	return &Declaration{Eps0: mj.Eps0, Form: FormMatrix, Matrix: m}, nil
}
