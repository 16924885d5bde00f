package plugintest

// The checks of a stateful randomizer (sdk.Stateful, Description.Stateful):
// the longitudinal tree protocol of Erlingsson et al. (2019), whose
// declaration has Tree > 0 (accountant.Declaration: the law of one node's
// report, rows the node values -1, 0, +1; Changes is k). Its reports come
// from Step, so the checks that draw reports drive Step instead of
// Randomize (stateful_sampler.go, stateful_estimator.go,
// stateful_inputs.go); this file holds the declaration's checks and the
// law of a whole tree's transcript that the kit derives from the
// declaration alone.
//
// The protocol, as the kit reads a declaration (and as
// accountant/longitudinal.go states it): periods come in trees of
// H = Tree periods (aligned to multiples of H in the period index), with
// L = log2(H)+1 levels; node m of level h covers positions
// ((m-1)·2^(h-1), m·2^(h-1)] of the tree. At its first step in a tree a
// user draws j uniform in [1, k] and h uniform in [1, L], independently of
// its data. Its state is a bit per period, 0 before the tree; the value of
// a node is the sign of the user's j-th change (+1 for odd j, a step up
// from 0; -1 for even j) when that change lies in the node, else 0. At the
// end of each node of level h, and at no other period, the user sends one
// report, drawn from the declared row of the node's value. A transcript of
// a tree is the level and the outputs of its nodes, in order.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// MaxEnumeratedTree is the largest tree (periods per tree, Declaration.Tree)
// whose transcripts the kit enumerates: the whole-transcript level of the
// declaration (over all 2^Tree state sequences) and the chi-square test of
// the sampler's transcripts (up to 2^Tree + 2^(Tree/2) + ... cells) need a
// small tree. On a larger one those tests are skipped, with a message to
// run the kit on a small configuration of the same plugin as well.
const MaxEnumeratedTree = 8

// maxTranscriptCells bounds the number of distinct transcripts of one tree
// the kit enumerates (a node law with many outputs on a tree of
// MaxEnumeratedTree periods has too many).
const maxTranscriptCells = 1 << 17

// basePeriod is the period index of the first step of every user the kit
// steps: a multiple of every tree the accountant accepts
// (accountant.MaxTree), so that it starts a tree, and far enough from 0
// that earlier periods exist.
const basePeriod = 2 * accountant.MaxTree

// errNotStateful is the error of a step on a randomizer without Step.
var errNotStateful = errors.New("plugintest: the randomizer says it is stateful (Description.Stateful) but does not implement sdk.Stateful")

// step calls Step once, turning a panic into an error, and checks the
// shape of the answer: one report (nil for none) and one state per input.
func (v *verifier) step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reps, next [][]byte, err error) {
	st, ok := v.r.(sdk.Stateful)
	if !ok {
		return nil, nil, errNotStateful
	}
	err = guard(func() error {
		reps, next, err = st.Step(ctx, eps0, period, states, in)
		return err
	})
	if err == nil && (len(reps) != in.Len() || len(next) != in.Len()) {
		err = fmt.Errorf("plugintest: Step returned %d reports and %d states for %d inputs", len(reps), len(next), in.Len())
	}
	return reps, next, err
}

// stepAll steps categorical inputs in chunks of at most chunk users.
func (v *verifier) stepAll(ctx context.Context, eps0 float64, period int64, states [][]byte, in []string) (reps, next [][]byte, err error) {
	reps, next = make([][]byte, 0, len(in)), make([][]byte, 0, len(in))
	for lo := 0; lo < len(in); lo += chunk {
		hi := min(lo+chunk, len(in))
		r, n, err := v.step(ctx, eps0, period, states[lo:hi], sdk.Inputs{Categories: in[lo:hi]})
		if err != nil {
			return nil, nil, fmt.Errorf("users [%d,%d): %w", lo, hi, err)
		}
		reps, next = append(reps, r...), append(next, n...)
	}
	return reps, next, nil
}

// describeStateful adds the describe check's test of a stateful
// randomizer: it implements sdk.Stateful.
func (v *verifier) describeStateful(c *Check, d *sdk.Description) {
	if !d.Stateful {
		return
	}
	_, ok := v.r.(sdk.Stateful)
	c.expect(ok, "stateful", "Description.Stateful is set but the randomizer has no Step (sdk.Stateful)")
}

// treeProtocol is what the sampler and estimator checks need of a tree
// declaration.
type treeProtocol struct {
	tree, changes int
	node          [][]float64 // rows the node values -1, 0, +1
}

