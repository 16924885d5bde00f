package sdk

import (
	"context"
	"errors"
	"fmt"
)

// ErrBadState reports a per-user state a stateful randomizer cannot take: a
// version it does not know, bytes it did not write, a configuration other
// than the one that wrote it, or a period that is not after the state's
// last one (a replayed period would release a second, independent report
// of the same data).
var ErrBadState = errors.New("sdk: bad randomizer state")

// Stateful is an optional interface of a Randomizer that keeps per-user
// state across reporting periods: a longitudinal protocol whose whole
// transcript over many periods is private only because its random choices
// are drawn once and kept (plugins/longitudinal, Erlingsson et al. 2019).
// Such a randomizer says so in its Description (Stateful) and answers
// Randomize with an error wrapping errors.ErrUnsupported: its reports come
// from Step.
//
// The plugin protocol carries it (RPC Step); a built-in and a plugin process
// are used the same way.
//
// The host's duties, which the privacy of the transcript rests on:
//
//   - It calls Step once per period, in increasing period order, with the
//     period's value (the last value recorded, carried forward over periods
//     without a new one).
//   - It persists the returned state atomically with the period's report
//     (sdk/client: in the outbox, in one transaction) before the report can
//     leave the device, and passes exactly that state back at the next
//     step. A state that is lost, or a step redone after its report left,
//     would redraw a random choice: a user could then pick among draws.
//   - It never edits a state: states are opaque, versioned by the
//     randomizer.
type Stateful interface {
	// Step advances per-user states to the period with index period
	// (periods are numbered from the Unix epoch: a period's start divided by
	// the plan's period length) with that period's inputs, one per state and
	// in the same order; a nil state is a user's first step, at which the
	// randomizer draws its random choices. It returns, per input, the
	// period's report (nil when the randomizer sends none this period) and
	// the next state. Periods skipped since a state's last step carry its
	// last input forward; their reports are not sent.
	//
	// Errors: ErrBadState (a state it cannot read, or period not after the
	// state's last), ErrBadInput, ErrBadEps0; one bad element fails the
	// batch with an error that names its index.
	Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in Inputs) (reports, next [][]byte, err error)
}

// CheckStep is the check every host makes of a Step answer for n inputs:
// it returns an error wrapping ErrPluginFailed unless the answer has n
// reports and n non-empty states, and sets every empty report to nil (a
// period without a report).
func CheckStep(n int, reports, next [][]byte) error {
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
