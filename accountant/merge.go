package accountant

import (
	"cmp"
	"slices"
)

// Merging atoms of equal ratios (AtomSet.Merge) with reused buffers.
//
// decomposeMatrix merges one set per ordered pair of inputs, k (k - 1) of
// them (4,032 at k = 64, each of about a hundred atoms), and a calibration
// decomposes at every budget it probes: allocating and sorting afresh for
// each set was most of a matrix mechanism's calibration. merger does the
// same steps with its buffers kept from one set to the next, and sorts by a
// stable bucket pass where few distinct keys occur (a pair's atoms take a
// handful of ratios).
//
// Why the result is the same, bit for bit, as the plain steps:
//
//   - The ratios P/R and Q/R are computed once per atom and read wherever
//     the plain steps recomputed them; a division is deterministic, so
//     every comparison and every cut (sameRatio) sees the same values.
//   - A stable sort's result is unique: the elements ordered by key (in
//     cmp.Compare's order, under which NaNs are equal and least), equal
//     keys in their input order. The bucket pass builds exactly that:
//     the distinct keys ascending, then each element appended to its key's
//     bucket in input order. Where more than maxBuckets distinct keys
//     occur it falls back to slices.SortStableFunc.
//   - The sums of a merged group are taken in the same order (the order
//     after both sorts), so they round the same.
//
// TestMergerMatchesPlain compares the two on random sets with repeated
// and near-equal ratios.

// maxBuckets is the largest number of distinct keys sorted by buckets.
const maxBuckets = 16

// ratioAtom is an atom with its ratios p = P/R and q = Q/R.
type ratioAtom struct {
	at   Atom
	p, q float64
}

// merger merges atom sets; its buffers are reused from one call to the
// next (not safe for concurrent use).
type merger struct {
	pos, tmp []ratioAtom
	// merged holds the merged atoms of either way (merge's groups or
	// mergeDistinct's cells).
	merged []ratioAtom
	keys   []float64
	bucket []int
}

// add appends an atom to the set being built.
func (m *merger) add(at Atom) {
	m.pos = append(m.pos, ratioAtom{at, at.P / at.R, at.Q / at.R})
}

// addSet adds the atoms of s with R > 0 to the set being built and
// returns those with R = 0 and P or Q non-zero (kept for validation);
// atoms that are 0 throughout are dropped.
func (m *merger) addSet(s AtomSet) (bad AtomSet) {
	for _, at := range s {
		switch {
		case at.R > 0:
			m.add(at)
		case at.P != 0 || at.Q != 0:
			bad = append(bad, at)
		}
	}
	return bad
}

// merge returns the merged set of the atoms added since the last merge
// (every one with R > 0), followed by bad, and empties the set.
func (m *merger) merge(bad AtomSet) AtomSet {
	if out, ok := m.mergeDistinct(bad); ok {
		m.pos = m.pos[:0]
		return out
	}
	pos := m.pos
	m.sortBy(pos, func(x *ratioAtom) float64 { return x.p })
	merged := m.merged[:0]
	for lo := 0; lo < len(pos); {
		hi := lo + 1
		for hi < len(pos) && sameRatio(pos[hi].p, pos[lo].p) {
			hi++
		}
		g := pos[lo:hi]
		m.sortBy(g, func(x *ratioAtom) float64 { return x.q })
		for i := 0; i < len(g); {
			j, sum := i+1, g[i].at
			for j < len(g) && sameRatio(g[j].q, g[i].q) {
				sum.R += g[j].at.R
				sum.P += g[j].at.P
				sum.Q += g[j].at.Q
				j++
			}
			merged = append(merged, ratioAtom{sum, sum.P / sum.R, sum.Q / sum.R})
			i = j
		}
		lo = hi
	}
	m.merged = merged[:0]
	m.pos = pos[:0]
	return sortedSet(merged, bad)
}