// treeOf returns the tree protocol declared at eps0, or why the sampler
// and estimator checks cannot run (a failure of the declaration check
// says more).
func (v *verifier) treeOf(ctx context.Context, eps0 float64) (*treeProtocol, string) {
	d, err := v.declare(ctx, eps0)
	if err != nil {
		return nil, fmt.Sprintf("Declare: %v", err)
	}
	if d.Tree == 0 {
		return nil, "the declaration has no tree (Declaration.Tree = 0): the kit steps only the tree protocol (see the declaration check)"
	}
	node, err := d.Node()
	if err != nil {
		return nil, fmt.Sprintf("not a valid tree declaration (see the declaration check): %v", err)
	}
	if node.Form != accountant.FormMatrix || node.Matrix == nil || node.Matrix.NumInputs() != 3 || node.Matrix.NumOutputs() < 1 {
		return nil, "the node law is not a matrix of 3 rows (see the declaration check)"
	}
	if d.Changes < 1 || d.Changes > d.Tree {
		return nil, fmt.Sprintf("Changes = %d outside [1, Tree = %d] (see the declaration check)", d.Changes, d.Tree)
	}
	if !v.twoStates() {
		return nil, "the randomizer's inputs are not two states (see the declaration check)"
	}
	return &treeProtocol{tree: d.Tree, changes: d.Changes, node: nodeRows(node.Matrix)}, ""
}

// isTree reports whether the randomizer is a stateful tree protocol: it
// says it is stateful, takes two states, and declares a tree at eps0.
func (v *verifier) isTree(ctx context.Context, eps0 float64) bool {
	if !v.desc.Stateful || !v.twoStates() {
		return false
	}
	d, err := v.declare(ctx, eps0)
	return err == nil && d.Tree > 0
}

// twoStates reports whether the randomizer takes the two states of a tree
// protocol: two categories (off, on) and no other bucket.
func (v *verifier) twoStates() bool {
	return v.desc.Input == sdk.InputCategorical && len(v.desc.Categories) == 2 && v.desc.Other == ""
}

// treeDeclaration runs the declaration check of a stateful randomizer or
// of a tree declaration (Tree > 0), which the accountant's Decompose
// refuses by design (accountant.ErrLongitudinal). It returns false when
// the declaration has no tree, for the caller to check it as an ordinary
// one.
func (v *verifier) treeDeclaration(c *Check, name string, eps0 float64, d *accountant.Declaration) bool {
	switch {
	case d.Tree == 0:
		c.fail(name+" tree", "a stateful randomizer declares no tree protocol (Declaration.Tree = 0): the accountant would compose its per-period reports as independent, which a per-user state kept across periods makes unsound; the accountant and the kit know one stateful protocol, the tree protocol (accountant.Longitudinal)")
		return false
	case !v.desc.Stateful:
		c.fail(name+" stateful", "the declaration is a tree protocol over %d periods (Tree > 0) but Description.Stateful is not set: a tree protocol keeps per-user state and reports through Step", d.Tree)
	}
	node, err := d.Node()
	if err != nil {
		c.fail(name+" tree", "%v", err)
		return true
	}
	c.pass(name+" tree", "a tree protocol over %d periods", d.Tree)
	c.expect(d.Changes >= 1 && d.Changes <= d.Tree, name+" changes", "Changes = %d, must be in [1, Tree = %d]: the changes per tree a user reports one of (k)", d.Changes, d.Tree)
	c.expect(v.desc.Span == int64(d.Tree), name+" span", "Description.Span = %d, Declaration.Tree = %d: an estimate merges the statistics of the periods of its tree so far, so Span must be Tree", v.desc.Span, d.Tree)
	c.expect(v.twoStates(), name+" states", "a tree protocol's inputs are two states, off and on: Description has %v input, %d categories, other bucket %q", v.desc.Input, len(v.desc.Categories), v.desc.Other)
	if !c.expect(d.Eps0 > 0, name+" transcript eps0", "Eps0 = %v: a tree declaration states the whole transcript's LDP level, which must be > 0", d.Eps0) {
		return true
	}
	if node.Form != accountant.FormMatrix || node.Matrix == nil || node.Matrix.NumInputs() != 3 {
		rows := 0
		if node.Matrix != nil {
			rows = node.Matrix.NumInputs()
		}
		c.fail(name+" node law", "form %q with %d rows: the law of a node's report is a matrix of 3 rows, the node values -1, 0, +1 (columns the report's outputs)", node.Form, rows)
		return true
	}
	// The kit's own bounds run even when the accountant rejects the node
	// law: they say whether the whole transcript keeps the declared level.
	if _, err := accountant.Decompose(node); err != nil {
		c.fail(name+" valid", "the accountant rejects the node law: %v", err)
	} else {
		c.pass(name+" valid", "the accountant accepts the node law (Declaration.Node)")
	}
	m := node.Matrix
	maxRatio, at := 1.0, -1
	for y := range m.NumOutputs() {
		lo, hi := math.Min(m.At(0, y), math.Min(m.At(1, y), m.At(2, y))), math.Max(m.At(0, y), math.Max(m.At(1, y), m.At(2, y)))
		if hi > 0 && hi/lo > maxRatio {
			maxRatio, at = hi/lo, y
		}
	}
	v.ratioTest(c, name+" node", d.Eps0, maxRatio, fmt.Sprintf("output %d", at))
	v.transcriptLevel(c, name, d)
	return true
}

