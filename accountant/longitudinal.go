package accountant

// The central guarantee of the longitudinal tree protocol of Erlingsson,
// Feldman, Mironov, Raghunathan, Talwar and Thakurta (SODA 2019, Section 3,
// Algorithms 1 and 2; plugins/longitudinal), docs/time.md §5.
//
// The protocol. Periods are grouped in trees of H = 2^(L-1) periods. At the
// start of a tree every user draws, independently of its data, a change
// index j uniform in [1, k] and a level h uniform in [1, L]. The user's
// state is a bit per period (0 before the tree); its j-th change (a step
// from 0 to 1 or back, sign +1 or -1) is the only one it ever reports. At
// the end of each node of level h (node m covers periods ((m-1)2^(h-1),
// m 2^(h-1)]) it sends one report: randomized response on the node's value
// v in {-1, 0, +1} (the sign of the j-th change when that change falls in
// the node, else 0): b = v with probability e^eps0/(e^eps0+1) when v != 0,
// b uniform in {-1, +1} when v = 0, labelled with (h, m). Nothing else.
//
// Proof sketch (the bounds below are sound).
//
//  1. Condition on every user's (j, h): they are independent of the data,
//     so a bound that holds for every value of them holds for the mixture
//     (the hockey-stick divergence is jointly convex: H(E P_s || E Q_s) <=
//     E H(P_s || Q_s), the same s-distribution on both sides).
//  2. Given (j, h), a user's reports in distinct periods use independent
//     coins, so each period is its own shuffled mechanism and the window
//     is their composition (independent, not adaptive: the others' inputs
//     are fixed, their own (j, h) too).
//  3. Neighbouring data (docs/time.md §5, "What the guarantee protects"): two state
//     histories of the victim that differ only in the periods of one window
//     of W consecutive periods, the state of a period being the value the
//     SDK steps for it. Which periods the victim steps is the same under
//     both (public, as for every metric: the SDK steps a state metric in
//     every period from its first value on, and steps a period whose
//     value was recorded even when it is too late to send its report, so
//     that a skipped period holds the last stepped value). A tree's
//     changes depend only on the states of its own periods (the state is 0
//     before the tree: a state of 1 in its first period is its first
//     change), so a tree the window does not meet is the same under both.
//     (A run resuming after another plan steps, silently, the period after
//     its last step with the value carried since, which can lie before the
//     window; the histories then differ before a only in that silent step,
//     which sends nothing, and its change holds the carried value, which
//     differs only when the window holds that value's period: the reports
//     it changes are sent from the run's return on, at periods >= a, in a
//     tree the window meets; docs/time.md §5.)
//     In a tree the window meets, the changes before the window's first
//     period a are the same under both, so the victim's j-th change lies
//     at the same position under both, or at positions >= a under both:
//     anywhere from a to the tree's end, after the window included (fewer
//     changes inside the window push it later; 0,0,1,1 against 0,1,1,1
//     moves a change from p+1 to p, which at level 1 are two nodes). At
//     the victim's level it lies in one node or in none (fewer than j
//     changes), and its sign is fixed by j (the state starts at 0, so odd
//     changes go up and even ones down): s = (-1)^(j+1) under both data.
//     So at most two of the tree's node reports differ, each between 0
//     and s (one from 0 to s, the other from s to 0, or one alone), and
//     each is sent at a period >= a of that tree. Every other report of
//     the victim has the same law under both data, and a round with
//     identical laws composes as the identity. Per tree the loss is at
//     most two rounds of the pair (0, s), in either order (the engine
//     bounds both orders of a pair, and (0, -1) has the divergences of
//     (0, +1) by the symmetry b -> -b). With H = 1 a tree has one node:
//     one round. A window of W consecutive periods meets at most T =
//     ceil((W-1)/H) + 1 trees (T = W when H = 1): 2T rounds of (0, +1)
//     (T when H = 1), however short the window, one less when it can meet
//     T trees only by entering the first at its last period
//     (windowRounds). The differing reports are
//     sent from the window's first period to the end of the last tree it
//     meets: at most W + H - 1 periods (leakPeriods), one report per
//     period (distinct nodes of one level end at distinct periods).
//     exact_window_test.go checks this count against the exact divergence
//     of every pair of histories of small trees.
//  4. In a period's batch, the reports that blanket the victim's are those
//     of its level-mates: others at level h, whose reports are randomized
//     response on a node value of theirs. Randomized response on {-1, 0,
//     +1} has blanket mass r_b = min_v P(b | v) = 1/(e^eps0+1) per output,
//     and the atoms of both pairs are declared with that full-domain
//     blanket. Reports of other levels carry another label: the adversary
//     can simulate them (the others' data is fixed), so they are dropped.
//     For randomized response (to 1e-9 per entry) each round is also bounded
//     exactly (node_exact.go): the view is the count of +1 bits among the
//     victim and its m-1 mates; the divergence is convex in each mate's
//     bit probability, so the worst mates are each at -1 or +1 (j of them
//     at +1, every j in [0, m-1] taken, (0, -1) being (0, +1) mirrored),
//     and the largest exact profile over j and both orientations, computed
//     with certified rounding and tail bounds, is the profile of a pair
//     that dominates the round. At each sampled loss the smaller of it and
//     the blanket bound is used (both bound that profile), up to
//     NodeExactCap mates; above it the blanket bound alone.
//  5. The number of level-mates: with exact counts known (Mates: the
//     smallest count of one level's reports in a batch of the periods of
//     point 3;
//     levels are independent of the data, so conditioning on them is
//     conditioning on public randomness), the bound uses it. Ahead of time, in a
//     batch of N reports of a period at which r levels end (r = L in the
//     worst period, the tree's last), each other sender is at the victim's
//     level with probability 1/r (its level is uniform over the r levels
//     that send then), so the mates X >= Binomial(N-1, 1/r)
//     stochastically. The bound conditions on X >= m0 in every period in
//     which a differing report can be sent (point 3: at most W + H - 1 of
//     them, fixed before the data) and pays (W + H - 1) Pr[X < m0] in
//     delta (union bound).
//     The true divergence does not increase with X (a batch with one more
//     sender is a post-processing of the smaller one: add a simulated
//     report, reshuffle), so X = m0 is the worst case of the rest.
//  6. The whole transcript of a tree is eps0-LDP (Theorem 5): when the
//     change moves from node A to node B, an output's probability changes
//     by a factor P(b_A | s)/P(b_A | 0) at A and P(b_B | 0)/P(b_B | s) at
//     B, whose product is at most e^eps0 (the factors are 2e/(e+1) or
//     2/(e+1) and their inverses). One node alone changes by at most
//     (e^eps0+1)/2 <= e^eps0. Note that each round of point 3 alone is
//     only log((e^eps0+1)/2)-LDP, more than eps0/2: the composition of
//     two such rounds in the same orientation, which point 3 bounds (the
//     engine's dominating pair covers both orientations of each round),
//     exceeds eps0 locally, so the local cap is applied separately.
//     When every period's reports of the same users are shuffled in one
//     batch and every user sends every report its level calls for, each period's batch is a post-processing of one
//     shuffle of whole transcripts (reshuffle each period of that view),
//     so the generic amplification of an eps0-LDP randomizer at the number
//     of users U bounds a tree, composed over T trees. That precondition
//     cannot be checked from the batches (several batches per period, or a
//     user offline in one period, break it: the adversary knows who is in
//     which batch), so callers pass Users = 0 unless their deployment
//     guarantees it.
//
// The result is the smaller of the bounds that apply; each is sound, so
// their minimum is. The local bound of point 6 over T trees caps both.

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// MaxTree is the largest tree (periods per tree) Longitudinal accepts
// (declare.MaxTree).
const MaxTree = declare.MaxTree

