package sdk

import (
	"context"
	"errors"
	"fmt"
)

var _ Stateful = (*Plugin)(nil)

// Step implements Stateful: a built-in answers if it is Stateful, a plugin
// process by the Step RPC; both fail otherwise with an error wrapping
// errors.ErrUnsupported. Large batches go in several calls, as in
// Randomize, with the same timeouts, and a call that failed because the
// process died is retried once on a new process: safe, because the host
// persists nothing until it has the whole answer (a step whose answer was
// never received was never seen, and its states are stepped again from
// the same ones).
//
// The answer is checked, from a built-in too: one report and one
// non-empty state per input, or the call fails with an error wrapping
// ErrPluginFailed. A period without a report comes back as a nil report.
// len(states) must be in.Len(), else the error wraps ErrBadInput.
func (p *Plugin) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in Inputs) (reports, next [][]byte, err error) {
	if p.closed.Load() {
		return nil, nil, p.errClosed()
	}
	mixed := len(in.Categories) > 0 && len(in.Reals) > 0
	n := in.Len()
	if !mixed && len(states) != n {
		return nil, nil, fmt.Errorf("%w: plugin %s: Step with %d states for %d inputs", ErrBadInput, p.name, len(states), n)
	}
	if p.inproc != nil {
		st, ok := p.inproc.(Stateful)
		if !ok {
			return nil, nil, fmt.Errorf("plugin %s: Step: %w: the randomizer is not stateful", p.name, errors.ErrUnsupported)
		}
		reports, next, err := st.Step(ctx, eps0, period, states, in)
		if err != nil {
			return nil, nil, err
		}
		if err := checkStepAnswer(n, reports, next); err != nil {
			return nil, nil, fmt.Errorf("plugin %s: %w", p.name, err)
		}
		return reports, next, nil
	}
	if mixed {
		n = 0 // invalid; one call, for the plugin to reject
	}
	ranges := p.stepChunks(states, in, n)
	if len(ranges) == 1 {
		return p.stepChunk(ctx, eps0, period, states, in)
	}
	reports, next = make([][]byte, 0, n), make([][]byte, 0, n)
	for _, r := range ranges {
		chunk := Inputs{}
		if len(in.Reals) > 0 {
			chunk.Reals = in.Reals[r[0]:r[1]]
		} else {
			chunk.Categories = in.Categories[r[0]:r[1]]
		}
		rep, nx, err := p.stepChunk(ctx, eps0, period, states[r[0]:r[1]], chunk)
		if err != nil {
			return nil, nil, fmt.Errorf("inputs [%d,%d): %w", r[0], r[1], err)
		}
		reports, next = append(reports, rep...), append(next, nx...)
	}
	return reports, next, nil
}

// stepChunk is one Step RPC, with the call timeout, restart and retry.
func (p *Plugin) stepChunk(ctx context.Context, eps0 float64, period int64, states [][]byte, in Inputs) (reports, next [][]byte, err error) {
	err = p.call(ctx, "Step", func(ctx context.Context, c *GRPCClient) (err error) {
		reports, next, err = c.Step(ctx, eps0, period, states, in)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return reports, next, nil
}

// stepChunks splits a batch of n inputs into ranges [start, end) whose
// request and answer each stay under the request limit: an input, its
// state and its report, and the next state, of about the size of the
// largest state given (a first step's is not known before the answer).
// One range of the whole batch when it is small.
func (p *Plugin) stepChunks(states [][]byte, in Inputs, n int) [][2]int {
	maxState := 0
	for _, s := range states {
		maxState = max(maxState, len(s))
	}
	cost := func(i int) int {
		c := 8
		if len(in.Categories) > 0 {
			c = len(in.Categories[i]) + wireOverhead
		}
		c = max(c, p.desc.ReportBytes+wireOverhead)
		return c + max(len(states[i]), maxState) + wireOverhead
	}
	var out [][2]int
	for start := 0; start < n || len(out) == 0; {
		end, size := start, 0
		for end < n && (end == start || size+cost(end) <= p.o.maxRequest) {
			size += cost(end)
			end++
		}
		out = append(out, [2]int{start, end})
		start = end
		if n == 0 {
			break
		}
	}
	return out
}

// checkStepAnswer returns an error wrapping ErrPluginFailed unless a Step
// answer for n inputs has n reports and n non-empty states. It sets every
// empty report to nil: a period without a report.
func checkStepAnswer(n int, reports, next [][]byte) error {
	if len(reports) != n || len(next) != n {
		return fmt.Errorf("%w: Step answered %d reports and %d states for %d inputs", ErrPluginFailed, len(reports), len(next), n)
	}
	for i, s := range next {
		if len(s) == 0 {
			return fmt.Errorf("%w: Step answered an empty state for input %d; a state is never empty", ErrPluginFailed, i)
		}
	}
	for i, r := range reports {
		if len(r) == 0 {
			reports[i] = nil
		}
	}
	return nil
}
