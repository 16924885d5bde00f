package accountant

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// maxCandidates bounds the number of candidate atom sets a composition may
// produce before merging; beyond it the composition is rejected rather than
// silently truncated (truncating would be unsound).
const maxCandidates = 20000

// JointMech is joint composition: one message carries the outputs of every
// component on its own attribute. A neighbour may change any non-empty subset
// of attributes; the bound is the maximum over all of them
// (docs/accounting.md §5).
type JointMech struct {
	// Parts are the components. Required, at least one.
	Parts []Mechanism
	// Weights split the budget among the components that do not fix their
	// own eps0, in proportion. Defaults to equal shares.
	Weights []float64
}

// Joint returns the joint composition of parts.
func Joint(parts ...Mechanism) JointMech { return JointMech{Parts: parts} }

// String implements Mechanism.
func (m JointMech) String() string { return "joint(" + joinNames(m.Parts) + ")" }

// FixedEps0 implements Mechanism: fixed when every part is fixed.
func (m JointMech) FixedEps0() (float64, bool) {
	var sum float64
	for _, p := range m.Parts {
		e, ok := p.FixedEps0()
		if !ok {
			return 0, false
		}
		sum += e
	}
	return sum, len(m.Parts) > 0
}

// budgets splits eps0 among the parts: parts that fix their own budget keep
// it, the others share the remainder evenly.
func (m JointMech) budgets(eps0 float64) ([]float64, error) {
	out := make([]float64, len(m.Parts))
	rest, free := eps0, 0
	for i, p := range m.Parts {
		if e, ok := p.FixedEps0(); ok {
			out[i] = e
			rest -= e
		} else {
			free++
		}
	}
	if free == 0 {
		return out, nil
	}
	if !(rest > 0) {
		return nil, fmt.Errorf("%w: joint: components with their own eps0 use %g of the budget eps0 = %g, nothing is left for the other %d", ErrInvalidArgument, eps0-rest, eps0, free)
	}
	if m.Weights != nil && len(m.Weights) != len(m.Parts) {
		return nil, argError("joint weights", len(m.Weights), fmt.Sprintf("one per component (%d)", len(m.Parts)))
	}
	var wsum float64
	for i, p := range m.Parts {
		if _, ok := p.FixedEps0(); !ok {
			w := 1.0
			if m.Weights != nil {
				w = m.Weights[i]
				if math.IsNaN(w) || math.IsInf(w, 0) || !(w > 0) {
					return nil, argError(fmt.Sprintf("joint weight %d", i+1), w, "finite and > 0")
				}
			}
			wsum += w
		}
	}
	for i, p := range m.Parts {
		if _, ok := p.FixedEps0(); !ok {
			w := 1.0
			if m.Weights != nil {
				w = m.Weights[i]
			}
			out[i] = rest * w / wsum
		}
	}
	return out, nil
}

