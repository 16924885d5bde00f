package host

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
)

// Builtin returns the built-in randomizer name of builtins configured with
// cfg, called in process. Errors wrap sdk.ErrBadConfig (an invalid name,
// or the factory's error for the configuration) or sdk.ErrPluginNotFound
// (no built-in of that name).
func Builtin(name string, cfg sdk.Config, builtins map[string]sdk.Factory) (Plugin, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	f, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not built in", sdk.ErrPluginNotFound, name)
	}
	r, err := f(cfg)
	if err != nil {
		return nil, err
	}
	return &inProcess{name: name, r: r}, nil
}

// inProcess is the Plugin of a built-in randomizer: the randomizer's own
// methods, behind the checks a Plugin makes.
type inProcess struct {
	name   string
	r      sdk.Randomizer
	closed atomic.Bool
}

var _ Plugin = (*inProcess)(nil)

func (p *inProcess) errClosed() error {
	return fmt.Errorf("%w: %s", sdk.ErrClosed, p.name)
}

// Name implements Plugin.
func (p *inProcess) Name() string { return p.name }

// Path implements Plugin: "" for a built-in.
func (p *inProcess) Path() string { return "" }

// Running implements Plugin: true until Close.
func (p *inProcess) Running() bool { return !p.closed.Load() }

// Restarts implements Plugin: 0, a built-in runs in process.
func (p *inProcess) Restarts() int64 { return 0 }

// Close implements Plugin.
func (p *inProcess) Close() error {
	p.closed.Store(true)
	return nil
}

// Describe implements sdk.Randomizer.
func (p *inProcess) Describe(ctx context.Context) (*sdk.Description, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	return p.r.Describe(ctx)
}

// Declare implements sdk.Randomizer.
func (p *inProcess) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	return p.r.Declare(ctx, eps0)
}

// DeclareForm implements sdk.FormDeclarer when the randomizer does, and
// fails with an error wrapping errors.ErrUnsupported otherwise.
func (p *inProcess) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	fd, ok := p.r.(sdk.FormDeclarer)
	if !ok {
		return nil, fmt.Errorf("plugin %s: DeclareForm: %w", p.name, errors.ErrUnsupported)
	}
	return fd.DeclareForm(ctx, eps0, form)
}

// Randomize implements sdk.Randomizer.
func (p *inProcess) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	return p.r.Randomize(ctx, eps0, in)
}

// Accumulate implements sdk.Randomizer.
func (p *inProcess) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	return p.r.Accumulate(ctx, eps0, reports)
}

// Estimate implements sdk.Randomizer.
func (p *inProcess) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	return p.r.Estimate(ctx, stat)
}

// Outputs implements sdk.OutputMapper when the randomizer does, and fails
// with an error wrapping errors.ErrUnsupported otherwise.
func (p *inProcess) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	om, ok := p.r.(sdk.OutputMapper)
	if !ok {
		return nil, fmt.Errorf("plugin %s: Outputs: %w", p.name, errors.ErrUnsupported)
	}
	return om.Outputs(ctx, eps0, reports)
}

// Atoms implements sdk.AtomMapper when the randomizer does, and fails
// with an error wrapping errors.ErrUnsupported otherwise.
func (p *inProcess) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	am, ok := p.r.(sdk.AtomMapper)
	if !ok {
		return nil, fmt.Errorf("plugin %s: Atoms: %w", p.name, errors.ErrUnsupported)
	}
	return am.Atoms(ctx, eps0, set, inputs, reports)
}

// SampleBlanket implements sdk.BlanketSampler when the randomizer does,
// and fails with an error wrapping errors.ErrUnsupported otherwise.
func (p *inProcess) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	bs, ok := p.r.(sdk.BlanketSampler)
	if !ok {
		return nil, fmt.Errorf("plugin %s: SampleBlanket: %w", p.name, errors.ErrUnsupported)
	}
	return bs.SampleBlanket(ctx, eps0, n)
}

// EstimateFloor implements sdk.FloorEstimator when the randomizer does,
// and fails with an error wrapping errors.ErrUnsupported otherwise.
func (p *inProcess) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if p.closed.Load() {
		return nil, p.errClosed()
	}
	fe, ok := p.r.(sdk.FloorEstimator)
	if !ok {
		return nil, fmt.Errorf("plugin %s: EstimateFloor: %w", p.name, errors.ErrUnsupported)
	}
	return fe.EstimateFloor(ctx, stat)
}

// Step implements sdk.Stateful when the randomizer does, and fails with an
// error wrapping errors.ErrUnsupported otherwise. The answer is checked
// (sdk.CheckStep); len(states) must be in.Len(), else the error wraps
// sdk.ErrBadInput.
func (p *inProcess) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) (reports, next [][]byte, err error) {
	if p.closed.Load() {
		return nil, nil, p.errClosed()
	}
	if err := CheckStepStates(p.name, states, in); err != nil {
		return nil, nil, err
	}
	st, ok := p.r.(sdk.Stateful)
	if !ok {
		return nil, nil, fmt.Errorf("plugin %s: Step: %w: the randomizer is not stateful", p.name, errors.ErrUnsupported)
	}
	reports, next, err = st.Step(ctx, eps0, period, states, in)
	if err != nil {
		return nil, nil, err
	}
	if err := sdk.CheckStep(in.Len(), reports, next); err != nil {
		return nil, nil, fmt.Errorf("plugin %s: %w", p.name, err)
	}
	return reports, next, nil
}

// CheckStepStates checks a Step call of plugin name before it runs: one
// state per input, else an error wrapping sdk.ErrBadInput. Inputs that mix
// categories and reals pass, for the randomizer to reject. Every Plugin
// implementation checks its Step with it.
func CheckStepStates(name string, states [][]byte, in sdk.Inputs) error {
	mixed := len(in.Categories) > 0 && len(in.Reals) > 0
	if n := in.Len(); !mixed && len(states) != n {
		return fmt.Errorf("%w: plugin %s: Step with %d states for %d inputs", sdk.ErrBadInput, name, len(states), n)
	}
	return nil
}
