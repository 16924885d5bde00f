package longitudinal

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// The client, Algorithm 1 of Erlingsson et al. (2019), one period at a
// time.
//
// Privacy of a tree's transcript (Theorem 5), the argument the tests check
// by enumeration: j and h are drawn independently of the data, so fix them.
// Which periods send a report depends on h only. The values of the reported
// nodes (level h) are all 0 except the node holding the j-th change, whose
// value is its sign, fixed by j. Two state sequences therefore differ in
// at most two reported node values, each between 0 and that sign, one in
// each direction; the product of the two likelihood ratios of randomized
// response is at most e^eps0, and one alone is at most (e^eps0+1)/2.

// Step implements sdk.Stateful. Inputs are the off and on labels.
func (r *Randomizer) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reports, next [][]byte, err error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, nil, err
	}
	if period < 0 {
		return nil, nil, fmt.Errorf("%w: %s: period %d, periods are counted from the Unix epoch", sdk.ErrBadInput, Name, period)
	}
	bits, err := r.dom.Batch(Name, in)
	if err != nil {
		return nil, nil, err
	}
	if len(states) != len(bits) {
		return nil, nil, fmt.Errorf("%w: %s: %d states for %d inputs", sdk.ErrBadInput, Name, len(states), len(bits))
	}
	src := ldp.DefaultSource(r.src)
	e := math.Exp(eps0)
	keep, flip := e/(e+1), 1/(e+1)
	reports, next = make([][]byte, len(bits)), make([][]byte, len(bits))
	for i, x := range bits {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, nil, err
		}
		s, err := r.advance(src, eps0, period, states[i], x)
		if err != nil {
			return nil, nil, fmt.Errorf("state %d: %w", i, err)
		}
		pos := int(period%int64(r.tree.periods)) + 1
		if pos%span(s.h) == 0 {
			m := pos / span(s.h)
			var b int
			switch v := s.value(s.h, m); v {
			case 0:
				b = ldp.Intn(src, 2)
			default:
				// b = v with probability e^eps0/(e^eps0+1).
				b = (v + 1) / 2
				if !ldp.Choose(src, keep, flip) {
					b = 1 - b
				}
			}
			reports[i] = []byte{byte(s.h), byte(m >> 8), byte(m), byte(b)}
		}
		next[i] = s.encode()
	}
	return reports, next, nil
}

// advance returns the state after the period with input bit x: a fresh
// state (new choices) for a user's first step or a new tree, carrying the
// last input over the periods skipped since the last step.
func (r *Randomizer) advance(src ldp.Source, eps0 float64, period int64, prev []byte, x int) (*userState, error) {
	H := int64(r.tree.periods)
	treeNo, pos := period/H, int(period%H)+1
	var s *userState
	carried := -1 // the value held before this period, -1 for none
	if prev != nil {
		old, err := decodeState(prev, r.tree, r.k, eps0)
		if err != nil {
			return nil, err
		}
		if period <= old.last {
			return nil, fmt.Errorf("%w: period %d is not after the state's last period %d (a step is never redone once its report may have left)", sdk.ErrBadState, period, old.last)
		}
		if old.tree == treeNo {
			s = old
		} else {
			carried = old.bit
		}
	}
	if s == nil {
		s = &userState{
			logTree: r.tree.levels - 1,
			k:       r.k,
			eps0:    eps0,
			tree:    treeNo,
			j:       1 + ldp.Intn(src, r.k),
			h:       1 + ldp.Intn(src, r.tree.levels),
		}
		// The bit is 0 before the tree; a value carried from the last tree
		// holds from its first period.
		if carried == 1 && pos > 1 {
			s.change(1)
		}
	}
	if x != s.bit {
		s.change(pos)
	}
	s.last = period
	return s, nil
}