// Decompose implements Mechanism.
func (m JointMech) Decompose(eps0 float64) (*Decomposition, error) {
	if len(m.Parts) == 0 {
		return nil, argError("joint components", 0, "at least 1")
	}
	budgets, err := m.budgets(eps0)
	if err != nil {
		return nil, err
	}
	parts := make([]*Decomposition, len(m.Parts))
	d := &Decomposition{}
	for i, p := range m.Parts {
		if parts[i], err = p.Decompose(budgets[i]); err != nil {
			return nil, fmt.Errorf("joint component %d: %w", i+1, err)
		}
		d.LocalEps += parts[i].LocalEps
	}
	if len(parts) == 1 {
		c := *parts[0]
		return &c, nil
	}
	if d.Upper, err = combine(parts, nil, upperOptions, productSets); err != nil {
		return nil, err
	}
	d.UpperSame, err = combineSame(parts, func(p *Decomposition) []AtomSet { return p.UpperSame }, productSets)
	if err != nil {
		return nil, err
	}
	if allHaveLower(parts) {
		if d.Lower, err = combine(parts, nil, lowerOptions, productSets); err != nil {
			return nil, err
		}
		d.LowerSame, err = combineSame(parts, func(p *Decomposition) []AtomSet { return p.LowerSame }, productSets)
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

// ParallelMech is parallel composition: each user reports component i with
// probability Weights[i], and the message says which.
type ParallelMech struct {
	// Weights are the selection probabilities. Required; they must be
	// positive and sum to 1.
	Weights []float64
	// Parts are the components, one per weight. Required.
	Parts []Mechanism
}

// Parallel returns the parallel composition of parts with the given weights.
func Parallel(weights []float64, parts ...Mechanism) ParallelMech {
	return ParallelMech{Weights: weights, Parts: parts}
}

// String implements Mechanism.
func (m ParallelMech) String() string {
	parts := make([]string, len(m.Parts))
	for i, p := range m.Parts {
		w := math.NaN()
		if i < len(m.Weights) {
			w = m.Weights[i]
		}
		parts[i] = fmt.Sprintf("%g:%s", w, p)
	}
	return "parallel(" + strings.Join(parts, ",") + ")"
}

// FixedEps0 implements Mechanism: fixed when every part is fixed.
func (m ParallelMech) FixedEps0() (float64, bool) {
	var mx float64
	for _, p := range m.Parts {
		e, ok := p.FixedEps0()
		if !ok {
			return 0, false
		}
		mx = math.Max(mx, e)
	}
	return mx, len(m.Parts) > 0
}

// Decompose implements Mechanism. Every component gets the whole budget.
func (m ParallelMech) Decompose(eps0 float64) (*Decomposition, error) {
	sum, parts, d, err := weightedParts("parallel", m.Weights, m.Parts, eps0)
	if err != nil {
		return nil, err
	}
	if math.Abs(sum-1) > 1e-9 {
		return nil, argError("parallel weights sum", sum, "1")
	}
	return parallelDecompose(d, m.Weights, parts)
}

// weightedParts checks the weights of a weighted composition named name
// (one per part, each in (0,1]) and decomposes every part at eps0: it
// returns the weights' sum, the parts' decompositions and a Decomposition
// holding their largest LocalEps.
func weightedParts(name string, weights []float64, ms []Mechanism, eps0 float64) (float64, []*Decomposition, *Decomposition, error) {
	if len(ms) == 0 {
		return 0, nil, nil, argError(name+" components", 0, "at least 1")
	}
	if len(weights) != len(ms) {
		return 0, nil, nil, argError(name+" weights", len(weights), fmt.Sprintf("one per component (%d)", len(ms)))
	}
	var sum float64
	for i, w := range weights {
		if err := checkFinite(fmt.Sprintf("%s weight %d", name, i+1), w); err != nil {
			return 0, nil, nil, err
		}
		if !(w > 0 && w <= 1) {
			return 0, nil, nil, argError(fmt.Sprintf("%s weight %d", name, i+1), w, "in (0,1]")
		}
		sum += w
	}
	parts := make([]*Decomposition, len(ms))
	d := &Decomposition{}
	for i, p := range ms {
		var err error
		if parts[i], err = p.Decompose(eps0); err != nil {
			return 0, nil, nil, fmt.Errorf("%s component %d: %w", name, i+1, err)
		}
		d.LocalEps = math.Max(d.LocalEps, parts[i].LocalEps)
	}
	return sum, parts, d, nil
}

// scaledUnion returns the compose function of combine that joins one
// candidate set per component j into one set, each atom (r, p, q) of j as
// (blanket[j] r, victim[j] p, victim[j] q): the parallel composition's
// atoms, with the blanket and the victim weighted alike (ParallelMech) or
// apart (ParallelFloorMech).
func scaledUnion(blanket, victim []float64) func(sets []AtomSet, idx []int) AtomSet {
	return func(sets []AtomSet, idx []int) AtomSet {
		var out AtomSet
		for i, s := range sets {
			j := idx[i]
			for _, a := range s {
				out = append(out, Atom{R: blanket[j] * a.R, P: victim[j] * a.P, Q: victim[j] * a.Q})
			}
		}
		return out.Merge()
	}
}

func parallelDecompose(d *Decomposition, weights []float64, parts []*Decomposition) (*Decomposition, error) {
	union := scaledUnion(weights, weights)
	var err error
	if d.Upper, err = combine(parts, weights, upperOptions, union); err != nil {
		return nil, err
	}
	if d.UpperSame, err = combineSame(parts, func(p *Decomposition) []AtomSet { return p.UpperSame }, union); err != nil {
		return nil, err
	}
	if allHaveLower(parts) {
		if d.Lower, err = combine(parts, weights, lowerOptions, union); err != nil {
			return nil, err
		}
		if d.LowerSame, err = combineSame(parts, func(p *Decomposition) []AtomSet { return p.LowerSame }, union); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// SubsampleMech is Poisson subsampling at rate S: each user reports with
// probability S and otherwise sends a constant null message, which is
// parallel composition with a null mechanism (docs/accounting.md §5).
type SubsampleMech struct {
	// Rate is the sampling probability. Required, in (0,1].
	Rate float64
	// Inner is the subsampled mechanism. Required.
	Inner Mechanism
}

// Subsample returns inner subsampled at rate s.
func Subsample(s float64, inner Mechanism) SubsampleMech {
	return SubsampleMech{Rate: s, Inner: inner}
}

// String implements Mechanism.
func (m SubsampleMech) String() string { return fmt.Sprintf("subsample(%g,%s)", m.Rate, m.Inner) }

// FixedEps0 implements Mechanism.
func (m SubsampleMech) FixedEps0() (float64, bool) { return m.Inner.FixedEps0() }

// Decompose implements Mechanism.
func (m SubsampleMech) Decompose(eps0 float64) (*Decomposition, error) {
	if err := checkFinite("subsample rate", m.Rate); err != nil {
		return nil, err
	}
	if !(m.Rate > 0 && m.Rate <= 1) {
		return nil, argError("subsample rate", m.Rate, "in (0,1]")
	}
	inner, err := m.Inner.Decompose(eps0)
	if err != nil {
		return nil, fmt.Errorf("subsample: %w", err)
	}
	if m.Rate == 1 {
		return inner, nil
	}
	// The null mechanism has one constant output: it is its own blanket and
	// a neighbour cannot change it, so it only has unchanged sets.
	null := &Decomposition{UpperSame: []AtomSet{{{R: 1, P: 1, Q: 1}}}, LowerSame: []AtomSet{{{R: 1, P: 1, Q: 1}}}}
	d := &Decomposition{LocalEps: inner.LocalEps}
	return parallelDecompose(d, []float64{m.Rate, 1 - m.Rate}, []*Decomposition{inner, null})
}

func upperOptions(p *Decomposition) (changed, same []AtomSet) { return p.Upper, p.UpperSame }
func lowerOptions(p *Decomposition) (changed, same []AtomSet) { return p.Lower, p.LowerSame }

// allHaveLower reports whether lower-bound sets can be composed: every part
// can stand unchanged and at least one part has a triple.
func allHaveLower(parts []*Decomposition) bool {
	any := false
	for _, p := range parts {
		if len(p.LowerSame) == 0 {
			return false
		}
		any = any || len(p.Lower) > 0
	}
	return any
}

// productSets is the joint composition of one set per component: the
// Cartesian product of their atoms, merged.
func productSets(sets []AtomSet, _ []int) AtomSet {
	acc := AtomSet{{R: 1, P: 1, Q: 1}}
	for _, s := range sets {
		next := make(AtomSet, 0, len(acc)*len(s))
		for _, a := range acc {
			for _, b := range s {
				next = append(next, Atom{R: a.R * b.R, P: a.P * b.P, Q: a.Q * b.Q})
			}
		}
		acc = next.Merge()
	}
	return acc
}

// combine enumerates, for every non-empty subset of changed components and
// every choice of candidate set per component, the composed set, and returns
// the distinct results. Identical components are grouped, so for m identical
// symmetric components only the number of changed ones is enumerated.
func combine(parts []*Decomposition, weights []float64, opts func(*Decomposition) (changed, same []AtomSet), compose func([]AtomSet, []int) AtomSet) ([]AtomSet, error) {
	// Options per component: changed sets first, then unchanged sets.
	type group struct {
		idx     []int // component indices
		options []AtomSet
		changed int // options[:changed] are changed sets
	}
	byKey := map[string]*group{}
	var groups []*group
	for i, p := range parts {
		ch, sm := opts(p)
		ch, sm = dedupe(ch), dedupe(sm)
		var kb strings.Builder
		if weights != nil {
			fmt.Fprintf(&kb, "w=%v;", weights[i])
		}
		for _, s := range ch {
			kb.WriteString(s.key() + "|")
		}
		kb.WriteString("#")
		for _, s := range sm {
			kb.WriteString(s.key() + "|")
		}
		g, ok := byKey[kb.String()]
		if !ok {
			g = &group{options: append(append([]AtomSet{}, ch...), sm...), changed: len(ch)}
			byKey[kb.String()] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	// Count the combinations first, so an explosion is an error.
	total := 1.0
	for _, g := range groups {
		total *= binom(len(g.idx)+len(g.options)-1, len(g.options)-1)
	}
	if total > maxCandidates {
		return nil, fmt.Errorf("%w: composition has %g candidate neighbouring pairs (limit %d); declare fewer pairs per component", ErrInvalidArgument, total, maxCandidates)
	}
	var out []AtomSet
	seen := map[string]bool{}
	// choice[g] is a multiset of option indices for group g (non-decreasing).
	choice := make([][]int, len(groups))
	var rec func(gi int)
	rec = func(gi int) {
		if gi == len(groups) {
			var sets []AtomSet
			var idx []int
			anyChanged := false
			for g, c := range choice {
				for j, o := range c {
					sets = append(sets, groups[g].options[o])
					idx = append(idx, groups[g].idx[j])
					if o < groups[g].changed {
						anyChanged = true
					}
				}
			}
			if !anyChanged {
				return
			}
			s := compose(sets, idx)
			if k := s.key(); !seen[k] {
				seen[k] = true
				out = append(out, s)
			}
			return
		}
		g := groups[gi]
		m := len(g.idx)
		cur := make([]int, 0, m)
		var multi func(start int)
		multi = func(start int) {
			if len(cur) == m {
				choice[gi] = append([]int(nil), cur...)
				rec(gi + 1)
				return
			}
			for o := start; o < len(g.options); o++ {
				cur = append(cur, o)
				multi(o)
				cur = cur[:len(cur)-1]
			}
		}
		multi(0)
	}
	rec(0)
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out, nil
}

// combineSame composes the unchanged-attribute sets: every component
// unchanged, one set each.
func combineSame(parts []*Decomposition, get func(*Decomposition) []AtomSet, compose func([]AtomSet, []int) AtomSet) ([]AtomSet, error) {
	var out []AtomSet
	idx := make([]int, len(parts))
	for i := range idx {
		idx[i] = i
	}
	var rec func(i int, acc []AtomSet) error
	rec = func(i int, acc []AtomSet) error {
		if i == len(parts) {
			if len(out) >= maxCandidates {
				return fmt.Errorf("%w: composition has more than %d unchanged-attribute sets", ErrInvalidArgument, maxCandidates)
			}
			out = append(out, compose(acc, idx))
			return nil
		}
		for _, s := range dedupe(get(parts[i])) {
			if err := rec(i+1, append(acc, s)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := rec(0, nil); err != nil {
		return nil, err
	}
	return dedupe(out), nil
}

// binom returns the binomial coefficient C(n, k), exactly for k or n - k
// at most 1 (the sparse path counts its terms with it, once per m), else
// rounded from log-gamma values.
func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	switch min(k, n-k) {
	case 0:
		return 1
	case 1:
		return float64(n)
	}
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Round(math.Exp(lg(n) - lg(k) - lg(n-k)))
}
