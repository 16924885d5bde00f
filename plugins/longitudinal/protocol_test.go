package longitudinal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// The client (step.go, state.go) against the protocol the accountant's
// proof assumes (accountant/longitudinal.go, point 3), checks written in a
// second review: per
// tree one (j, h) drawn at the user's first step in the tree and kept; a
// report exactly at the ends of the level-h nodes of the periods stepped;
// the node value the sign (-1)^(j+1) of the j-th change of the tree's
// state sequence (0 before the tree, the last input carried over periods
// not stepped, also across trees) when that change lies in the node, else
// 0. Then two data differ in at most two reports per tree, each between 0
// and that sign. TestStepMatchesDefinition samples whole trees stepped
// from their first period only; TestStepMatchesProtocolEnumerated
// enumerates gaps, first steps mid-tree, carries across trees and changes
// past k.

// scriptSource returns the scripted words first, then words of a PCG.
type scriptSource struct {
	words []uint64
	used  int
	r     *rand.Rand
}

func (s *scriptSource) Uint64() uint64 {
	if s.used < len(s.words) {
		s.used++
		return s.words[s.used-1]
	}
	return s.r.Uint64()
}

// reviewReference returns, from the definition, the node value of (h, m)
// of tree tr for inputs x (x[p] for the periods stepped, present[p]) and
// change j: the effective sequence of the tree (the last input stepped
// carried over periods not stepped, 0 before the first step), its changes
// from 0 before the tree, the j-th one's position, its sign if in the node.
func reviewReference(H int, present []bool, x []int, tr, j, h, m int) int {
	last := 0
	eff := make([]int, len(x))
	for p := range x {
		if present[p] {
			last = x[p]
		}
		eff[p] = last
	}
	prev, count, jPos := 0, 0, 0
	for pos := 1; pos <= H; pos++ {
		p := tr*H + pos - 1
		if eff[p] != prev {
			count++
			if count == j {
				jPos = pos
			}
		}
		prev = eff[p]
	}
	if jPos == 0 || jPos <= (m-1)*span(h) || jPos > m*span(h) {
		return 0
	}
	if j%2 == 1 {
		return 1
	}
	return -1
}