// mergeDistinct is merge where the groups are exact: it sums the atoms of
// each exact ratio pair (p, q) in input order, and answers false (having
// changed nothing) where a ratio is NaN, more than maxBuckets pairs occur,
// or two adjacent distinct p (or q under one p) are within ratioTol.
//
// Why it is merge's result: merge walks the atoms sorted by p and closes
// a group at the first p that is not within ratioTol of the group's first.
// With the atoms of each exact p adjacent after the sort, in input order
// (the sort is stable), and the next distinct p not within ratioTol of the
// one before (checked here, infinities included: sameRatio holds between
// any finite x and an infinity, so such neighbours go the general way),
// each group holds exactly the atoms of one p; the same holds for q within
// it. Each merged atom is then the sum of one (p, q) pair's atoms in input
// order, and merge lists them in (p, q) order before its final sort, as
// here.
func (m *merger) mergeDistinct(bad AtomSet) (AtomSet, bool) {
	cells := m.merged[:0]
	defer func() { m.merged = cells[:0] }()
	for _, a := range m.pos {
		if a.p != a.p || a.q != a.q {
			return nil, false
		}
		i := 0
		for i < len(cells) && !(cells[i].p == a.p && cells[i].q == a.q) {
			i++
		}
		if i < len(cells) {
			cells[i].at.R += a.at.R
			cells[i].at.P += a.at.P
			cells[i].at.Q += a.at.Q
			continue
		}
		if len(cells) == maxBuckets {
			return nil, false
		}
		cells = append(cells, a)
	}
	// Distinct (p, q) pairs: a total order, so any sort gives the one
	// result.
	slices.SortFunc(cells, func(x, y ratioAtom) int {
		if c := compareFloat(x.p, y.p); c != 0 {
			return c
		}
		return compareFloat(x.q, y.q)
	})
	for i := 1; i < len(cells); i++ {
		a, b := cells[i-1], cells[i]
		if a.p != b.p && sameRatio(b.p, a.p) || a.p == b.p && sameRatio(b.q, a.q) {
			return nil, false
		}
	}
	for i := range cells {
		c := &cells[i]
		c.p, c.q = c.at.P/c.at.R, c.at.Q/c.at.R
	}
	return sortedSet(cells, bad), true
}

// sortedSet returns the merged atoms stably sorted by their ratios (p,
// then q), followed by bad. It sorts merged in place.
func sortedSet(merged []ratioAtom, bad AtomSet) AtomSet {
	slices.SortStableFunc(merged, func(x, y ratioAtom) int {
		if c := cmp.Compare(x.p, y.p); c != 0 {
			return c
		}
		return cmp.Compare(x.q, y.q)
	})
	out := make(AtomSet, len(merged), len(merged)+len(bad))
	for i, r := range merged {
		out[i] = r.at
	}
	return append(out, bad...)
}

// sortBy sorts xs stably by key, in cmp.Compare's order.
func (m *merger) sortBy(xs []ratioAtom, key func(*ratioAtom) float64) {
	if len(xs) < 2 {
		return
	}
	keys := m.keys[:0]
	for i := range xs {
		k := key(&xs[i])
		j, found := searchKey(keys, k)
		if found {
			continue
		}
		if len(keys) == maxBuckets {
			slices.SortStableFunc(xs, func(x, y ratioAtom) int { return cmp.Compare(key(&x), key(&y)) })
			m.keys = keys[:0]
			return
		}
		keys = slices.Insert(keys, j, k)
	}
	m.keys = keys[:0]
	if len(keys) == 1 {
		return
	}
	// start[j] is where bucket j begins; each element goes to the end of
	// its key's bucket, in input order.
	start := append(m.bucket[:0], make([]int, len(keys)+1)...)
	for i := range xs {
		j, _ := searchKey(keys, key(&xs[i]))
		start[j+1]++
	}
	for j := 1; j < len(start); j++ {
		start[j] += start[j-1]
	}
	tmp := append(m.tmp[:0], xs...)
	for i := range tmp {
		j, _ := searchKey(keys, key(&tmp[i]))
		xs[start[j]] = tmp[i]
		start[j]++
	}
	m.tmp, m.bucket = tmp[:0], start[:0]
}

// searchKey returns the position of k in the ascending keys (at most
// maxBuckets of them), or where it would go, as slices.BinarySearchFunc
// with cmp.Compare would.
func searchKey(keys []float64, k float64) (int, bool) {
	for j, x := range keys {
		if c := compareFloat(x, k); c >= 0 {
			return j, c == 0
		}
	}
	return len(keys), false
}

// compareFloat is cmp.Compare for float64: NaNs are equal to each other
// and below every other value; -0 equals +0.
func compareFloat(x, y float64) int {
	xNaN, yNaN := x != x, y != y
	switch {
	case xNaN && yNaN:
		return 0
	case xNaN || x < y:
		return -1
	case yNaN || x > y:
		return 1
	}
	return 0
}
