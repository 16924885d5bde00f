package accountant

import (
	"errors"
	"fmt"
	"math"
)

// This file connects Longitudinal to mechanism families: a randomizer that
// declares a tree (Declaration.Tree) is accounted with Longitudinal, in
// calibration and in plans; everything else that assumes independent
// reports refuses it (Decompose fails with ErrLongitudinal).

// LongitudinalMech is the tree protocol with randomized response at the
// nodes (plugins/longitudinal), as a family in eps0: its declaration is
// NodeMatrix(eps0) over Tree periods. Its Decompose fails with
// ErrLongitudinal; calibrate it with CalibrateLongitudinal, or in a plan.
type LongitudinalMech struct {
	// Tree is the number of periods per tree, a power of two. Required.
	Tree int
	// Eps0 fixes the local budget when > 0.
	Eps0 float64
}

// FixedEps0 implements Mechanism.
func (m LongitudinalMech) FixedEps0() (float64, bool) { return m.Eps0, m.Eps0 > 0 }

// String implements Mechanism.
func (m LongitudinalMech) String() string {
	if m.Eps0 > 0 {
		return fmt.Sprintf("longitudinal:tree=%d:eps0=%g", m.Tree, m.Eps0)
	}
	return fmt.Sprintf("longitudinal:tree=%d", m.Tree)
}

// Declare returns the declaration at eps0.
func (m LongitudinalMech) Declare(eps0 float64) (*Declaration, error) {
	if m.Eps0 > 0 {
		eps0 = m.Eps0
	}
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	mat, err := NewMatrix(NodeMatrix(eps0))
	if err != nil {
		return nil, err
	}
	d := &Declaration{Eps0: eps0, Form: FormMatrix, Matrix: mat, Tree: m.Tree}
	if _, err := d.Node(); err != nil {
		return nil, err
	}
	return d, nil
}

// Decompose implements Mechanism: it fails with ErrLongitudinal.
func (m LongitudinalMech) Decompose(eps0 float64) (*Decomposition, error) {
	d, err := m.Declare(eps0)
	if err != nil {
		return nil, err
	}
	return Decompose(d)
}

// longitudinalOf returns the Longitudinal of mechanism m at eps0 (tree and
// declared node law; the window and batch are the caller's), or ok false
// when m is not a tree protocol.
func longitudinalOf(m Mechanism, eps0 float64) (l Longitudinal, ok bool, err error) {
	var d *Declaration
	switch m := m.(type) {
	case LongitudinalMech:
		d, err = m.Declare(eps0)
	case DeclaredMech:
		d = m.Decl
	case FuncMech:
		if m.Declare == nil {
			return l, false, nil
		}
		if m.Eps0 > 0 {
			eps0 = m.Eps0
		}
		if err := checkEps0(eps0); err != nil {
			return l, false, err
		}
		d, err = m.Declare(eps0)
		if err != nil {
			err = fmt.Errorf("%s: %w", m.Name, err)
		}
	default:
		return l, false, nil
	}
	if err != nil || d == nil || d.Tree == 0 {
		return l, false, err
	}
	node, err := d.Node()
	if err != nil {
		return l, false, err
	}
	if node.Form != FormMatrix || node.Matrix == nil || node.Matrix.NumInputs() != 3 {
		return l, false, fmt.Errorf("%w: a longitudinal declaration is a matrix of 3 rows (node values -1, 0, +1)", ErrInvalidDeclaration)
	}
	if _, err := Decompose(node); err != nil {
		return l, false, err
	}
	rows := make([][]float64, 3)
	for x := range rows {
		rows[x] = make([]float64, node.Matrix.NumOutputs())
		for y := range rows[x] {
			rows[x][y] = node.Matrix.At(x, y)
		}
	}
	// The declared eps0 is also the level of a tree's whole transcript:
	// check it against the node law (a law whose single nodes are within
	// eps0 can still move a transcript by more, see transcriptLevel).
	// A matrix without eps0 gets the computed level, as Decompose gives a
	// matrix its largest log ratio.
	eps0 = d.Eps0
	lv := transcriptLevel(d.Tree, rows)
	if eps0 == 0 {
		eps0 = lv
	}
	if lv > eps0*(1+1e-12) {
		return l, false, fmt.Errorf("%w: a tree's whole transcript under the declared node law is %.6g-LDP, more than the declared eps0 = %g", ErrInvalidDeclaration, lv, eps0)
	}
	return Longitudinal{Tree: d.Tree, Eps0: eps0, Node: rows}, true, nil
}

// IsLongitudinal reports whether m is a tree protocol (its declaration has
// a Tree), asking it for its declaration at eps0 = 1 when needed.
func IsLongitudinal(m Mechanism) (bool, error) {
	tree, err := LongitudinalTree(m)
	return tree > 0, err
}

// LongitudinalTree returns the periods per tree of a tree protocol m (its
// declaration's Tree), asking it for its declaration at eps0 = 1 when
// needed, and 0 when m is not a tree protocol.
func LongitudinalTree(m Mechanism) (int, error) {
	eps0 := 1.0
	if e, fixed := m.FixedEps0(); fixed {
		eps0 = e
	}
	l, ok, err := longitudinalOf(m, eps0)
	if err != nil || !ok {
		return 0, err
	}
	return l.Tree, nil
}

