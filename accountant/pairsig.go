package accountant

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// Pair signatures: decomposeMatrix skips the ordered pairs whose merged
// set is one a pair before them already made.
//
// A Hadamard matrix's 4,032 ordered pairs (k = 64) all merge to the same
// set, and merging them was most of a decomposition (a calibration
// decomposes at every budget it probes). The signature of a pair says what
// its merge will be without doing it.
//
// Proof sketch (same sets, bit for bit).
//
//  1. pairAtoms adds one atom (r_y, R[x][y], R[x'][y]) per live column y
//     explicit in either row, in increasing y, then one atom
//     (n r, n def_x, n def_x') per blanket class with n > 0 columns
//     explicit in neither, in class order. Call an atom's type its three
//     values: every atom of one type is the same three float64s.
//  2. Its merge (mergeDistinct) puts the atoms in cells by their exact
//     ratios (P/R, Q/R) and sums each cell in input order. When no two
//     column types share a cell (their ratio keys differ), a cell holds
//     the atoms of at most one column type and then class atoms, and its
//     sums are that atom added to itself count - 1 times, then the class
//     atoms in class order: a function of the types, their counts and the
//     class atoms, whatever the positions of the columns.
//  3. mergeDistinct then sorts the cells by their keys (a total order on
//     distinct keys), declines when two neighbours are sameRatio-close or
//     more than maxBuckets cells occur, or a key is NaN, and otherwise
//     recomputes the ratios from the sums and sorts stably. All of this
//     depends on the cells' keys and sums only.
//  4. So the column types with their counts and the class atoms, with no
//     two column types under one key and the declining conditions of 3
//     absent, fix the merged set. The signature lists them in key order,
//     a cell's column type before its class atoms in class order (exact
//     bits). Two pairs with one
//     signature merge to one set; decomposeMatrix keeps the first pair of a
//     set (by its key) and no later one, so skipping a pair whose signature
//     an earlier pair had leaves d.Upper and the pairs whose triples make
//     the lower bound as they are. A pair with no signature (a shared cell,
//     or a merge that would decline) is merged as before.
//
// An explicit entry equal to its row's default (a sparse declaration may
// list one) makes a column type of its own: where default columns give the
// same type, two column types share a cell and the pair is merged (such
// pairs are not skipped; review 66 counted them).
//
// The counts come from bitsets of the live columns: for each value of row
// x (its distinct exceptions, and its default), each of row x' and each
// blanket class, a popcount of the three sets' intersection.
// TestPairSignaturesSameDecomposition compares decompositions with and
// without the skip.

// maxSigWords bounds the words of popcount per pair: beyond it the
// signature would cost about what the merge does.
const maxSigWords = 512

// pairSignatures is off in the tests that compare with every pair merged.
var pairSignatures = true

// pairSigner computes pair signatures for one matrix.
type pairSigner struct {
	p     *pairer
	words int
	// live holds the live columns; class[c] those of blanket class c.
	live  []uint64
	class [][]uint64
	rows  []rowBits
	types []sigType
	key   []byte
	union []int
}

// rowBits is one row's exceptions by value: vals in order of first
// occurrence, sets[i] the live columns holding vals[i], expl all of them.
type rowBits struct {
	vals []float64
	sets [][]uint64
	expl []uint64
}

// sigType is one atom type of a pair with its count and ratio keys; class
// marks a class atom (added after every column's).
type sigType struct {
	at    Atom
	n     int
	p, q  float64
	class bool
}

