// Package counter is a stateful randomizer for the tests of the plugin
// host and the app SDK, served as the plugin binary blanket-counter
// (cmd/blanket-counter). It is NOT private: its reports are the inputs
// themselves, so that a test can assert on what a step sent. Its state
// counts a user's steps, so that a test can tell which state a step was
// given:
//
//	state: version (1 byte, 1) | eps0 (8 bytes, IEEE 754 bits) |
//	       last period stepped (8 bytes) | steps (8 bytes), big-endian
//
// A user reports at its steps 1, every+1, 2*every+1, ... and sends
// nothing (a nil report) at the others; a report is the input's category
// index (ldp.EncodeIndices). Its parameters:
//
//	every=N       report every N-th step (default 1: every step)
//	lie=short     Step answers one report fewer than it was given inputs
//	lie=empty     Step answers an empty next state for the last input
//	crash_once=F  the first Step exits the process with status 3 unless
//	              file F exists, creating it first (so that the host's
//	              retry, on a new process, succeeds)
package counter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Name is the plugin name; Version its report format version; Span its
// Description.Span.
const (
	Name    = "counter"
	Version = "1"
	Span    = 4
)

// StateBytes is the length of a state; stateVersion its first byte.
const (
	StateBytes   = 25
	stateVersion = 1
)

// Randomizer is the counter randomizer. It is safe for concurrent use.
type Randomizer struct {
	dom       *ldp.Domain
	every     int64
	lie       string
	crashOnce string
	desc      sdk.Description
}

var (
	_ sdk.Randomizer = (*Randomizer)(nil)
	_ sdk.Stateful   = (*Randomizer)(nil)
)

// FromConfig returns the randomizer of cfg: two or more categories, no
// other bucket, and the parameters of the package doc. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if err := ldp.CategoricalConfig(Name, cfg, "every", "lie", "crash_once"); err != nil {
		return nil, err
	}
	if len(cfg.Categories) < 2 || cfg.Other != "" {
		return nil, fmt.Errorf("%w: %s takes two or more categories and no other bucket", sdk.ErrBadConfig, Name)
	}
	dom, err := ldp.NewDomain(cfg.Categories, "", 256)
	if err != nil {
		return nil, err
	}
	r := &Randomizer{dom: dom, every: 1, lie: cfg.Params["lie"], crashOnce: cfg.Params["crash_once"]}
	if v, ok := cfg.Params["every"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %s: every = %q, must be a positive integer", sdk.ErrBadConfig, Name, v)
		}
		r.every = n
	}
	switch r.lie {
	case "", "short", "empty":
	default:
		return nil, fmt.Errorf("%w: %s: lie = %q, must be short or empty", sdk.ErrBadConfig, Name, r.lie)
	}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputCategorical,
		Categories:  dom.Labels(),
		Encoding:    "the input's category index (not private: a test randomizer)",
		ReportBytes: ldp.IndexWidth(dom.Size()),
		Params:      []sdk.Param{{Name: "every", Value: strconv.FormatInt(r.every, 10), Doc: "report every N-th step"}},
		Eps0Min:     ldp.MinEps0,
		Eps0Max:     ldp.MaxEps0,
		Stateful:    true,
		Span:        Span,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// Declare implements sdk.Randomizer: k-ary randomized response, which
// the reports are not; the tests that calibrate with it only need a valid
// declaration.
func (r *Randomizer) Declare(_ context.Context, eps0 float64) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	return ldp.RRDeclaration(r.dom.Size(), eps0, declare.FormMatrix, r.dom.Labels())
}

// Randomize implements sdk.Randomizer: it fails, the reports of a
// stateful randomizer come from Step.
func (r *Randomizer) Randomize(context.Context, float64, sdk.Inputs) ([][]byte, error) {
	return nil, fmt.Errorf("%s: Randomize: %w: a stateful randomizer reports through Step", Name, errors.ErrUnsupported)
}

