// Command testplugin is a misbehaving plugin for the host's tests, served as
// blanket-testplugin: k-RR (plugins/krr) that hangs, crashes, panics or lies
// on request. Its parameters, removed before the rest of the configuration
// goes to krr.FromConfig:
//
//	hang=M1,M2    the named methods (configure, describe, declare, randomize,
//	              accumulate, estimate: Estimate and EstimateFloor) block
//	              for an hour, ignoring ctx
//	crash=M1,M2   the named methods exit the process with status 3
//	panic=M1,M2   the named methods panic
//	crash_once=F  the first Randomize exits the process unless file F
//	              exists, creating it first (so the host's retry succeeds)
//	name=N        Describe names the plugin N instead of "testplugin"
package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(build) }

type misbehaving struct {
	*krr.Randomizer
	hang, crash, panic []string
	crashOnce          string
	name               string
}

func build(cfg sdk.Config) (sdk.Randomizer, error) {
	m := &misbehaving{name: "testplugin"}
	rest := map[string]string{}
	for k, v := range cfg.Params {
		switch k {
		case "hang":
			m.hang = strings.Split(v, ",")
		case "crash":
			m.crash = strings.Split(v, ",")
		case "panic":
			m.panic = strings.Split(v, ",")
		case "crash_once":
			m.crashOnce = v
		case "name":
			m.name = v
		default:
			rest[k] = v
		}
	}
	m.misbehave("configure")
	cfg.Params = rest
	r, err := krr.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	m.Randomizer = r
	return m, nil
}

func (m *misbehaving) misbehave(method string) {
	if slices.Contains(m.hang, method) {
		time.Sleep(time.Hour)
	}
	if slices.Contains(m.crash, method) {
		os.Exit(3)
	}
	if slices.Contains(m.panic, method) {
		panic("testplugin: asked to panic in " + method)
	}
}

func (m *misbehaving) Describe(ctx context.Context) (*sdk.Description, error) {
	m.misbehave("describe")
	d, err := m.Randomizer.Describe(ctx)
	if err != nil {
		return nil, err
	}
	d.Name = m.name
	return d, nil
}

func (m *misbehaving) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	m.misbehave("declare")
	return m.Randomizer.Declare(ctx, eps0)
}

func (m *misbehaving) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	m.misbehaveRandomize()
	return m.Randomizer.Randomize(ctx, eps0, in)
}

// RandomizePacked misbehaves as Randomize does: the embedded krr
// randomizer's would otherwise be promoted, and the server calls it instead
// of Randomize.
func (m *misbehaving) RandomizePacked(ctx context.Context, eps0 float64, in sdk.PackedInputs) ([]byte, error) {
	m.misbehaveRandomize()
	return m.Randomizer.RandomizePacked(ctx, eps0, in)
}

func (m *misbehaving) misbehaveRandomize() {
	m.misbehave("randomize")
	if m.crashOnce != "" {
		if _, err := os.Stat(m.crashOnce); err != nil {
			if f, err := os.Create(m.crashOnce); err == nil {
				f.Close()
			}
			os.Exit(3)
		}
	}
}

func (m *misbehaving) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	m.misbehave("accumulate")
	return m.Randomizer.Accumulate(ctx, eps0, reports)
}

func (m *misbehaving) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	m.misbehave("estimate")
	return m.Randomizer.Estimate(ctx, stat)
}

func (m *misbehaving) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	m.misbehave("estimate")
	return m.Randomizer.EstimateFloor(ctx, stat)
}
