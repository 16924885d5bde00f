package plugintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/blanket-dp/blanket/sdk"
)

// stepInputs is the inputs check of a stateful randomizer, through Step
// (sdk.Stateful's contract):
//
//   - Randomize fails with an error wrapping errors.ErrUnsupported (its
//     reports come from Step);
//   - inputs of the wrong kind, unknown categories without an other
//     bucket, and a number of states other than of inputs fail with
//     sdk.ErrBadInput, a bad input's error naming its index; budgets
//     outside the range fail Step, Accumulate and Declare with
//     sdk.ErrBadEps0; an empty batch and a gap of periods are accepted;
//   - a step at a period that is not after a state's last (the same
//     period again, or an earlier one) fails with sdk.ErrBadState: a
//     replayed period would draw a second, independent report of the
//     same data; in a batch, the error names the bad state's index;
//   - a state one byte shorter or longer than the randomizer wrote fails
//     with sdk.ErrBadState, never another error or a panic; other corrupt
//     states (each byte flipped, all bytes 0 or 0xff, random bytes of the
//     right length) are refused with sdk.ErrBadState or taken, never
//     anything else: a state without integrity protection may decode to
//     another valid state, which the contract allows.
func (v *verifier) stepInputs(ctx context.Context, c *Check) {
	eps0 := v.opts.Eps0s[0]
	good := v.sample(badIndex)
	nils := func(n int) [][]byte { return make([][]byte, n) }

	reps, err := v.randomize(ctx, eps0, good)
	c.expect(wraps(err, errors.ErrUnsupported), "Randomize refuses", "Randomize of a stateful randomizer returned %d reports and error %v, want an error wrapping errors.ErrUnsupported (its reports come from Step)", len(reps), err)

	type badCase struct {
		name string
		in   sdk.Inputs
	}
	var bad []badCase
	if v.desc.Input == sdk.InputCategorical {
		bad = append(bad,
			badCase{"reals for a categorical randomizer", sdk.Inputs{Reals: []float64{0.5}}},
			badCase{"categories and reals together", sdk.Inputs{Categories: good.Categories, Reals: []float64{0.5}}},
		)
		if v.desc.Other == "" {
			bad = append(bad, badCase{"unknown category without an other bucket", sdk.Inputs{Categories: append(slices.Clone(good.Categories), v.unknownLabel())}})
		}
	} else {
		bad = append(bad, badCase{"categories for a real randomizer", sdk.Inputs{Categories: []string{"a"}}})
	}
	for _, b := range bad {
		_, _, err := v.step(ctx, eps0, basePeriod, nils(b.in.Len()), b.in)
		if !c.expect(wraps(err, sdk.ErrBadInput), "Step: "+b.name, "Step error %v, want one wrapping sdk.ErrBadInput", err) {
			continue
		}
		if b.in.Len() == badIndex+1 && (len(b.in.Categories) == 0 || len(b.in.Reals) == 0) {
			c.expect(strings.Contains(err.Error(), strconv.Itoa(badIndex)), "Step: "+b.name+": error names the index",
				"the bad input is at index %d, the error does not say so: %v", badIndex, err)
		}
	}
	_, _, err = v.step(ctx, eps0, basePeriod, nils(good.Len()-1), good)
	c.expect(wraps(err, sdk.ErrBadInput), "Step: fewer states than inputs", "Step of %d inputs with %d states: error %v, want one wrapping sdk.ErrBadInput", good.Len(), good.Len()-1, err)
	reps, next, err := v.step(ctx, eps0, basePeriod, nil, sdk.Inputs{})
	c.expect(err == nil && len(reps) == 0 && len(next) == 0, "Step: empty batch", "Step of no inputs: %d reports, %d states, error %v", len(reps), len(next), err)

	for _, e := range v.badEps0s() {
		name := fmt.Sprintf("eps0=%v", e)
		_, _, err := v.step(ctx, e, basePeriod, nils(good.Len()), good)
		c.expect(wraps(err, sdk.ErrBadEps0), name+" Step", "error %v, want one wrapping sdk.ErrBadEps0", err)
		_, err = v.accumulate(ctx, e, nil)
		c.expect(wraps(err, sdk.ErrBadEps0), name+" Accumulate", "error %v, want one wrapping sdk.ErrBadEps0", err)
		_, err = v.declare(ctx, e)
		c.expect(wraps(err, sdk.ErrBadEps0), name+" Declare", "error %v, want one wrapping sdk.ErrBadEps0", err)
	}

	// States of badIndex+1 users after their first step at basePeriod.
	_, first, err := v.step(ctx, eps0, basePeriod, nils(good.Len()), good)
	if !c.expect(err == nil, "Step: first step", "Step of %d users with no state: %v", good.Len(), err) {
		return
	}
	for i, s := range first {
		if !c.expect(len(s) > 0, "Step: states non-empty", "Step returned an empty state for input %d; a state is never empty (an empty one reads as a first step)", i) {
			return
		}
	}
	stepState := func(period int64, states [][]byte) error {
		_, _, err := v.step(ctx, eps0, period, states, good)
		return err
	}
	for _, p := range []struct {
		name   string
		period int64
	}{{"replayed period", basePeriod}, {"earlier period", basePeriod - 1}} {
		err := stepState(p.period, first)
		c.expect(wraps(err, sdk.ErrBadState), "Step: "+p.name, "Step at period %d of states last stepped at %d: error %v, want one wrapping sdk.ErrBadState (a period stepped twice would draw a second report of the same data)", p.period, basePeriod, err)
	}
	// One replayed state among first steps.
	mixed := nils(good.Len())
	mixed[badIndex-1] = first[badIndex-1]
	err = stepState(basePeriod, mixed)
	if c.expect(wraps(err, sdk.ErrBadState), "Step: replayed state in a batch", "Step at period %d with state %d last stepped then: error %v, want one wrapping sdk.ErrBadState", basePeriod, badIndex-1, err) {
		c.expect(strings.Contains(err.Error(), strconv.Itoa(badIndex-1)), "Step: replayed state in a batch: error names the index",
			"the bad state is at index %d, the error does not say so: %v", badIndex-1, err)
	}
	const later = basePeriod + 1
	err = stepState(later+1, first)
	c.expect(err == nil, "Step: gap of periods", "Step at period %d of states last stepped at %d (a period skipped, its input carried forward): %v", later+1, basePeriod, err)

	// Corrupt states, at the index badIndex-1 of a batch of valid ones.
	s := first[badIndex-1]
	corrupt := func(b []byte) error {
		states := slices.Clone(first)
		states[badIndex-1] = b
		return stepState(later, states)
	}
	type stateCase struct {
		name string
		b    []byte
	}
	var strict []stateCase
	if len(s) >= 2 {
		strict = append(strict, stateCase{"state one byte short", slices.Clone(s[:len(s)-1])})
	}
	strict = append(strict, stateCase{"state one byte long", append(slices.Clone(s), 0)})
	for _, k := range strict {
		err := corrupt(k.b)
		if c.expect(wraps(err, sdk.ErrBadState), "Step: "+k.name, "error %v, want one wrapping sdk.ErrBadState", err) {
			c.expect(strings.Contains(err.Error(), strconv.Itoa(badIndex-1)), "Step: "+k.name+": error names the index",
				"the bad state is at index %d, the error does not say so: %v", badIndex-1, err)
		}
	}
	lenient := []stateCase{
		{"state of zero bytes", make([]byte, len(s))},
		{"state of 0xff bytes", bytes.Repeat([]byte{0xff}, len(s))},
	}
	for i := range min(len(s), 64) {
		b := slices.Clone(s)
		b[i] ^= 0xff
		lenient = append(lenient, stateCase{fmt.Sprintf("state byte %d flipped", i), b})
	}
	for i := range 8 {
		b := make([]byte, len(s))
		for j := range b {
			b[j] = byte(v.rng.Uint32())
		}
		lenient = append(lenient, stateCase{fmt.Sprintf("random state %d", i), b})
	}
	var problems []string
	refused := 0
	for _, k := range lenient {
		err := corrupt(k.b)
		switch {
		case err == nil:
		case wraps(err, sdk.ErrBadState):
			refused++
		default:
			problems = append(problems, fmt.Sprintf("%s (%x): %v", k.name, k.b, err))
		}
	}
	if len(problems) > 0 {
		c.fail("Step: corrupt states", "want sdk.ErrBadState or acceptance, got: %s", strings.Join(problems, "; "))
	} else {
		c.pass("Step: corrupt states", "%d of %d corrupt states refused with sdk.ErrBadState, the others taken", refused, len(lenient))
	}
}
