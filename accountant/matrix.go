package accountant

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
)

// The decomposition of a matrix declaration (docs/accounting.md §2). The
// matrix itself, its constructors and its JSON form are package declare's
// (Matrix); this file reads its rows through matrixRows.

// matrixRows is the decomposition's view of a Matrix: its rows as a default
// value plus the sorted entries that differ (Matrix.Row), and the label
// helpers of its error messages.
type matrixRows struct {
	*Matrix
	outputs int
	rows    []sparseRow
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

// rowsOf returns the view of m.
func rowsOf(m *Matrix) *matrixRows {
	v := &matrixRows{Matrix: m, outputs: m.NumOutputs(), rows: make([]sparseRow, m.NumInputs())}
	for x := range v.rows {
		r := &v.rows[x]
		r.def, r.idx, r.val = m.Row(x)
	}
	return v
}

func (m *matrixRows) in(x int) string {
	if x < len(m.InputLabels) {
		return fmt.Sprintf("x=%d (%q)", x, m.InputLabels[x])
	}
	return fmt.Sprintf("x=%d", x)
}

func (m *matrixRows) out(y int) string {
	if y < len(m.OutputLabels) {
		return fmt.Sprintf("y=%d (%q)", y, m.OutputLabels[y])
	}
	return fmt.Sprintf("y=%d", y)
}

// colStat is the minimum and maximum of one column and where they occur.
type colStat struct {
	min, max       float64
	argmin, argmax int
}

// blanketClasses returns, per distinct blanket value (a column's
// minimum), the number of live columns (maximum above 0) that have it.
func blanketClasses(stats []colStat) map[float64]int {
	classes := map[float64]int{}
	for _, s := range stats {
		if s.max > 0 {
			classes[s.min]++
		}
	}
	return classes
}

// columns computes the per-column minimum and maximum in O(nnz + k + m +
// sum over columns of the rows explicit there).
func (m *matrixRows) columns() (explicit [][]int, stats []colStat, bg colStat) {
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

// decomposeMatrix validates the matrix as a pure eps0-LDP randomizer
// (docs/accounting.md §2) and returns its decomposition. eps0 = 0 means
// "compute it": the largest log likelihood ratio. Pairs of inputs whose
// merged atoms coincide are evaluated once: rows with the same profile
// whose exceptions do not overlap give the same atoms, so k-RR with
// k = 10^4 yields a single pair.
func decomposeMatrix(mat *Matrix, eps0 float64) (*Decomposition, error) {
	m := rowsOf(mat)
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
	classes := blanketClasses(stats)
	p := newPairer(m, stats, classes)
	d := &Decomposition{LocalEps: eps0, Sampled: true, ExactPairs: true}

	// Row profiles: rows with equal profiles and disjoint exceptions give
	// equal pair atoms.
	profile, groups, order := rowProfiles(m, stats)

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
	// keep adds the set s of the pair (x, y), with its key, unless an
	// equal set is kept already.
	keep := func(x, y int, s AtomSet, key string) {
		if !seen[key] {
			seen[key] = true
			d.Upper = append(d.Upper, s)
			reps = append(reps, rep{x, y})
		}
	}
	addKeys := newKeyer()
	add := func(x, y int) {
		s := p.pairAtoms(x, y)
		keep(x, y, s, addKeys.key(s))
	}
	if overlap == nil {
		// Every ordered pair: their sets and keys are computed by
		// workers, a block at a time, and kept in the order above (so
		// d.Upper is the same, in the same order, as one at a time).
		var block [][2]int
		sets, keys := make([]AtomSet, pairBlock), make([]string, pairBlock)
		flush := func() {
			workers := min(runtime.GOMAXPROCS(0), (len(block)+63)/64)
			parallelMap(workers, func(w int) {
				q := p.worker()
				kr := newKeyer()
				for i := w; i < len(block); i += workers {
					sets[i] = q.pairAtoms(block[i][0], block[i][1])
					keys[i] = kr.key(sets[i])
				}
			})
			for i, pr := range block {
				keep(pr[0], pr[1], sets[i], keys[i])
				sets[i] = nil
			}
			block = block[:0]
		}
		// A pair whose signature an earlier pair had merges to a set
		// kept already (pairsig.go): skip it.
		var sig *pairSigner
		if pairSignatures {
			sig = newPairSigner(p)
		}
		signed := map[string]bool{}
		for x := range k {
			for y := range k {
				if x == y {
					continue
				}
				if sig != nil {
					if key, ok := sig.signature(x, y); ok {
						if signed[string(key)] {
							continue
						}
						signed[string(key)] = true
					}
				}
				if block = append(block, [2]int{x, y}); len(block) == pairBlock {
					flush()
				}
			}
		}
		flush()
	} else {
		overlapCount := map[[2]string]int{}
		// In (a, b) order: a map's order changes from run to run, and the
		// order of d.Upper decides which pairs' triples are kept for the
		// lower bound (the first maxLower), so ranging over the map gave
		// a different lower bound at each call (review 63).
		pairs := slices.SortedFunc(maps.Keys(overlap), func(x, y pair) int {
			if c := cmp.Compare(x.a, y.a); c != 0 {
				return c
			}
			return cmp.Compare(x.b, y.b)
		})
		for _, pr := range pairs {
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
	lowKeys := newKeyer()
triples:
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
			if len(d.Lower) >= maxLower {
				break triples // every later triple would be dropped unkept
			}
			s := p.tripleAtoms(r.x, r.y, x3)
			key := lowKeys.key(s)
			if lowSeen[key] {
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

// rowProfiles returns each row's profile (its default, then its
// exceptions' (blanket, value) pairs in order, as a key), the rows of
// each profile, and the profiles in order of first occurrence.
func rowProfiles(m *matrixRows, stats []colStat) (profile []string, groups map[string][]int, order []string) {
	k := len(m.rows)
	profile = make([]string, k)
	groups = map[string][]int{}
	for x, r := range m.rows {
		// The key holds each value's bits: equal exactly when the
		// values are (they are finite here), as their shortest texts
		// were, without formatting 8,192 floats per Hadamard
		// decomposition (a seventh of a calibration).
		key := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+16*len(r.idx)), math.Float64bits(r.def))
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
			key = binary.LittleEndian.AppendUint64(key, math.Float64bits(e.r))
			key = binary.LittleEndian.AppendUint64(key, math.Float64bits(e.v))
		}
		profile[x] = string(key)
		if _, ok := groups[profile[x]]; !ok {
			order = append(order, profile[x])
		}
		groups[profile[x]] = append(groups[profile[x]], x)
	}
	return profile, groups, order
}

// isKRR reports whether the matrix is k-ary randomized response: square,
// every row one value on the diagonal and another elsewhere, equal across rows.
func (m *matrixRows) isKRR() bool {
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
// exceptions of the rows involved plus the number of distinct blanket
// values, with one merger's buffers for all of them (not safe for
// concurrent use).
type pairer struct {
	m     *matrixRows
	stats []colStat
	// The distinct blanket values r of the live columns, ascending, with
	// the number of live columns of each (classN), each column's index
	// into them (colClass; -1 for a column that is 0 in every row), and
	// the number of live columns.
	classR   []float64
	classN   []int
	colClass []int
	live     int
	left     []int
	triple   AtomSet
	mg       merger
}

// newPairer indexes the live columns by their blanket value (classes
// counts the live columns of each).
func newPairer(m *matrixRows, stats []colStat, classes map[float64]int) *pairer {
	p := &pairer{m: m, stats: stats, classR: slices.Sorted(maps.Keys(classes))}
	index := make(map[float64]int, len(p.classR))
	for i, r := range p.classR {
		index[r] = i
		p.classN = append(p.classN, classes[r])
		p.live += classes[r]
	}
	p.colClass = make([]int, len(stats))
	for y, s := range stats {
		p.colClass[y] = -1
		if s.max > 0 {
			p.colClass[y] = index[s.min]
		}
	}
	return p
}

// pairBlock is the number of pairs decomposeMatrix hands to its workers
// at a time.
const pairBlock = 4096

// worker returns a pairer that shares p's indices and has buffers of its
// own, for use by one goroutine.
func (p *pairer) worker() *pairer {
	q := *p
	q.left, q.triple, q.mg = nil, nil, merger{}
	return &q
}

// pairAtoms returns the merged atoms (r_y, R[x][y], R[x'][y]).
func (p *pairer) pairAtoms(x, xp int) AtomSet {
	rx, rxp := &p.m.rows[x], &p.m.rows[xp]
	left := append(p.left[:0], p.classN...)
	eachUnionAt(rx, rxp, func(y int, px, pxp float64) {
		c := p.colClass[y]
		if c < 0 {
			return
		}
		left[c]--
		p.mg.add(Atom{R: p.stats[y].min, P: px, Q: pxp})
	})
	// In value order: the merge sums the atoms of equal ratios in the
	// order given.
	for c, r := range p.classR {
		if left[c] > 0 {
			n := float64(left[c])
			p.mg.add(Atom{R: n * r, P: n * rx.def, Q: n * rxp.def})
		}
	}
	p.left = left
	return p.mg.merge(nil)
}

// tripleAtoms returns the merged atoms (R[x3][y], R[x][y], R[x'][y]).
func (p *pairer) tripleAtoms(x, xp, x3 int) AtomSet {
	rx, rxp, r3 := &p.m.rows[x], &p.m.rows[xp], &p.m.rows[x3]
	out := p.triple[:0]
	live := p.live
	// Every column explicit in one of the three rows, in increasing
	// order, with the three entries read from the walk's positions (the
	// atoms eachUnion over the rows' indices and at(y) gave, in the same
	// order); then the merge of AtomSet.Merge with the pairer's buffers.
	i, j, l := 0, 0, 0
	for i < len(rx.idx) || j < len(rxp.idx) || l < len(r3.idx) {
		y := math.MaxInt
		if i < len(rx.idx) {
			y = rx.idx[i]
		}
		if j < len(rxp.idx) {
			y = min(y, rxp.idx[j])
		}
		if l < len(r3.idx) {
			y = min(y, r3.idx[l])
		}
		at := Atom{R: r3.def, P: rx.def, Q: rxp.def}
		if i < len(rx.idx) && rx.idx[i] == y {
			at.P = rx.val[i]
			i++
		}
		if j < len(rxp.idx) && rxp.idx[j] == y {
			at.Q = rxp.val[j]
			j++
		}
		if l < len(r3.idx) && r3.idx[l] == y {
			at.R = r3.val[l]
			l++
		}
		if p.stats[y].max == 0 {
			continue
		}
		live--
		out = append(out, at)
	}
	if live > 0 {
		n := float64(live)
		out = append(out, Atom{R: n * r3.def, P: n * rx.def, Q: n * rxp.def})
	}
	p.triple = out[:0]
	return p.mg.merge(p.mg.addSet(out))
}

// eachUnionAt calls f for every column y explicit in row a or row b (in
// increasing order) with the two rows' entries there: eachUnion over the
// rows' indices, reading a.at(y) and b.at(y) from the walk's positions.
func eachUnionAt(a, b *sparseRow, f func(y int, va, vb float64)) {
	i, j := 0, 0
	for i < len(a.idx) || j < len(b.idx) {
		switch {
		case j == len(b.idx) || (i < len(a.idx) && a.idx[i] < b.idx[j]):
			f(a.idx[i], a.val[i], b.def)
			i++
		case i == len(a.idx) || b.idx[j] < a.idx[i]:
			f(b.idx[j], a.def, b.val[j])
			j++
		default:
			f(a.idx[i], a.val[i], b.val[j])
			i++
			j++
		}
	}
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