// transcriptLevel checks the declared whole-transcript level by exact
// enumeration: the law of a tree's transcript under every state sequence
// of the tree (2^Tree of them), derived from the declaration alone
// (treeLaw), and the largest ratio of two sequences' probabilities of one
// transcript, which must be at most e^Eps0 (relative tolerance ratioTol).
// Eps0 is what the accountant takes the transcript's level to be
// (accountant.Longitudinal, the proof's point 6), so a node law or a k
// under which the transcript leaks more is caught here.
func (v *verifier) transcriptLevel(c *Check, name string, d *accountant.Declaration) {
	tname := name + " transcript level"
	if d.Tree > MaxEnumeratedTree {
		c.skip(tname, "a tree of %d periods has too many state sequences to enumerate: run the kit on a small configuration of this plugin too (Tree <= %d), where the declared whole-transcript level is checked exactly", d.Tree, MaxEnumeratedTree)
		return
	}
	if d.Changes < 1 || d.Changes > d.Tree {
		c.skip(tname, "Changes = %d is not a valid k (see the changes test)", d.Changes)
		return
	}
	law, err := newTreeLaw(&treeProtocol{tree: d.Tree, changes: d.Changes, node: nodeRows(d.Matrix)})
	if err != nil {
		c.skip(tname, "%v", err)
		return
	}
	hi, lo := make([]float64, law.cells), make([]float64, law.cells)
	for i := range lo {
		lo[i] = math.Inf(1)
	}
	for s := range 1 << d.Tree {
		x := make(stateSequence, d.Tree)
		for t := range x {
			x[t] = s >> t & 1
		}
		for i, q := range law.law(x) {
			hi[i], lo[i] = max(hi[i], q), min(lo[i], q)
		}
	}
	worst, at := 1.0, -1
	for i := range hi {
		if hi[i] > 0 && !(hi[i]/lo[i] <= worst) {
			worst, at = hi[i]/lo[i], i
		}
	}
	t := Test{Name: tname, Statistic: math.Log(worst), Threshold: d.Eps0}
	if worst <= math.Exp(d.Eps0)*(1+ratioTol) {
		t.Status = Pass
		t.Message = fmt.Sprintf("over the %d state sequences of a tree of %d periods (k = %d), the largest ratio of two sequences' probabilities of a transcript is e^%.6g <= e^Eps0", 1<<d.Tree, d.Tree, d.Changes, math.Log(worst))
	} else {
		t.Status = Fail
		t.Message = fmt.Sprintf("over the %d state sequences of a tree of %d periods (k = %d), the transcript %s has probabilities %.6g and %.6g, a ratio e^%.6g above the declared whole-transcript level e^%g", 1<<d.Tree, d.Tree, d.Changes, law.describe(at), hi[at], lo[at], math.Log(worst), d.Eps0)
	}
	c.add(t)
}

// nodeRows returns the rows of a node law (the node values -1, 0, +1).
func nodeRows(m *accountant.Matrix) [][]float64 {
	rows := make([][]float64, m.NumInputs())
	for x := range rows {
		rows[x] = make([]float64, m.NumOutputs())
		for y := range rows[x] {
			rows[x][y] = m.At(x, y)
		}
	}
	return rows
}

// stateSequence is a user's state (0 off, 1 on) at each period of a tree,
// from its first.
type stateSequence []int

// String returns the states as digits, e.g. "0110".
func (x stateSequence) String() string {
	var b strings.Builder
	for _, s := range x {
		b.WriteByte(byte('0' + s))
	}
	return b.String()
}

