package main

import (
	"context"
	"io"
	"os"
	"runtime"
	"sort"
	"time"

	"golang.org/x/term"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// engine is the part of the accountant the commands call. Tests substitute
// a fake to check the plumbing without the numerical engine.
type engine struct {
	epsilon            func(m accountant.Mechanism, eps0 float64, n int, delta float64) (accountant.EpsilonResult, error)
	delta              func(m accountant.Mechanism, eps0 float64, n int, eps float64) (accountant.DeltaResult, error)
	calibrate          func(m accountant.Mechanism, t accountant.Target) (accountant.CalibrationResult, error)
	epsilonBaselines   func(m accountant.Mechanism, eps0 float64, n int, delta float64) (map[string]*float64, error)
	deltaBaselines     func(m accountant.Mechanism, eps0 float64, n int, eps float64) (map[string]*float64, error)
	calibrateBaselines func(m accountant.Mechanism, t accountant.Target) (map[string]*float64, error)
	// compose returns the composition of p.Rounds reports of one user,
	// each shuffled in its own batch of p.N (accountant.NewComposition).
	// The commands use it when --rounds is more than 1 and for sweeps over
	// rounds; one report goes through the functions above.
	compose func(p accountant.Part) (composition, error)
	// longitudinalEpsilon, longitudinalDelta and calibrateLongitudinal
	// account a longitudinal tree protocol over a window of periods
	// (accountant.Longitudinal, accountant.CalibrateLongitudinal). A nil
	// one is the accountant's (see longEpsilon).
	longitudinalEpsilon   func(l accountant.Longitudinal, delta float64) (accountant.LongitudinalResult, error)
	longitudinalDelta     func(l accountant.Longitudinal, eps float64) (accountant.LongitudinalDeltaResult, error)
	calibrateLongitudinal func(m accountant.Mechanism, t accountant.Target) (accountant.CalibrationResult, error)
}

// longEpsilon is engine.longitudinalEpsilon, Longitudinal.Epsilon when nil.
func (g engine) longEpsilon(l accountant.Longitudinal, delta float64) (accountant.LongitudinalResult, error) {
	if g.longitudinalEpsilon == nil {
		return l.Epsilon(delta)
	}
	return g.longitudinalEpsilon(l, delta)
}

// longDelta is engine.longitudinalDelta, Longitudinal.Delta when nil.
func (g engine) longDelta(l accountant.Longitudinal, eps float64) (accountant.LongitudinalDeltaResult, error) {
	if g.longitudinalDelta == nil {
		return l.Delta(eps)
	}
	return g.longitudinalDelta(l, eps)
}

// longCalibrate is engine.calibrateLongitudinal,
// accountant.CalibrateLongitudinal when nil.
func (g engine) longCalibrate(m accountant.Mechanism, t accountant.Target) (accountant.CalibrationResult, error) {
	if g.calibrateLongitudinal == nil {
		return accountant.CalibrateLongitudinal(m, t)
	}
	return g.calibrateLongitudinal(m, t)
}

// composition is the part of *accountant.Composition the commands use.
type composition interface {
	Epsilon(delta float64) (accountant.EpsilonResult, error)
	Delta(eps float64) (accountant.DeltaResult, error)
	EpsilonBaselines(delta float64) (map[string]*float64, error)
	DeltaBaselines(eps float64) (map[string]*float64, error)
	// withRounds returns the same report over rounds rounds, sharing the
	// memoised single-report evaluations (Composition.WithRounds).
	withRounds(rounds int) (composition, error)
}

// accountantComposition adapts *accountant.Composition to composition.
type accountantComposition struct{ *accountant.Composition }

func (c accountantComposition) withRounds(rounds int) (composition, error) {
	w, err := c.WithRounds(rounds)
	if err != nil {
		return nil, err
	}
	return accountantComposition{w}, nil
}

// compose is the real engine.compose.
func compose(p accountant.Part) (composition, error) {
	c, err := accountant.NewComposition(p)
	if err != nil {
		return nil, err
	}
	return accountantComposition{c}, nil
}

// env is everything a command depends on besides its flags.
type env struct {
	// engine computes the bounds.
	engine engine
	// registry parses --mech.
	registry *mechspec.Registry
	// workers bounds the concurrency of curve sweeps.
	workers int
	// isTerminal reports whether w is a terminal (progress is shown only
	// then).
	isTerminal func(w io.Writer) bool
	// statusDelay is how long a single long computation runs before a
	// "working" line appears on a terminal (see status.go).
	statusDelay time.Duration
	// open opens randomizer plugins (built-ins and binaries in pluginDir);
	// nil disables plugin mechanisms.
	open func(ctx context.Context, name string, cfg sdk.Config, dir string) (sdk.Randomizer, error)
	// opened are the plugins to close when the command ends.
	opened []io.Closer
	// pluginDir is the --plugin-dir flag.
	pluginDir string
}

// registerPlugins adds the built-in plugins and the binaries in dir to the
// --mech registry. Plugins are opened only when a spec names them.
func (e *env) registerPlugins(ctx context.Context, dir string) error {
	if e.open == nil {
		return nil
	}
	names, err := mechspec.PluginBinaries(dir)
	if err != nil {
		return err
	}
	for n := range builtin.Factories() {
		names = append(names, n)
	}
	sort.Strings(names)
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := e.open(ctx, name, cfg, dir)
		if c, ok := r.(io.Closer); ok && err == nil {
			e.opened = append(e.opened, c)
		}
		return r, err
	}
	return mechspec.RegisterPlugins(ctx, e.registry, open, names)
}

// closePlugins closes every plugin opened by the command.
func (e *env) closePlugins() {
	for _, c := range e.opened {
		c.Close()
	}
	e.opened = nil
}

// openPlugin is the real opener: built-ins in process, others from dir.
func openPlugin(ctx context.Context, name string, cfg sdk.Config, dir string) (sdk.Randomizer, error) {
	opts := []plugin.Option{}
	if dir != "" {
		opts = append(opts, plugin.WithPluginDir(dir))
	}
	p, err := builtin.Open(ctx, name, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// defaultEnv is the environment of the real command.
func defaultEnv() *env {
	return &env{
		engine: engine{
			epsilon:            accountant.Epsilon,
			delta:              accountant.Delta,
			calibrate:          accountant.Calibrate,
			epsilonBaselines:   accountant.EpsilonBaselines,
			deltaBaselines:     accountant.DeltaBaselines,
			calibrateBaselines: accountant.CalibrateBaselines,
			compose:            compose,
			longitudinalEpsilon: func(l accountant.Longitudinal, delta float64) (accountant.LongitudinalResult, error) {
				return l.Epsilon(delta)
			},
			longitudinalDelta: func(l accountant.Longitudinal, eps float64) (accountant.LongitudinalDeltaResult, error) {
				return l.Delta(eps)
			},
			calibrateLongitudinal: accountant.CalibrateLongitudinal,
		},
		registry:    mechspec.NewRegistry(),
		workers:     runtime.GOMAXPROCS(0),
		isTerminal:  isTerminal,
		statusDelay: time.Second,
		open:        openPlugin,
	}
}

// isTerminal reports whether w is a file attached to a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