// longitudinalTailShare is the share of delta the level-count tail may
// take when mates are not known exactly.
const longitudinalTailShare = 0.05

// Longitudinal describes one user's reports of a longitudinal tree protocol
// over a window of periods; see the proof at the top of longitudinal.go.
type Longitudinal struct {
	// Tree is the number of periods per tree, a power of two in
	// [1, MaxTree]. Required.
	Tree int
	// Eps0 is the local budget of one node's randomized response, which is
	// also the whole transcript's LDP level. Required.
	Eps0 float64
	// Periods is the window's length in periods. Required, >= 1.
	Periods int
	// Batch is the smallest batch a period's reports of this metric are
	// shuffled in (all levels that send then together), over the periods
	// from the window's first to the end of the last tree it meets (the
	// reports a change in the window can reach, proof point 3); the bound
	// infers the level-mates binomially (point 5). Ignored when Mates is
	// set.
	Batch int
	// Mates is the smallest number of reports of one level in a batch of
	// those periods (the victim included), when known exactly.
	Mates int
	// Users, when > 0, is the number of users whose whole transcripts are
	// shuffled together in every period (see the proof's point 6 for when
	// that holds); 0 leaves the transcript bound out.
	Users int
	// Node is the law of one node's report at Eps0, rows the node values
	// -1, 0, +1 (a declaration's matrix). Defaults to randomized response,
	// NodeMatrix(Eps0).
	Node [][]float64
}