// newPairSigner returns a signer for p's matrix, or nil where signatures
// would cost about what the merges they save do.
func newPairSigner(p *pairer) *pairSigner {
	m := p.m
	words := (m.outputs + 63) / 64
	if words*len(p.classR) > maxSigWords {
		return nil
	}
	maxVals := 0
	rows := make([]rowBits, len(m.rows))
	for x, r := range m.rows {
		rb := &rows[x]
		rb.expl = make([]uint64, words)
		for i, y := range r.idx {
			if p.colClass[y] < 0 {
				continue
			}
			v := r.val[i]
			j := slices.IndexFunc(rb.vals, func(w float64) bool { return math.Float64bits(w) == math.Float64bits(v) })
			if j < 0 {
				j = len(rb.vals)
				rb.vals = append(rb.vals, v)
				rb.sets = append(rb.sets, make([]uint64, words))
			}
			rb.sets[j][y/64] |= 1 << (y % 64)
			rb.expl[y/64] |= 1 << (y % 64)
		}
		maxVals = max(maxVals, len(rb.vals))
		if (maxVals+1)*(maxVals+1)*len(p.classR)*words > maxSigWords {
			return nil
		}
	}
	s := &pairSigner{p: p, words: words, rows: rows, live: make([]uint64, words), class: make([][]uint64, len(p.classR))}
	for c := range s.class {
		s.class[c] = make([]uint64, words)
	}
	for y, c := range p.colClass {
		if c >= 0 {
			s.live[y/64] |= 1 << (y % 64)
			s.class[c][y/64] |= 1 << (y % 64)
		}
	}
	s.union = make([]int, len(p.classR))
	return s
}

// signature returns the signature of the ordered pair (x, x') (valid
// until the next call), or false when the pair has none (point 4).
func (s *pairSigner) signature(x, xp int) ([]byte, bool) {
	rx, ry := &s.rows[x], &s.rows[xp]
	defX, defY := s.p.m.rows[x].def, s.p.m.rows[xp].def
	s.types = s.types[:0]
	clear(s.union)
	// word returns word w of value a's columns in row r (a = len(r.vals):
	// its default, the live columns not explicit).
	word := func(r *rowBits, a, w int) uint64 {
		if a < len(r.vals) {
			return r.sets[a][w]
		}
		return s.live[w] &^ r.expl[w]
	}
	for a := 0; a <= len(rx.vals); a++ {
		va := defX
		if a < len(rx.vals) {
			va = rx.vals[a]
		}
		for b := 0; b <= len(ry.vals); b++ {
			if a == len(rx.vals) && b == len(ry.vals) {
				continue // explicit in neither: the class atoms below
			}
			vb := defY
			if b < len(ry.vals) {
				vb = ry.vals[b]
			}
			for c, cls := range s.class {
				n := 0
				for w := range s.words {
					n += bits.OnesCount64(word(rx, a, w) & word(ry, b, w) & cls[w])
				}
				if n > 0 {
					s.union[c] += n
					s.types = append(s.types, sigType{at: Atom{R: s.p.classR[c], P: va, Q: vb}, n: n})
				}
			}
		}
	}
	for c, r := range s.p.classR {
		if left := s.p.classN[c] - s.union[c]; left > 0 {
			n := float64(left)
			s.types = append(s.types, sigType{at: Atom{R: n * r, P: n * defX, Q: n * defY}, n: 1, class: true})
		}
	}
	for i := range s.types {
		t := &s.types[i]
		t.p, t.q = t.at.P/t.at.R, t.at.Q/t.at.R
		if t.p != t.p || t.q != t.q {
			return nil, false
		}
	}
	// By key; within a key in the order added (the column type first,
	// then the class atoms in class order), the order of the cell's sums.
	// An insertion sort (stable; a pair has a handful of types):
	// slices.SortStableFunc's calls were a sixth of a decomposition.
	ts := s.types
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && sigLess(&ts[j], &ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
	cells := 1
	for i := 1; i < len(s.types); i++ {
		a, b := s.types[i-1], s.types[i]
		if a.p == b.p && a.q == b.q {
			if !b.class {
				return nil, false // two column types in one cell
			}
			continue
		}
		if cells++; cells > maxBuckets {
			return nil, false // mergeDistinct declines
		}
		if a.p != b.p && sameRatio(b.p, a.p) || a.p == b.p && sameRatio(b.q, a.q) {
			return nil, false // mergeDistinct declines
		}
	}
	key := s.key[:0]
	for _, t := range s.types {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(t.at.R))
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(t.at.P))
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(t.at.Q))
		key = binary.LittleEndian.AppendUint64(key, uint64(t.n))
	}
	s.key = key
	return key, true
}

// sigLess orders types by their ratio keys (p, then q) in compareFloat's
// order.
func sigLess(a, b *sigType) bool {
	if c := compareFloat(a.p, b.p); c != 0 {
		return c < 0
	}
	return compareFloat(a.q, b.q) < 0
}
