package longitudinal

import "math/bits"

// The dyadic tree over the periods of one tree, as in Erlingsson et al.
// (2019, Section 3): positions 1..H (H a power of two), levels 1..L with
// L = log2(H)+1 (leaves at level 1), node m of level h covering positions
// ((m-1)·2^(h-1), m·2^(h-1)] and ending at m·2^(h-1).

// tree is the shape of one tree.
type tree struct {
	periods int // H
	levels  int // L
}

func newTree(periods int) tree {
	return tree{periods: periods, levels: bits.Len(uint(periods))}
}

// span returns the number of positions a node of level h covers.
func span(h int) int { return 1 << (h - 1) }

// nodes returns the number of nodes of level h.
func (t tree) nodes(h int) int { return t.periods >> (h - 1) }

// size returns the number of nodes of the tree, 2H-1.
func (t tree) size() int { return 2*t.periods - 1 }

// index returns the position of node (h, m) in a flat array of all nodes,
// level by level from the leaves.
func (t tree) index(h, m int) int {
	// Levels 1..h-1 hold H + H/2 + ... + H/2^(h-2) = 2H - 2H/2^(h-1) nodes.
	return 2*t.periods - 2*t.nodes(h) + m - 1
}

// node returns the (h, m) of a flat index, the inverse of index.
func (t tree) node(i int) (h, m int) {
	for h = 1; h <= t.levels; h++ {
		if i < t.nodes(h) {
			return h, i + 1
		}
		i -= t.nodes(h)
	}
	panic("longitudinal: node index out of range")
}

// end returns the last position of node (h, m).
func end(h, m int) int { return m * span(h) }

// cover returns the nodes whose spans partition positions [1, p], one per
// set bit of p, largest first (Algorithm 2's set of at most L nodes).
func (t tree) cover(p int) [][2]int {
	var out [][2]int
	pos := 0
	for h := t.levels; h >= 1; h-- {
		s := span(h)
		if pos+s <= p {
			out = append(out, [2]int{h, pos/s + 1})
			pos += s
		}
	}
	return out
}