// LongitudinalResult is the guarantee of a Longitudinal.
type LongitudinalResult struct {
	// Upper is the sound bound: the smallest of PerPeriod, Transcript and
	// the local bound Trees*TranscriptLocalEps(Tree, Eps0).
	Upper float64
	// PerPeriod is the bound through the per-period shuffled reports
	// (points 1-5 of the proof).
	PerPeriod float64
	// Transcript is the bound through the whole transcripts' LDP level
	// (point 6); +Inf when Users is 0.
	Transcript float64
	// Trees is the number of trees the window can meet.
	Trees int
	// Levels is the number of levels of a tree, log2(Tree)+1.
	Levels int
	// Mates is the number of level-mates (the victim included) the
	// per-period bound assumes.
	Mates int
	// Tail is the part of delta the per-period bound spends on fewer mates
	// (0 when Mates was given).
	Tail float64
	// Local is the local bound: Trees times the level of one tree's
	// transcript (TranscriptLocalEps for randomized response), plus the
	// other parts' local levels.
	Local float64
}

// treeLevels returns the number of levels of a tree of the given number
// of periods: log2(tree) + 1.
func treeLevels(tree int) int { return bits.Len(uint(tree)) }

// TreesInWindow returns the largest number of trees of the given size that
// a window of consecutive periods meets: ceil((periods-1)/tree) + 1, and no
// more than periods.
func TreesInWindow(tree, periods int) int {
	t := (periods-1+tree-1)/tree + 1
	return min(t, periods)
}

func (l Longitudinal) check() error {
	if l.Tree < 1 || l.Tree > MaxTree || l.Tree&(l.Tree-1) != 0 {
		return argError("longitudinal tree", l.Tree, fmt.Sprintf("a power of two in [1, %d]", MaxTree))
	}
	if err := checkEps0(l.Eps0); err != nil {
		return err
	}
	if l.Periods < 1 || l.Periods > MaxRounds {
		return argError("longitudinal periods", l.Periods, fmt.Sprintf("in [1, %d]", MaxRounds))
	}
	if l.Mates == 0 {
		if err := checkN(l.Batch); err != nil {
			return fmt.Errorf("longitudinal batch: %w", err)
		}
	} else if err := checkN(l.Mates); err != nil {
		return fmt.Errorf("longitudinal mates: %w", err)
	}
	if l.Node != nil {
		if len(l.Node) != 3 {
			return argError("longitudinal node law rows", len(l.Node), "3 (node values -1, 0, +1)")
		}
		if lv := transcriptLevel(l.Tree, l.Node); lv > l.Eps0*(1+1e-12) {
			return fmt.Errorf("%w: a tree's whole transcript under the node law is %.6g-LDP, more than eps0 = %g", ErrInvalidDeclaration, lv, l.Eps0)
		}
	}
	if l.Users != 0 {
		if err := checkN(l.Users); err != nil {
			return fmt.Errorf("longitudinal users: %w", err)
		}
	}
	return nil
}

// NodeMatrix is declare.NodeMatrix: the law of one node's report at eps0.
func NodeMatrix(eps0 float64) [][]float64 { return declare.NodeMatrix(eps0) }

// nodeStep returns the declaration of the pairs (0, +1) and (0, -1) of the
// proof's point 3 for a node law (rows -1, 0, +1), with the full-domain
// blanket r_y = min_v P(y | v) (others at the level may hold any value).
// For randomized response both pairs have the divergences of (0, +1):
// r = 1/(e^eps0+1) per output.
func nodeStep(eps0 float64, node [][]float64) (*Declaration, error) {
	if node == nil {
		node = NodeMatrix(eps0)
	}
	if len(node) != 3 {
		return nil, fmt.Errorf("%w: a longitudinal node law has 3 rows (values -1, 0, +1), got %d", ErrInvalidDeclaration, len(node))
	}
	outputs := len(node[0])
	pair := func(x, xp int, label string) DeclaredSet {
		set := DeclaredSet{Label: label}
		for y := 0; y < outputs && y < len(node[x]) && y < len(node[xp]); y++ {
			r := math.Min(node[0][y], math.Min(node[1][y], node[2][y]))
			set.Atoms = append(set.Atoms, Atom{R: r, P: node[x][y], Q: node[xp][y]})
		}
		return set
	}
	for i, row := range node {
		if len(row) != outputs {
			return nil, fmt.Errorf("%w: longitudinal node law row %d has %d entries, row 0 has %d", ErrInvalidDeclaration, i, len(row), outputs)
		}
	}
	d := &Declaration{Eps0: eps0, Form: FormAtoms, Pairs: []DeclaredSet{pair(1, 2, "v=0,v'=+1"), pair(1, 0, "v=0,v'=-1")}}
	if err := Validate(d); err != nil {
		return nil, err
	}
	return d, nil
}

