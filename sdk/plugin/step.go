package plugin

import (
	"context"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/rpc"
)

var _ sdk.Stateful = (*subprocess)(nil)

// Step implements sdk.Stateful by the Step RPC: a plugin whose randomizer
// is not stateful fails with an error wrapping errors.ErrUnsupported.
// Large batches go in several calls, as in Randomize, with the same
// timeouts, and a call that failed because the process died is retried
// once on a new process: safe, because the host persists nothing until it
// has the whole answer (a step whose answer was never received was never
// seen, and its states are stepped again from the same ones).
//
// The answer is checked (sdk.CheckStep, in rpc.Client.Step): one report
// and one non-empty state per input, or the call fails with an error
// wrapping sdk.ErrPluginFailed. A period without a report comes back as a
// nil report. len(states) must be in.Len(), else the error wraps
// sdk.ErrBadInput.
func (p *subprocess) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reports, next [][]byte, err error) {
	if p.closed.Load() {
		return nil, nil, p.errClosed()
	}
	if err := host.CheckStepStates(p.name, states, in); err != nil {
		return nil, nil, err
	}
	mixed := len(in.Categories) > 0 && len(in.Reals) > 0
	n := in.Len()
	if mixed {
		n = 0 // invalid; one call, for the plugin to reject
	}
	ranges := split(n, p.o.maxRequest, p.stepCost(states, in))
	if len(ranges) == 1 {
		return p.stepChunk(ctx, eps0, period, states, in)
	}
	reports, next = make([][]byte, 0, n), make([][]byte, 0, n)
	for _, r := range ranges {
		rep, nx, err := p.stepChunk(ctx, eps0, period, states[r[0]:r[1]], inputsRange(in, r))
		if err != nil {
			return nil, nil, fmt.Errorf("inputs [%d,%d): %w", r[0], r[1], err)
		}
		reports, next = append(reports, rep...), append(next, nx...)
	}
	return reports, next, nil
}

// stepChunk is one Step RPC, with the call timeout, restart and retry.
func (p *subprocess) stepChunk(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reports, next [][]byte, err error) {
	err = p.call(ctx, "Step", func(ctx context.Context, c *rpc.Client) (err error) {
		reports, next, err = c.Step(ctx, eps0, period, states, in)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return reports, next, nil
}

// stepCost is the cost function of a Step batch for split: an input, its
// state and its report, and the next state, of about the size of the
// largest state given (a first step's is not known before the answer).
func (p *subprocess) stepCost(states [][]byte, in sdk.Inputs) func(i int) int {
	maxState := 0
	for _, s := range states {
		maxState = max(maxState, len(s))
	}
	return func(i int) int {
		c := 8
		if len(in.Categories) > 0 {
			c = len(in.Categories[i]) + wireOverhead
		}
		c = max(c, p.desc.ReportBytes+wireOverhead)
		return c + max(len(states[i]), maxState) + wireOverhead
	}
}