// Step implements sdk.Stateful.
func (r *Randomizer) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reports, next [][]byte, err error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, nil, err
	}
	idx, err := r.dom.Batch(Name, in)
	if err != nil {
		return nil, nil, err
	}
	if len(states) != len(idx) {
		return nil, nil, fmt.Errorf("%w: %s: %d states for %d inputs", sdk.ErrBadInput, Name, len(states), len(idx))
	}
	if r.crashOnce != "" {
		if _, err := os.Stat(r.crashOnce); err != nil {
			if f, err := os.Create(r.crashOnce); err == nil {
				f.Close()
			}
			os.Exit(3)
		}
	}
	encoded := ldp.EncodeIndices(idx, r.dom.Size())
	reports, next = make([][]byte, len(idx)), make([][]byte, len(idx))
	for i := range idx {
		var steps int64
		if states[i] != nil {
			s, err := Decode(states[i])
			if err != nil {
				return nil, nil, fmt.Errorf("state %d: %w", i, err)
			}
			if s.Eps0 != eps0 {
				return nil, nil, fmt.Errorf("state %d: %w: written at eps0 = %v, asked at %v", i, sdk.ErrBadState, s.Eps0, eps0)
			}
			if period <= s.Last {
				return nil, nil, fmt.Errorf("state %d: %w: period %d is not after the state's last period %d", i, sdk.ErrBadState, period, s.Last)
			}
			steps = s.Steps
		}
		steps++
		if (steps-1)%r.every == 0 {
			reports[i] = encoded[i]
		}
		next[i] = State{Eps0: eps0, Last: period, Steps: steps}.Encode()
	}
	switch r.lie {
	case "short":
		reports = reports[:len(reports)-1]
	case "empty":
		next[len(next)-1] = []byte{}
	}
	return reports, next, nil
}

// Accumulate implements sdk.Randomizer: it counts the reports of each
// category.
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.AccumulateIndices(ctx, &r.desc, eps0, r.dom.Size(), reports)
}

// Estimate implements sdk.Randomizer: the counts, exact (the reports are
// not randomized).
func (r *Randomizer) Estimate(_ context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, r.dom.Size(), true); err != nil {
		return nil, err
	}
	items := make([]sdk.Item, r.dom.Size())
	for i, l := range r.dom.Labels() {
		c := float64(stat.Counts[i])
		items[i] = sdk.Item{Label: l, Value: c, Lo: c, Hi: c, Post: c, PostLo: c, PostHi: c}
	}
	return ldp.NewEstimate(Name, stat, 0.95, items), nil
}

// State is a decoded state.
type State struct {
	// Eps0 is the budget the state was written at.
	Eps0 float64
	// Last is the last period stepped.
	Last int64
	// Steps is the number of steps taken, the first included.
	Steps int64
}

// Encode returns the state's bytes.
func (s State) Encode() []byte {
	b := make([]byte, StateBytes)
	b[0] = stateVersion
	binary.BigEndian.PutUint64(b[1:], math.Float64bits(s.Eps0))
	binary.BigEndian.PutUint64(b[9:], uint64(s.Last))
	binary.BigEndian.PutUint64(b[17:], uint64(s.Steps))
	return b
}

// Decode reads a state. Errors wrap sdk.ErrBadState.
func Decode(b []byte) (State, error) {
	if len(b) != StateBytes || b[0] != stateVersion {
		return State{}, fmt.Errorf("%w: %d bytes of version %d, want %d bytes of version %d", sdk.ErrBadState, len(b), firstByte(b), StateBytes, stateVersion)
	}
	s := State{
		Eps0:  math.Float64frombits(binary.BigEndian.Uint64(b[1:])),
		Last:  int64(binary.BigEndian.Uint64(b[9:])),
		Steps: int64(binary.BigEndian.Uint64(b[17:])),
	}
	if s.Steps < 1 {
		return State{}, fmt.Errorf("%w: %d steps", sdk.ErrBadState, s.Steps)
	}
	return s, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}
