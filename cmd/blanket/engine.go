package main

import (
	"io"
	"os"
	"runtime"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
	"golang.org/x/term"
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
		},
		registry:   mechspec.NewRegistry(),
		workers:    runtime.GOMAXPROCS(0),
		isTerminal: isTerminal,
	}
}

// isTerminal reports whether w is a file attached to a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
