package mechspec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
)

func TestPluginParams(t *testing.T) {
	ctx := context.Background()
	var got []sdk.Config
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		got = append(got, cfg)
		return builtin.Open(ctx, name, cfg)
	}
	r := mechspec.NewRegistry()
	if err := mechspec.RegisterPlugins(ctx, r, open, []string{"krr", "rappor", "summation"}); err != nil {
		t.Fatal(err)
	}
	// krr keeps its analytic form.
	if m, err := r.Parse("krr:k=5"); err != nil || !reflect.DeepEqual(m, accountant.KRRMech{K: 5}) {
		t.Errorf("krr:k=5 = %#v, %v; want the analytic KRRMech", m, err)
	}
	m, err := r.Parse("rappor:d=6:mode=symmetric:eps0=1.5")
	if err != nil {
		t.Fatal(err)
	}
	cfg := got[len(got)-1]
	if len(cfg.Categories) != 6 || cfg.Params["mode"] != "symmetric" {
		t.Errorf("rappor config = %+v, want 6 categories and mode=symmetric", cfg)
	}
	if e, ok := m.FixedEps0(); !ok || e != 1.5 {
		t.Errorf("FixedEps0 = %g, %v; want 1.5, true", e, ok)
	}
	// The mechanism's decomposition is the plugin's own declaration.
	d, err := m.Decompose(0)
	if err != nil {
		t.Fatal(err)
	}
	if d.LocalEps != 1.5 || len(d.Upper) == 0 {
		t.Errorf("decomposition = %+v", d)
	}
	if _, err := r.Parse("summation:k=10"); err != nil {
		t.Fatal(err)
	}
	if cfg := got[len(got)-1]; cfg.Params["k"] != "10" || len(cfg.Categories) != 0 || cfg.Hi != 1 {
		t.Errorf("summation config = %+v, want Params k=10 and range [0,1]", cfg)
	}
	var me *mechspec.Error
	if _, err := r.Parse("rappor:d=1"); !errors.As(err, &me) {
		t.Errorf("rappor:d=1: err = %v, want a mechspec error", err)
	}
	if _, err := r.Parse("rappor:d=4:colour=red"); err == nil {
		t.Error("rappor with an unknown parameter parsed")
	}
}

func TestPluginBinaries(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"blanket-olh": 0o755, "blanket-noexec": 0o644, "other": 0o755, "blanket-": 0o755} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	got, err := mechspec.PluginBinaries(dir)
	if err != nil || !reflect.DeepEqual(got, []string{"olh"}) {
		t.Errorf("PluginBinaries = %v, %v; want [olh]", got, err)
	}
	if got, err := mechspec.PluginBinaries(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("missing dir: %v, %v", got, err)
	}
}
