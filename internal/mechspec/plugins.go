package mechspec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// Opener opens a configured randomizer plugin by name: a built-in linked
// into the process or a plugin binary (plugin.Open with plugin.WithBuiltins and
// plugin.WithPluginDir).
type Opener func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error)

// MaxCategories bounds the number of categories a spec may ask a plugin for.
const MaxCategories = 1 << 22

// Plugin returns the constructor of randomizer plugin name, whose
// declaration the accountant obtains from the plugin's Declare at every
// eps0. Parameters map to the plugin's configuration: categories=N (and, for
// categorical plugins, k=N or d=N) asks for N categories labelled 0..N-1;
// eps0=E fixes the local budget; every other key=value goes to the
// plugin's Params. For summation, k is its number of levels (a parameter);
// summation and laplace take the range [0, 1] (their declarations do not
// depend on it). For longitudinal, tree=H (periods per tree, a power of
// two) and changes=K are checked here before the plugin sees them.
func Plugin(ctx context.Context, name string, open Opener) Constructor {
	return func(p Params) (accountant.Mechanism, error) {
		cfg := sdk.Config{Params: map[string]string{}}
		var eps0 float64
		for _, key := range p.Keys() {
			switch {
			case key == "eps0":
				e, err := ownEps0(p)
				if err != nil {
					return nil, err
				}
				eps0 = e
			case name == longitudinalName && (key == "tree" || key == "changes"):
				v, err := longitudinalParam(p, key)
				if err != nil {
					return nil, err
				}
				cfg.Params[key] = strconv.Itoa(v)
			case key == "categories" || ((key == "k" || key == "d") && name != "summation"):
				n, err := p.Int(key)
				if err != nil {
					return nil, err
				}
				if n < 2 || n > MaxCategories {
					return nil, p.Invalid(key, fmt.Sprintf("in [2, %d]", MaxCategories))
				}
				cfg.Categories = make([]string, n)
				for i := range cfg.Categories {
					cfg.Categories[i] = strconv.Itoa(i)
				}
			default:
				v, err := p.String(key)
				if err != nil {
					return nil, err
				}
				cfg.Params[key] = v
			}
		}
		if name == "summation" || name == "laplace" {
			cfg.Lo, cfg.Hi = 0, 1
		}
		r, err := open(ctx, name, cfg)
		if err != nil {
			if errors.Is(err, sdk.ErrBadConfig) && len(cfg.Categories) == 0 && cfg.Lo == cfg.Hi && name != longitudinalName {
				// A categorical plugin given no categories: say which
				// keys give them (the host's, not the plugin's).
				err = fmt.Errorf("%w; a categorical plugin's mechanism needs its number of categories: add k=N (or d=N, or categories=N)", err)
			}
			return nil, p.Wrap("", err)
		}
		spec := name
		if keys := p.Keys(); len(keys) > 0 {
			parts := []string{name}
			for _, k := range keys {
				v, _ := p.String(k)
				parts = append(parts, k+"="+v)
			}
			spec = strings.Join(parts, ":")
		}
		return accountant.FuncMech{
			Name: spec,
			Eps0: eps0,
			Declare: func(e float64) (*accountant.Declaration, error) {
				return r.Declare(ctx, e)
			},
		}, nil
	}
}

// PluginBinaries returns the plugin names of the executables named
// plugin.BinaryPrefix+name in dir, sorted. A missing dir has none.
func PluginBinaries(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugin dir: %w", err)
	}
	var names []string
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), plugin.BinaryPrefix)
		if !ok || n == "" || e.IsDir() {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode()&0o111 != 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// RegisterPlugins registers every name in names that the registry does not
// have yet (krr keeps its exact analytic form) as a plugin mechanism.
func RegisterPlugins(ctx context.Context, r *Registry, open Opener, names []string) error {
	have := map[string]bool{}
	for _, n := range r.Names() {
		have[n] = true
	}
	for _, n := range names {
		if have[n] {
			continue
		}
		if err := r.Register(n, Plugin(ctx, n, open)); err != nil {
			return err
		}
		have[n] = true
	}
	return nil
}