// TranscriptLocalEps returns the pure LDP level of one tree's whole
// transcript at eps0 with randomized response at the nodes (proof, point
// 6): eps0 for trees of two or more periods, log((e^eps0+1)/2) for one
// period (one node, between 0 and s).
func TranscriptLocalEps(tree int, eps0 float64) float64 {
	if tree == 1 {
		return math.Log1p(math.Exp(eps0)) - math.Ln2
	}
	return eps0
}

// transcriptLevel returns the pure LDP level of one tree's transcript for
// a node law (rows -1, 0, +1), point 6 for any law: with s = ±1,
// up_s = max_y log(R[s][y]/R[0][y]) and down_s = max_y log(R[0][y]/R[s][y]),
// a change moving from node A to node B multiplies an output's
// probability by at most e^(up_s + down_s) (A from s to 0, B from 0 to s,
// independent outputs), and one node alone by e^max(up_s, down_s). Trees
// of one period have one node.
func transcriptLevel(tree int, node [][]float64) float64 {
	var level float64
	for _, s := range []int{0, 2} {
		var up, down float64
		for y := range node[1] {
			up = math.Max(up, math.Log(node[s][y]/node[1][y]))
			down = math.Max(down, math.Log(node[1][y]/node[s][y]))
		}
		level = math.Max(level, math.Max(up, down))
		if tree > 1 {
			level = math.Max(level, up+down)
		}
	}
	return level
}

// transcriptLocal returns the level of one tree's transcript for l's node
// law (randomized response when Node is nil).
// A declared law's level is checked against Eps0 (check, to relative
// 1e-12 like every declared ratio) and capped at it, so that randomized
// response computed from rounded probabilities gives exactly eps0.
func (l Longitudinal) transcriptLocal() float64 {
	if l.Node == nil {
		return TranscriptLocalEps(l.Tree, l.Eps0)
	}
	return math.Min(transcriptLevel(l.Tree, l.Node), l.Eps0)
}

// Epsilon returns the guarantee at delta, composed with the other parts a
// user's reports of other metrics contribute over the same window (none
// for a metric alone).
func (l Longitudinal) Epsilon(delta float64, others ...Part) (LongitudinalResult, error) {
	if err := l.check(); err != nil {
		return LongitudinalResult{}, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return LongitudinalResult{}, err
	}
	levels := treeLevels(l.Tree)
	T := TreesInWindow(l.Tree, l.Periods)
	res := LongitudinalResult{Trees: T, Levels: levels, Transcript: math.Inf(1), Mates: l.Mates}
	var otherCap float64
	for _, p := range others {
		c, err := NewComposition(p)
		if err != nil {
			return LongitudinalResult{}, err
		}
		otherCap += c.LocalEps()
	}
	local := float64(T)*l.transcriptLocal() + otherCap

	deltaA := delta
	if res.Mates == 0 {
		res.Mates, res.Tail = l.inferMates(longitudinalTailShare * delta)
		deltaA = delta - res.Tail
	}
	a, err := l.perPeriod(deltaA, res.Mates, T, others)
	if err != nil {
		return LongitudinalResult{}, err
	}
	res.Local = local
	res.PerPeriod = math.Min(a, local)
	if l.Users > 0 {
		parts := append([]Part{{Mech: GenericMech{Eps0: l.transcriptLocal()}, N: l.Users, Rounds: T}}, others...)
		r, err := ComposeEpsilon(parts, delta)
		if err != nil {
			return LongitudinalResult{}, err
		}
		res.Transcript = math.Min(r.Upper, local)
	}
	res.Upper = math.Min(math.Min(res.PerPeriod, res.Transcript), local)
	return res, nil
}

// rounds returns the number of rounds of the pair (0, s) the per-period
// bound composes for T trees that can each hold differing reports (proof,
// point 3): two per tree, one for one-period trees. It is not capped by
// the window's periods: the rounds can be sent after the window, up to the
// end of the last tree it meets.
func (l Longitudinal) rounds(T int) int {
	if l.Tree == 1 {
		return T
	}
	return 2 * T
}

// windowRounds returns the most rounds of the pair (0, s) a window of
// l.Periods periods can change, over every alignment (proof, point 3):
// rounds(T) for the T = TreesInWindow trees it can meet, less one when
// the window meets T trees only by entering the first at its last period
// (W - 1 = 1 mod H with H >= 2): the changes of that tree differ only at
// its last position, so its j-th change is at the same position under
// both data or, under one of them, at that position and absent under the
// other, one node.
func (l Longitudinal) windowRounds() int {
	r := l.rounds(TreesInWindow(l.Tree, l.Periods))
	if l.Tree >= 2 && (l.Periods-1)%l.Tree == 1 {
		r--
	}
	return r
}