// changes returns the positions (1-based) of the changes of x, from a
// state of 0 before the tree.
func (x stateSequence) changes() []int {
	var out []int
	prev := 0
	for t, s := range x {
		if s != prev {
			out = append(out, t+1)
		}
		prev = s
	}
	return out
}

// followed returns the state at position p (1-based) as far as the first
// k changes go: the state at p when it changed at most k times by p, else
// the state the k-th change left (k odd: on).
func (x stateSequence) followed(p, k int) int {
	n := 0
	for _, t := range x.changes() {
		if t <= p {
			n++
		}
	}
	if n <= k {
		return x[p-1]
	}
	return k % 2
}

// sequences returns the state sequences over n periods the kit steps:
// off throughout, on from the start (a change at the first period),
// on from the middle, on in the middle half (two changes), and
// alternating from on and from off (n and n-1 changes: more than k
// unless k is close to n). Duplicates (small n) are dropped.
func sequences(n int) []stateSequence {
	gen := []func(t int) int{
		func(int) int { return 0 },
		func(int) int { return 1 },
		func(t int) int { return b2i(t >= n/2) },
		func(t int) int { return b2i(t >= n/4 && t < n-n/4) },
		func(t int) int { return (t + 1) % 2 },
		func(t int) int { return t % 2 },
	}
	var out []stateSequence
	seen := map[string]bool{}
	for _, g := range gen {
		x := make(stateSequence, n)
		for t := range x {
			x[t] = g(t)
		}
		if s := x.String(); !seen[s] {
			seen[s] = true
			out = append(out, x)
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// treeLaw is the law of one tree's transcript that a tree declaration
// defines (the protocol at the top of this file), for small trees. Its
// cells are the transcripts: level h (1..levels), then the outputs
// y_1..y_n of the level's n = tree/2^(h-1) nodes, cell
// offset[h-1] + sum_m y_m·outputs^(m-1).
type treeLaw struct {
	*treeProtocol
	levels, outputs int
	offset          []int
	cells           int
}

func newTreeLaw(p *treeProtocol) (*treeLaw, error) {
	t := &treeLaw{treeProtocol: p, levels: bits.Len(uint(p.tree)), outputs: len(p.node[0])}
	for h := 1; h <= t.levels; h++ {
		t.offset = append(t.offset, t.cells)
		n := p.tree >> (h - 1)
		size := 1
		for range n {
			size *= t.outputs
			if size > maxTranscriptCells {
				return nil, fmt.Errorf("a tree of %d periods with %d outputs per node has more than %d transcripts, too many to enumerate: run the kit on a smaller configuration", p.tree, t.outputs, maxTranscriptCells)
			}
		}
		t.cells += size
		if t.cells > maxTranscriptCells {
			return nil, fmt.Errorf("a tree of %d periods with %d outputs per node has more than %d transcripts, too many to enumerate: run the kit on a smaller configuration", p.tree, t.outputs, maxTranscriptCells)
		}
	}
	return t, nil
}

// law returns the probability of every transcript under the state
// sequence x (one state per period of the tree).
func (t *treeLaw) law(x stateSequence) []float64 {
	out := make([]float64, t.cells)
	changes := x.changes()
	w := 1 / float64(t.changes*t.levels)
	for h := 1; h <= t.levels; h++ {
		span := 1 << (h - 1)
		n := t.tree / span
		for j := 1; j <= t.changes; j++ {
			vals := make([]int, n)
			if j <= len(changes) {
				vals[(changes[j-1]-1)/span] = 1 - 2*((j+1)%2) // +1 odd j, -1 even j
			}
			// The product law of the n nodes' outputs, node m the digit
			// of weight outputs^(m-1).
			d := []float64{w}
			for m := range n {
				row := t.node[vals[m]+1]
				nd := make([]float64, len(d)*t.outputs)
				for y, p := range row {
					for i, q := range d {
						nd[y*len(d)+i] = q * p
					}
				}
				d = nd
			}
			for i, q := range d {
				out[t.offset[h-1]+i] += q
			}
		}
	}
	return out
}

// describe names a cell: "level h, outputs y1 y2 ...".
func (t *treeLaw) describe(cell int) string {
	if cell < 0 || cell >= t.cells {
		return "?"
	}
	h := t.levels
	for h > 1 && t.offset[h-1] > cell {
		h--
	}
	code := cell - t.offset[h-1]
	var b strings.Builder
	fmt.Fprintf(&b, "level %d, outputs", h)
	for range t.tree >> (h - 1) {
		fmt.Fprintf(&b, " %d", code%t.outputs)
		code /= t.outputs
	}
	return b.String()
}
