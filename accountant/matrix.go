package accountant

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
		return nil, fmt.Errorf("%w: matrix has no rows", ErrInvalidDeclaration)
	}
	m := &Matrix{outputs: len(rows[0])}
	for x, row := range rows {
		if len(row) != m.outputs {
			return nil, fmt.Errorf("%w: matrix row %d has %d entries, row 0 has %d", ErrInvalidDeclaration, x, len(row), m.outputs)
		}
		m.rows = append(m.rows, denseToSparse(row))
	}
	return m, nil
}

// denseToSparse stores a row as its most frequent value plus exceptions.
func denseToSparse(row []float64) sparseRow {
	count := map[float64]int{}
	var mode float64
	best := -1
	for _, v := range row {
		count[v]++
		if count[v] > best || (count[v] == best && v < mode) {
			best, mode = count[v], v
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

// NewSparseMatrix returns a matrix with the given number of outputs and
// sparse rows.
func NewSparseMatrix(outputs int, rows []SparseRow) (*Matrix, error) {
	if outputs < 1 {
		return nil, fmt.Errorf("%w: matrix has %d outputs, need at least 1", ErrInvalidDeclaration, outputs)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: matrix has no rows", ErrInvalidDeclaration)
	}
	m := &Matrix{outputs: outputs}
	for x, sr := range rows {
		r := sparseRow{def: sr.Default}
		for y := range sr.Entries {
			if y < 0 || y >= outputs {
				return nil, fmt.Errorf("%w: matrix row %d has an entry for output %d, outside [0,%d)", ErrInvalidDeclaration, x, y, outputs)
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

func (m *Matrix) in(x int) string {
	if x < len(m.InputLabels) {
		return fmt.Sprintf("x=%d (%q)", x, m.InputLabels[x])
	}
	return fmt.Sprintf("x=%d", x)
}

func (m *Matrix) out(y int) string {
	if y < len(m.OutputLabels) {
		return fmt.Sprintf("y=%d (%q)", y, m.OutputLabels[y])
	}
	return fmt.Sprintf("y=%d", y)
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
		return fmt.Errorf("%w: matrix: %v", ErrInvalidDeclaration, err)
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
		return nil, fmt.Errorf("%w: matrix has no rows", ErrInvalidDeclaration)
	}
	if len(mj.Inputs) > 0 && len(mj.Inputs) != len(mj.Rows) {
		return nil, fmt.Errorf("%w: matrix has %d input labels and %d rows", ErrInvalidDeclaration, len(mj.Inputs), len(mj.Rows))
	}
	outputs := mj.NumOutputs
	if outputs == 0 {
		outputs = len(mj.Outputs)
	}
	labelIdx := map[string]int{}
	for i, l := range mj.Outputs {
		if _, dup := labelIdx[l]; dup {
			return nil, fmt.Errorf("%w: output label %q appears twice", ErrInvalidDeclaration, l)
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
				return nil, fmt.Errorf("%w: matrix row %d: %v", ErrInvalidDeclaration, x, err)
			}
			dense = append(dense, row)
		case strings.HasPrefix(t, "{"):
			var sr sparseRowJSON
			if err := json.Unmarshal(raw, &sr); err != nil {
				return nil, fmt.Errorf("%w: matrix row %d: %v", ErrInvalidDeclaration, x, err)
			}
			row := SparseRow{Default: sr.Default, Entries: map[int]float64{}}
			for k, v := range sr.Entries {
				y, ok := labelIdx[k]
				if !ok {
					n, err := strconv.Atoi(k)
					if err != nil {
						return nil, fmt.Errorf("%w: matrix row %d: output %q is neither an index nor a label", ErrInvalidDeclaration, x, k)
					}
					y = n
				}
				row.Entries[y] = v
			}
			sparse = append(sparse, row)
		default:
			return nil, fmt.Errorf("%w: matrix row %d is neither an array nor an object", ErrInvalidDeclaration, x)
		}
	}
	var m *Matrix
	var err error
	switch {
	case dense != nil && sparse != nil:
		return nil, fmt.Errorf("%w: matrix mixes dense and sparse rows", ErrInvalidDeclaration)
	case dense != nil:
		m, err = NewMatrix(dense)
		if err == nil && outputs != 0 && outputs != m.outputs {
			err = fmt.Errorf("%w: matrix rows have %d entries but %d outputs are named", ErrInvalidDeclaration, m.outputs, outputs)
		}
	default:
		if outputs < 1 || outputs > maxOutputs {
			return nil, fmt.Errorf("%w: sparse matrix needs num_outputs (or output labels) in [1,%d], got %d", ErrInvalidDeclaration, maxOutputs, outputs)
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
		return nil, fmt.Errorf("%w: %v", ErrInvalidDeclaration, err)
	}
	if _, ok := probe["form"]; ok {
		var d Declaration
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidDeclaration, err)
		}
		return &d, nil
	}
	if _, ok := probe["rows"]; !ok {
		return nil, fmt.Errorf(`%w: JSON has neither "form" (a declaration) nor "rows" (a matrix)`, ErrInvalidDeclaration)
	}
	var mj matrixJSON
	if err := json.Unmarshal(data, &mj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDeclaration, err)
	}
	m, err := mj.matrix()
	if err != nil {
		return nil, err
	}
	return &Declaration{Eps0: mj.Eps0, Form: FormMatrix, Matrix: m}, nil
}

// colStat is the minimum and maximum of one column and where they occur.
type colStat struct {
	min, max       float64
	argmin, argmax int
}

// columns computes the per-column minimum and maximum in O(nnz + k + m +
// sum over columns of the rows explicit there).
func (m *Matrix) columns() (explicit [][]int, stats []colStat, bg colStat) {
	k := len(m.rows)
	explicit = make([][]int, m.outputs)
	for x, r := range m.rows {
		for _, y := range r.idx {
			explicit[y] = append(explicit[y], x)
		}
	}
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch da, db := m.rows[a].def, m.rows[b].def; {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return a - b
	})
	bg = colStat{min: m.rows[order[0]].def, argmin: order[0], max: m.rows[order[k-1]].def, argmax: order[k-1]}
	stats = make([]colStat, m.outputs)
	stamp := make([]int, k)
	for i := range stamp {
		stamp[i] = -1
	}
	for y := range m.outputs {
		rows := explicit[y]
		if len(rows) == 0 {
			stats[y] = bg
			continue
		}
		s := colStat{min: math.Inf(1), max: math.Inf(-1)}
		for _, x := range rows {
			stamp[x] = y
			v := m.rows[x].at(y)
			if v < s.min {
				s.min, s.argmin = v, x
			}
			if v > s.max {
				s.max, s.argmax = v, x
			}
		}
		if len(rows) < k {
			for _, x := range order {
				if stamp[x] != y {
					if d := m.rows[x].def; d < s.min {
						s.min, s.argmin = d, x
					}
					break
				}
			}
			for i := k - 1; i >= 0; i-- {
				if x := order[i]; stamp[x] != y {
					if d := m.rows[x].def; d > s.max {
						s.max, s.argmax = d, x
					}
					break
				}
			}
		}
		stats[y] = s
	}
	return explicit, stats, bg
}

// maxPairWork bounds the work of the exhaustive pair search for matrices
// without exploitable sparsity.
const maxPairWork = 4e9

// Decompose validates the matrix as a pure eps0-LDP randomizer
// (docs/accounting.md §2) and returns its decomposition. eps0 = 0 means
// "compute it": the largest log likelihood ratio. Pairs of inputs whose
// merged atoms coincide are evaluated once: rows with the same profile
// whose exceptions do not overlap give the same atoms, so k-RR with
// k = 10^4 yields a single pair.
func (m *Matrix) Decompose(eps0 float64) (*Decomposition, error) {
	k := len(m.rows)
	if k < 2 {
		return nil, fmt.Errorf("%w: matrix has %d input(s); a neighbouring pair needs 2", ErrInvalidDeclaration, k)
	}
	// Rows: entries finite, >= 0, sum to 1.
	for x, r := range m.rows {
		bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1 }
		if bad(r.def) {
			y := 0
			for i := 0; i < len(r.idx) && r.idx[i] == y; i++ {
				y++
			}
			return nil, fmt.Errorf("%w: input %s, output %s: probability %v outside [0,1]", ErrInvalidDeclaration, m.in(x), m.out(y), r.def)
		}
		sum := r.def * float64(m.outputs-len(r.idx))
		for i, v := range r.val {
			if bad(v) {
				return nil, fmt.Errorf("%w: input %s, output %s: probability %v outside [0,1]", ErrInvalidDeclaration, m.in(x), m.out(r.idx[i]), v)
			}
			sum += v
		}
		if math.Abs(sum-1) > sumTol {
			return nil, fmt.Errorf("%w: input %s: row sums to %.15g, must be 1 (tolerance %g)", ErrInvalidDeclaration, m.in(x), sum, sumTol)
		}
	}
	explicit, stats, _ := m.columns()
	maxRatio := 1.0
	for y, s := range stats {
		if s.max == 0 {
			continue
		}
		if s.min == 0 {
			return nil, fmt.Errorf("%w: output %s has probability 0 under input %s but %v under input %s (not pure LDP)", ErrInvalidDeclaration, m.out(y), m.in(s.argmin), s.max, m.in(s.argmax))
		}
		ratio := s.max / s.min
		if eps0 > 0 && ratio > math.Exp(eps0)*(1+1e-12) {
			return nil, fmt.Errorf("%w: output %s: R[%s]/R[%s] = %v exceeds e^eps0 = %v", ErrInvalidDeclaration, m.out(y), m.in(s.argmax), m.in(s.argmin), ratio, math.Exp(eps0))
		}
		maxRatio = math.Max(maxRatio, ratio)
	}
	if eps0 == 0 {
		eps0 = math.Log(maxRatio)
		if !(eps0 > 0) {
			return nil, fmt.Errorf("%w: all rows are identical, the randomizer releases nothing (eps0 = 0)", ErrInvalidDeclaration)
		}
		if eps0 > MaxEps0 {
			return nil, fmt.Errorf("%w: largest likelihood ratio is e^%.4g, above the largest supported eps0 = %g", ErrInvalidDeclaration, eps0, MaxEps0)
		}
	}
	// Blanket mass per column, and the count of live columns per distinct
	// blanket value.
	classes := map[float64]int{}
	for _, s := range stats {
		if s.max > 0 {
			classes[s.min]++
		}
	}
	p := &pairer{m: m, stats: stats, classes: classes}
	d := &Decomposition{LocalEps: eps0}

	// Row profiles: rows with equal profiles and disjoint exceptions give
	// equal pair atoms.
	profile := make([]string, k)
	groups := map[string][]int{}
	var order []string
	for x, r := range m.rows {
		var b strings.Builder
		b.WriteString(strconv.FormatFloat(r.def, 'g', -1, 64))
		type ent struct{ r, v float64 }
		ents := make([]ent, len(r.idx))
		for i, y := range r.idx {
			ents[i] = ent{stats[y].min, r.val[i]}
		}
		slices.SortFunc(ents, func(a, b ent) int {
			if a.r != b.r {
				if a.r < b.r {
					return -1
				}
				return 1
			}
			switch {
			case a.v < b.v:
				return -1
			case a.v > b.v:
				return 1
			}
			return 0
		})
		for _, e := range ents {
			fmt.Fprintf(&b, ";%v:%v", e.r, e.v)
		}
		profile[x] = b.String()
		if _, ok := groups[profile[x]]; !ok {
			order = append(order, profile[x])
		}
		groups[profile[x]] = append(groups[profile[x]], x)
	}

	// Overlapping pairs share an exception column.
	var work float64
	for _, rows := range explicit {
		work += float64(len(rows)) * float64(len(rows))
	}
	avg := float64(0)
	for _, r := range m.rows {
		avg += float64(len(r.idx))
	}
	avg = 2*avg/float64(k) + float64(len(classes))
	type pair struct{ a, b int }
	var overlap map[pair]bool
	if work < float64(k)*float64(k) {
		overlap = map[pair]bool{}
		for _, rows := range explicit {
			for i, a := range rows {
				for _, b := range rows[i+1:] {
					overlap[pair{min(a, b), max(a, b)}] = true
				}
			}
		}
	}
	if overlap == nil && float64(k)*float64(k)*avg > maxPairWork {
		return nil, fmt.Errorf("%w: matrix with %d inputs and %d outputs is too dense for the exhaustive pair search; declare the atoms of its worst-case pairs instead", ErrInvalidDeclaration, k, m.outputs)
	}
	type rep struct{ x, y int }
	seen := map[string]bool{}
	var reps []rep
	add := func(x, y int) {
		s := p.pairAtoms(x, y)
		if key := s.key(); !seen[key] {
			seen[key] = true
			d.Upper = append(d.Upper, s)
			reps = append(reps, rep{x, y})
		}
	}
	if overlap == nil {
		for x := range k {
			for y := range k {
				if x != y {
					add(x, y)
				}
			}
		}
	} else {
		overlapCount := map[[2]string]int{}
		for pr := range overlap {
			add(pr.a, pr.b)
			add(pr.b, pr.a)
			overlapCount[[2]string{profile[pr.a], profile[pr.b]}]++
			overlapCount[[2]string{profile[pr.b], profile[pr.a]}]++
		}
		for _, pa := range order {
			for _, pb := range order {
				A, B := groups[pa], groups[pb]
				total := len(A) * len(B)
				if pa == pb {
					total = len(A) * (len(A) - 1)
				}
				if total-overlapCount[[2]string{pa, pb}] <= 0 {
					continue
				}
			search:
				for _, x := range A {
					for _, y := range B {
						if x != y && !overlap[pair{min(x, y), max(x, y)}] {
							add(x, y)
							break search
						}
					}
				}
			}
		}
	}
	// Unchanged attribute: one set per profile.
	for _, pr := range order {
		x := groups[pr][0]
		s := p.pairAtoms(x, x)
		d.UpperSame = append(d.UpperSame, s)
	}
	d.UpperSame = dedupe(d.UpperSame)

	// Lower-bound triples: for each distinct pair, every x3 when the matrix
	// is small, else one x3 per profile. Any triple gives a valid lower
	// bound, so trying a subset only loosens it.
	const maxLower = 64
	lowSeen := map[string]bool{}
	for _, r := range reps {
		var cands []int
		if k <= 64 {
			for x3 := range k {
				cands = append(cands, x3)
			}
		} else {
			for _, pr := range order {
				for _, x3 := range groups[pr] {
					if x3 != r.x && x3 != r.y {
						cands = append(cands, x3)
						break
					}
				}
			}
		}
		for _, x3 := range cands {
			if (x3 == r.x || x3 == r.y) && k > 2 {
				continue
			}
			s := p.tripleAtoms(r.x, r.y, x3)
			key := s.key()
			if lowSeen[key] || len(d.Lower) >= maxLower {
				continue
			}
			lowSeen[key] = true
			d.Lower = append(d.Lower, s)
			d.LowerSame = append(d.LowerSame, p.tripleAtoms(r.x, r.x, x3))
		}
	}
	d.LowerSame = dedupe(d.LowerSame)
	if m.isKRR() {
		d.KRR = k
	}
	return d, nil
}

// isKRR reports whether the matrix is k-ary randomized response: square,
// every row one value on the diagonal and another elsewhere, equal across rows.
func (m *Matrix) isKRR() bool {
	if m.outputs != len(m.rows) || len(m.rows) < 2 {
		return false
	}
	d0, o0 := m.At(0, 0), m.At(0, 1)
	for x, r := range m.rows {
		if len(r.idx) != 1 || r.idx[0] != x || r.val[0] != d0 || r.def != o0 {
			if !(len(m.rows) == 2 && m.At(x, x) == d0 && m.At(x, 1-x) == o0) {
				return false
			}
		}
	}
	return d0 > o0
}

// pairer computes pair and triple atoms in time proportional to the
// exceptions of the rows involved plus the number of distinct blanket values.
type pairer struct {
	m       *Matrix
	stats   []colStat
	classes map[float64]int
}

// pairAtoms returns the merged atoms (r_y, R[x][y], R[x'][y]).
func (p *pairer) pairAtoms(x, xp int) AtomSet {
	rx, rxp := &p.m.rows[x], &p.m.rows[xp]
	var out AtomSet
	left := map[float64]int{}
	for r, c := range p.classes {
		left[r] = c
	}
	eachUnion(rx.idx, rxp.idx, func(y int) {
		s := p.stats[y]
		if s.max == 0 {
			return
		}
		left[s.min]--
		out = append(out, Atom{s.min, rx.at(y), rxp.at(y)})
	})
	for r, c := range left {
		if c > 0 {
			n := float64(c)
			out = append(out, Atom{n * r, n * rx.def, n * rxp.def})
		}
	}
	return out.Merge()
}

// tripleAtoms returns the merged atoms (R[x3][y], R[x][y], R[x'][y]).
func (p *pairer) tripleAtoms(x, xp, x3 int) AtomSet {
	rx, rxp, r3 := &p.m.rows[x], &p.m.rows[xp], &p.m.rows[x3]
	var out AtomSet
	live := 0
	for _, c := range p.classes {
		live += c
	}
	var u []int
	eachUnion(rx.idx, rxp.idx, func(y int) { u = append(u, y) })
	eachUnion(u, r3.idx, func(y int) {
		if p.stats[y].max == 0 {
			return
		}
		live--
		out = append(out, Atom{r3.at(y), rx.at(y), rxp.at(y)})
	})
	if live > 0 {
		n := float64(live)
		out = append(out, Atom{n * r3.def, n * rx.def, n * rxp.def})
	}
	return out.Merge()
}

// eachUnion calls f for every element of the union of two sorted lists.
func eachUnion(a, b []int, f func(int)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			f(a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			f(b[j])
			j++
		default:
			f(a[i])
			i++
			j++
		}
	}
}