// leakPeriods returns the number of periods in which a report that a
// difference inside the window changes can be sent (proof, point 3): from
// the window's first period to the end of the last tree it meets, at most
// Periods + Tree - 1.
func (l Longitudinal) leakPeriods() int { return l.Periods + l.Tree - 1 }

// perPeriod is the bound of the proof's points 1-4 at delta with mates
// level-mates.
func (l Longitudinal) perPeriod(delta float64, mates, T int, others []Part) (float64, error) {
	part, err := l.nodePart(mates, l.windowRounds())
	if err != nil {
		return 0, err
	}
	r, err := ComposeEpsilon(append(append([]Part(nil), others...), part), delta)
	if err != nil {
		return 0, err
	}
	return r.Upper, nil
}

// nodePart returns the part of the proof's points 3-4: the node pairs at
// mates level-mates, rounds times. For randomized response at the nodes
// (Node nil, or a law within nodeRRTol of it) its mechanism also carries the exact per-round profile
// (node_exact.go), which bounds each round with the blanket decomposition.
func (l Longitudinal) nodePart(mates, rounds int) (Part, error) {
	step, err := nodeStep(l.Eps0, l.Node)
	if err != nil {
		return Part{}, err
	}
	mech := DeclaredMech{Decl: step, Name: "longitudinal node (0,±1)"}
	if dev, ok := nodeRRDeviation(l.Eps0, l.Node); ok {
		return Part{Mech: nodeExactMech{DeclaredMech: mech, eps0: l.Eps0, dev: dev}, N: mates, Rounds: rounds}, nil
	}
	return Part{Mech: mech, N: mates, Rounds: rounds}, nil
}

// inferMates returns the level-mates the per-period bound may assume in
// batches of l.Batch, spending at most budget of delta on the tail (point
// 5: a union over the leakPeriods in which a differing report can be
// sent), and the tail spent.
func (l Longitudinal) inferMates(budget float64) (int, float64) {
	return l.inferMatesOver(l.leakPeriods(), budget)
}

// inferMatesOver is inferMates with the union taken over the given number
// of periods.
func (l Longitudinal) inferMatesOver(periods int, budget float64) (int, float64) {
	m0, tail := matesQuantile(l.Batch, treeLevels(l.Tree), budget/float64(periods))
	return m0, tail * float64(periods)
}

// matesQuantile returns the largest m0 in [1, batch] with
// Pr[1 + Binomial(batch-1, 1/levels) < m0] <= budget, and an upper bound
// on that probability.
func matesQuantile(batch, levels int, budget float64) (int, float64) {
	if levels == 1 {
		return batch, 0
	}
	// mateTail grows with m, so bisect for the largest m.
	lo, hi := 1, batch
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if mateTail(batch, levels, mid) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, mateTail(batch, levels, lo)
}

// mateTail returns an upper bound on Pr[1 + Binomial(batch-1, 1/levels)
// < m]: that a batch of batch reports holds fewer than m of the victim's
// level, the victim included (0 with one level: every report is a mate).
func mateTail(batch, levels, m int) float64 {
	if levels == 1 {
		return 0
	}
	return binomLowerTail(batch-1, 1/float64(levels), m-1)
}

// binomLowerTail returns an upper bound on Pr[Binomial(n, p) < m]: the
// probabilities summed from m-1 down, stopped when the geometric bound on
// the rest (the ratio of consecutive terms falls as x falls below the
// mean) is below 1e-6 of the sum, plus that bound and a relative margin
// for rounding.
func binomLowerTail(n int, p float64, m int) float64 {
	if m <= 0 {
		return 0
	}
	if m > n {
		return 1
	}
	if float64(m-1) >= float64(n)*p {
		return 1 // not a lower tail: no need to be tight there
	}
	var sum float64
	for x := m - 1; x >= 0; x-- {
		t := math.Exp(logBinomPMF(x, n, p))
		sum += t
		if x == 0 {
			break
		}
		// P(x-1)/P(x) = x(1-p) / ((n-x+1) p), decreasing as x falls.
		r := float64(x) * (1 - p) / (float64(n-x+1) * p)
		if r < 1 {
			rest := t * r / (1 - r)
			if rest <= 1e-6*sum {
				sum += rest
				break
			}
		}
	}
	return math.Min(1, sum*(1+1e-9))
}
