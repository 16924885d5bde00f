package plugintest

import (
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// lawTol is the tolerance on sums and logs of the enumerated laws: sums
// of at most a few thousand products of a dozen factors, a few ulps each.
const lawTol = 1e-12

// TestTreeLaw checks the kit's law of a tree's transcript (treeLaw, from
// the protocol's definition) against the accountant's statement of the
// transcript's level (accountant.TranscriptLocalEps, the proof's point 6):
// for randomized response on the node value (accountant.NodeMatrix) every
// sequence's law sums to 1, the largest ratio between two sequences is at
// most the stated level, and with k = 1 (the level is then not mixed over
// j) it is attained.
func TestTreeLaw(t *testing.T) {
	for _, c := range []struct {
		tree, k int
		eps0    float64
	}{{1, 1, 1.5}, {2, 1, 3}, {2, 2, 0.5}, {4, 1, 1}, {4, 2, 0.7}, {8, 1, 2}, {8, 3, 0.3}} {
		law, err := newTreeLaw(&treeProtocol{tree: c.tree, changes: c.k, node: accountant.NodeMatrix(c.eps0)})
		if err != nil {
			t.Fatal(err)
		}
		hi, lo := make([]float64, law.cells), make([]float64, law.cells)
		for i := range lo {
			lo[i] = math.Inf(1)
		}
		for s := range 1 << c.tree {
			x := make(stateSequence, c.tree)
			for p := range x {
				x[p] = s >> p & 1
			}
			sum := 0.0
			for i, q := range law.law(x) {
				sum += q
				hi[i], lo[i] = max(hi[i], q), min(lo[i], q)
			}
			if math.Abs(sum-1) > lawTol {
				t.Errorf("tree %d k %d: the law of %s sums to %v", c.tree, c.k, x, sum)
			}
		}
		worst := 0.0
		for i := range hi {
			worst = max(worst, math.Log(hi[i]/lo[i]))
		}
		want := accountant.TranscriptLocalEps(c.tree, c.eps0)
		if worst > want+lawTol || (c.k == 1 && worst < want-lawTol) {
			t.Errorf("tree %d k %d eps0 %g: level %v, accountant.TranscriptLocalEps %v", c.tree, c.k, c.eps0, worst, want)
		}
	}
}

// TestSequences checks the state sequences the kit steps: on a tree of 8
// the six families are distinct, one is on from the start, and some
// change more often than k = 2; followed freezes a sequence at its k-th
// change.
func TestSequences(t *testing.T) {
	seqs := sequences(8)
	if len(seqs) != 6 {
		t.Fatalf("%d sequences: %v", len(seqs), seqs)
	}
	onAtStart, many := false, false
	for _, x := range seqs {
		onAtStart = onAtStart || x[0] == 1
		many = many || len(x.changes()) > 2
	}
	if !onAtStart || !many {
		t.Errorf("sequences %v: on from the start %v, more than 2 changes %v", seqs, onAtStart, many)
	}
	x := stateSequence{1, 0, 1, 1}
	for p, want := range []int{1, 0, 0, 0} { // k = 2: frozen off after the change at 2
		if got := x.followed(p+1, 2); got != want {
			t.Errorf("%s followed to %d with k = 2: %d, want %d", x, p+1, got, want)
		}
	}
	if got := x.followed(4, 3); got != 1 {
		t.Errorf("%s followed to 4 with k = 3: %d, want 1", x, got)
	}
}