// TestStepMatchesProtocolEnumerated enumerates, for small trees over
// several trees, every set of periods stepped and every input on them, and
// several (j, h) per tree (scripted as the first words the randomizer
// draws at a fresh state), and checks each step of the real client: new
// choices only at the first step in a tree, reports exactly at the ends of
// level-h nodes of the periods stepped with the node's label, and the node
// value (from the stored state) equal to the definition's.
func TestStepMatchesProtocolEnumerated(t *testing.T) {
	const eps0 = 1.0
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct{ H, k, trees int }{{4, 3, 2}, {2, 2, 3}, {1, 1, 5}} {
		r, err := New(Options{Tree: c.H, Changes: c.k})
		if err != nil {
			t.Fatal(err)
		}
		L := r.tree.levels
		P := c.H * c.trees
		base := int64(1000 * c.H) // a tree boundary
		var choices [][2]int
		for j := 1; j <= c.k; j++ {
			for h := 1; h <= L; h++ {
				choices = append(choices, [2]int{j, h})
			}
		}
		checked := 0
		for mask := 1; mask < 1<<P; mask++ {
			present := make([]bool, P)
			var stepped []int
			for p := range P {
				present[p] = mask>>p&1 == 1
				if present[p] {
					stepped = append(stepped, p)
				}
			}
			for in := 0; in < 1<<len(stepped); in++ {
				x := make([]int, P)
				for i, p := range stepped {
					x[p] = in >> i & 1
				}
				for ci := range choices {
					// Tree tr's choices: rotate through the list so trees differ.
					pick := func(tr int) (int, int) {
						ch := choices[(ci+tr*(1+len(choices)/2))%len(choices)]
						return ch[0], ch[1]
					}
					var st []byte
					for _, p := range stepped {
						tr, pos := p/c.H, p%c.H+1
						j, h := pick(tr)
						fresh := st == nil || p/c.H != stepped[indexOf(stepped, p)-1]/c.H
						src := &scriptSource{r: rng}
						if fresh {
							src.words = []uint64{uint64(j - 1), uint64(h - 1)}
						}
						r.src = src
						reps, next, err := r.Step(ctx, eps0, base+int64(p), [][]byte{st}, sdk.Inputs{Categories: labels(x[p])})
						if err != nil {
							t.Fatalf("H=%d periods %v inputs %v: step %d: %v", c.H, stepped, x, p, err)
						}
						if fresh && src.used < 2 {
							t.Fatalf("H=%d: a fresh state at period %d drew %d words", c.H, p, src.used)
						}
						s, err := decodeState(next[0], r.tree, c.k, eps0)
						if err != nil {
							t.Fatal(err)
						}
						if s.j != j || s.h != h {
							t.Fatalf("H=%d periods %v inputs %v: at period %d (fresh %v) choices (%d, %d), want (%d, %d)", c.H, stepped, x, p, fresh, s.j, s.h, j, h)
						}
						wantReport := pos%span(h) == 0
						if (reps[0] != nil) != wantReport {
							t.Fatalf("H=%d level %d period %d: report %v, want one: %v", c.H, h, p, reps[0], wantReport)
						}
						if wantReport {
							m := pos / span(h)
							if int(reps[0][0]) != h || int(reps[0][1])<<8|int(reps[0][2]) != m {
								t.Fatalf("H=%d: report %v labelled, want (%d, %d)", c.H, reps[0], h, m)
							}
							got := s.value(h, m)
							want := reviewReference(c.H, present, x, tr, j, h, m)
							if got != want {
								t.Fatalf("H=%d k=%d periods %v inputs %v (j=%d h=%d): node (%d,%d) of tree %d has value %d, the definition %d", c.H, c.k, stepped, x, j, h, h, m, tr, got, want)
							}
							checked++
						}
						st = next[0]
					}
				}
			}
		}
		t.Logf("H=%d k=%d over %d trees: %d node reports checked", c.H, c.k, c.trees, checked)
	}
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestLevelsUniformAmongSenders checks point 5's model on the real
// client: among the users that send in a period, levels are uniform over
// the r levels whose nodes end then (r = 1 + trailing zeros of the
// position), whether the users started at the tree's first period or in
// the middle of the tree.
func TestLevelsUniformAmongSenders(t *testing.T) {
	const H, users = 16, 20000
	r, err := New(Options{Tree: H, Changes: 2, Rand: seeded(31)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ first, at int }{{1, 16}, {1, 8}, {1, 12}, {5, 16}, {9, 14}} {
		states := make([][]byte, users)
		var counts []int64
		for pos := c.first; pos <= c.at; pos++ {
			in := make([]string, users)
			for i := range in {
				in[i] = labels(i % 2)[0]
			}
			reps, next, err := r.Step(ctx, 1, int64(32*H+pos-1), states, sdk.Inputs{Categories: in})
			if err != nil {
				t.Fatal(err)
			}
			states = next
			if pos != c.at {
				continue
			}
			rl := 1
			for pos%(1<<rl) == 0 {
				rl++
			}
			counts = make([]int64, rl)
			for _, rep := range reps {
				if rep == nil {
					continue
				}
				if int(rep[0]) > rl {
					t.Fatalf("position %d: a report of level %d, only %d levels end there", pos, rep[0], rl)
				}
				counts[rep[0]-1]++
			}
		}
		probs := make([]float64, len(counts))
		for i := range probs {
			probs[i] = 1 / float64(len(counts))
		}
		if len(counts) > 1 {
			ldptest.CheckChiSquare(t, fmt.Sprintf("levels of senders at position %d (first step %d)", c.at, c.first), counts, probs, 1e-4)
		}
	}
}

// TestStateMaxChangesStaysValid: with k = MaxChanges = 255 a state counts
// changes up to k+1 = 256 in one byte (state.go: byte(s.changes)), which
// wraps to 0; decodeState then refuses the state (changes < j with the
// j-th change recorded), and the user's metric is stuck (the SDK never
// replaces a refused state). A user whose state flips every period of a
// tree of 256 reaches it. Fails until the counter is capped at k (or
// stored wider, or MaxChanges lowered to 254).
func TestStateMaxChangesStaysValid(t *testing.T) {
	const H = 256
	r, err := New(Options{Tree: H, Changes: MaxChanges, Rand: seeded(41)})
	if err != nil {
		t.Fatal(err)
	}
	var st []byte
	for p := 0; p <= H; p++ {
		_, next, err := r.Step(ctx, 1, int64(10*H+p), [][]byte{st}, sdk.Inputs{Categories: labels((p + 1) % 2)})
		if err != nil {
			if errors.Is(err, sdk.ErrBadState) {
				t.Fatalf("period %d of the tree (after %d changes): the client refuses its own state: %v", p, p, err)
			}
			t.Fatal(err)
		}
		st = next[0]
	}
}