// LongitudinalEpsilon returns the guarantee of a tree protocol m at eps0
// over a window of periods with batches of at least n reports (mates
// inferred binomially), at delta: Longitudinal.Epsilon.
func LongitudinalEpsilon(m Mechanism, eps0 float64, n, periods int, delta float64) (LongitudinalResult, error) {
	l, ok, err := longitudinalOf(m, eps0)
	if err != nil {
		return LongitudinalResult{}, err
	}
	if !ok {
		return LongitudinalResult{}, argError("mechanism", m.String(), "a longitudinal tree protocol")
	}
	l.Periods, l.Batch = periods, n
	return l.Epsilon(delta)
}

// CalibrateLongitudinal returns the largest eps0 (to relative 1e-3, every
// reported value proven) at which the tree protocol m meets the target over
// t.Rounds periods at batches of t.N reports.
func CalibrateLongitudinal(m Mechanism, t Target) (CalibrationResult, error) {
	if err := checkEps("target eps", t.Eps); err != nil {
		return CalibrationResult{}, err
	}
	if err := checkDelta("target delta", t.Delta); err != nil {
		return CalibrationResult{}, err
	}
	if err := checkN(t.N); err != nil {
		return CalibrationResult{}, err
	}
	if t.Eps == 0 {
		return CalibrationResult{}, argError("target eps", t.Eps, "> 0")
	}
	if t.Rounds < 0 || t.Rounds > MaxRounds {
		return CalibrationResult{}, argError("rounds", t.Rounds, fmt.Sprintf("in [1, %d]", MaxRounds))
	}
	if e, fixed := m.FixedEps0(); fixed {
		return CalibrationResult{}, fmt.Errorf("%w: %s fixes eps0 = %g", ErrNotCalibratable, m, e)
	}
	rounds := max(t.Rounds, 1)
	l, ok, err := longitudinalOf(m, 1)
	if err != nil {
		return CalibrationResult{}, err
	}
	if !ok {
		return CalibrationResult{}, argError("mechanism", m.String(), "a longitudinal tree protocol")
	}
	// The largest proven eps0 (largest.go) by bisection: the probe proves
	// the target at eps0 when the window's bound meets it (g = -Inf; the
	// bound is an eps, so there is no distance to interpolate on) and
	// keeps the result.
	s := largest[LongitudinalResult]{
		probe: func(eps0 float64) (float64, LongitudinalResult, error) {
			r, err := LongitudinalEpsilon(m, eps0, t.N, rounds, t.Delta)
			if err != nil || !(r.Upper <= t.Eps) {
				return 1, r, err
			}
			return math.Inf(-1), r, nil
		},
		outside: isOutsideDomain,
		floor:   1e-6,
		ceil:    MaxEps0,
		grow:    func(x float64, _ int) float64 { return 2 * x },
		tol:     calTol,
	}
	// The bound never exceeds the local level, at most eps0 per tree: start
	// where that alone meets the target.
	eps0, r, err := s.run(math.Min(t.Eps/float64(TreesInWindow(l.Tree, rounds)), MaxEps0))
	if errors.Is(err, errBelowFloor) {
		return CalibrationResult{}, fmt.Errorf("%w: no eps0 meets eps = %g, delta = %g", ErrUnreachable, t.Eps, t.Delta)
	} else if err != nil {
		return CalibrationResult{}, err
	}
	return CalibrationResult{Eps0: eps0, Achieved: longitudinalAchieved(r)}, nil
}

// longitudinalAchieved returns a Longitudinal result as an EpsilonResult
// (no lower bound is known, so Lower is 0 and Tight false).
func longitudinalAchieved(r LongitudinalResult) EpsilonResult {
	return EpsilonResult{Upper: r.Upper, LocalEps: r.Local, Amplified: r.Upper < r.Local*(1-rootTol)}
}

// LongitudinalPart returns the part a tree protocol m at eps0 contributes
// to a composition of one user's reports when the user's state may differ
// inside a window that meets trees trees (proof point 3 at the top of
// longitudinal.go), with batches of at least n reports in every period
// that can hold a report the difference changes (from the window's first
// period to the end of the last tree it meets), of which there are
// reports: its node pairs, two per tree (one for one-period trees) and no
// more than reports, among the level-mates a batch of n holds, inferred
// with a tail of probability at most budget (a union over the reports
// periods); and the tail, which the composition's delta must pay (compose
// the parts at delta minus the tails).
func LongitudinalPart(m Mechanism, eps0 float64, n, trees, reports int, budget float64) (Part, float64, error) {
	l, ok, err := longitudinalOf(m, eps0)
	if err != nil {
		return Part{}, 0, err
	}
	if !ok {
		return Part{}, 0, argError("mechanism", m.String(), "a longitudinal tree protocol")
	}
	l.Periods, l.Batch = 1, n
	if err := l.check(); err != nil {
		return Part{}, 0, err
	}
	if trees < 1 || trees > MaxRounds {
		return Part{}, 0, argError("longitudinal trees", trees, fmt.Sprintf("in [1, %d]", MaxRounds))
	}
	if reports < 1 || reports > MaxRounds {
		return Part{}, 0, argError("longitudinal reports", reports, fmt.Sprintf("in [1, %d]", MaxRounds))
	}
	if !(budget > 0 && budget < 1) {
		return Part{}, 0, argError("longitudinal tail budget", budget, "in (0, 1)")
	}
	mates, tail := l.inferMatesOver(reports, budget)
	p, err := l.nodePart(mates, min(l.rounds(trees), reports))
	if err != nil {
		return Part{}, 0, err
	}
	return p, tail, nil
}
