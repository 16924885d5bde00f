package mechspec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
)

// pluginRegistry is NewRegistry with the built-in plugins opened in
// process, as the CLI registers them.
func pluginRegistry(t *testing.T) *mechspec.Registry {
	t.Helper()
	ctx := context.Background()
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		return builtin.Open(ctx, name, cfg)
	}
	var names []string
	for n := range builtin.Factories() {
		names = append(names, n)
	}
	r := mechspec.NewRegistry()
	if err := mechspec.RegisterPlugins(ctx, r, open, names); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLongitudinalPlugin checks that longitudinal resolves through the
// plugin into a tree protocol the accountant recognises, with the plugin's
// own node law, and that independent-report accounting refuses it.
func TestLongitudinalPlugin(t *testing.T) {
	r := pluginRegistry(t)
	for _, tt := range []struct {
		spec  string
		tree  int
		eps0  float64
		fixed bool
	}{
		{"longitudinal", 64, 1, false}, // the plugin's default tree
		{"longitudinal:tree=64", 64, 1, false},
		{"longitudinal:tree=1_024:changes=4", 1024, 1, false},
		{"longitudinal:tree=1", 1, 1, false},
		{"longitudinal:tree=8:eps0=1.5", 8, 1.5, true},
	} {
		m, err := r.Parse(tt.spec)
		if err != nil {
			t.Errorf("%s: %v", tt.spec, err)
			continue
		}
		if e, ok := m.FixedEps0(); ok != tt.fixed || (ok && e != tt.eps0) {
			t.Errorf("%s: FixedEps0 = %g, %v", tt.spec, e, ok)
		}
		if ok, err := accountant.IsLongitudinal(m); !ok || err != nil {
			t.Errorf("%s: IsLongitudinal = %v, %v; want true", tt.spec, ok, err)
		}
		l, ok, err := accountant.LongitudinalOf(m, 1)
		if !ok || err != nil || l.Tree != tt.tree || l.Eps0 != tt.eps0 {
			t.Errorf("%s: LongitudinalOf = %+v, %v, %v; want tree %d, eps0 %g", tt.spec, l, ok, err, tt.tree, tt.eps0)
			continue
		}
		// The plugin declares randomized response at the nodes.
		want := accountant.NodeMatrix(tt.eps0)
		for v := range want {
			for b := range want[v] {
				if l.Node[v][b] != want[v][b] {
					t.Errorf("%s: node law %v, want %v", tt.spec, l.Node, want)
				}
			}
		}
		if _, err := m.Decompose(1); !errors.Is(err, accountant.ErrLongitudinal) {
			t.Errorf("%s: Decompose: err = %v, want ErrLongitudinal", tt.spec, err)
		}
	}
}

// TestLongitudinalBadParams checks that bad values of tree, changes and
// eps0 are *Error values of kind ErrParam that name the parameter and the
// rule, pointing at the value when the grammar checks it.
func TestLongitudinalBadParams(t *testing.T) {
	r := pluginRegistry(t)
	for _, tt := range []struct {
		spec string
		pos  int    // -1: not checked
		msg  string // substring of the error
	}{
		{"longitudinal:tree=63", 18, "longitudinal: tree must be a power of two in [1, 32768] (the periods per tree), got 63"},
		{"longitudinal:tree=0", 18, "tree must be a power of two"},
		{"longitudinal:tree=-8", 18, "tree must be a power of two"},
		{"longitudinal:tree=65536", 18, "tree must be a power of two in [1, 32768]"},
		{"longitudinal:tree=1e3", 18, "tree must be a power of two"},
		{"longitudinal:tree=abc", 18, "longitudinal: tree must be an integer, got abc"},
		{"longitudinal:tree=2.5", 18, "tree must be an integer"},
		{"longitudinal:changes=0", 21, "changes must be >= 1"},
		{"longitudinal:tree=8:eps0=0", 25, "eps0 must be in (0, "},
		{"longitudinal:tree=8:eps0=nan", 25, "eps0 must be a finite number"},
		// The plugin's own bounds: a tree it cannot run, more changes than
		// periods.
		{"longitudinal:tree=8192", -1, "tree = 8192, must be a power of two in [1, 4096]"},
		{"longitudinal:tree=8:changes=9", -1, "changes = 9"},
		{"longitudinal:tree=8:colour=red", -1, `no parameter "colour"`},
	} {
		_, err := r.Parse(tt.spec)
		var e *mechspec.Error
		if !errors.As(err, &e) || !errors.Is(err, mechspec.ErrParam) {
			t.Errorf("%s: err = %v, want a mechspec ErrParam error", tt.spec, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err = %q, want it to contain %q", tt.spec, err, tt.msg)
		}
		if tt.pos >= 0 && e.Pos != tt.pos {
			t.Errorf("%s: position %d, want %d", tt.spec, e.Pos, tt.pos)
		}
	}
}

// TestLongitudinalInCombinator checks that a tree protocol inside joint,
// parallel or subsample, at any depth, is refused when parsed, with an
// error that says why, points at the component and wraps
// accountant.ErrLongitudinal.
func TestLongitudinalInCombinator(t *testing.T) {
	r := pluginRegistry(t)
	for _, tt := range []struct {
		spec, combinator string
		pos              int
	}{
		{"joint(longitudinal:tree=64,krr:k=2)", "joint", 6},
		{"joint(krr:k=2, longitudinal)", "joint", 15},
		{"parallel(0.5:krr:k=3,0.5: longitudinal:tree=8)", "parallel", 26},
		{"subsample(0.5,longitudinal:tree=8:eps0=1)", "subsample", 14},
		{"joint(krr:k=2,subsample(0.1,longitudinal))", "subsample", 28},
	} {
		_, err := r.Parse(tt.spec)
		var e *mechspec.Error
		if !errors.As(err, &e) || !errors.Is(err, mechspec.ErrParam) || !errors.Is(err, accountant.ErrLongitudinal) {
			t.Errorf("%s: err = %v, want a mechspec ErrParam error wrapping ErrLongitudinal", tt.spec, err)
			continue
		}
		for _, want := range []string{tt.combinator + ": longitudinal", "is a longitudinal tree protocol", "not independent across periods", "account for it alone"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %q, want it to contain %q", tt.spec, err, want)
			}
		}
		if e.Pos != tt.pos {
			t.Errorf("%s: position %d, want %d", tt.spec, e.Pos, tt.pos)
		}
	}
	// Other plugins stay usable in combinators.
	if _, err := r.Parse("joint(rappor:d=4,subsample(0.5,krr:k=3))"); err != nil {
		t.Errorf("joint of non-longitudinal plugins: %v", err)
	}
}

// TestLongitudinalMatrixFile checks that a declaration file with a tree is
// a tree protocol (validated through its node's law), refused in
// combinators like the plugin.
func TestLongitudinalMatrixFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return "matrix:" + mechspec.Quote(path)
	}
	// Randomized response at eps0 = ln 3 on the node values -1, 0, +1.
	good := write("tree.json", `{"form": "matrix", "tree": 16, "matrix": {"rows": [[0.75, 0.25], [0.5, 0.5], [0.25, 0.75]]}}`)
	r := mechspec.NewRegistry()
	m, err := r.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	l, ok, err := accountant.LongitudinalOf(m, 1)
	// eps0Tol: the computed eps0 is the log of a ratio of decimal
	// probabilities, a few ulps from ln 3.
	const eps0Tol = 1e-12
	if !ok || err != nil || l.Tree != 16 || !(l.Eps0 > 1.0986122886681098-eps0Tol && l.Eps0 < 1.0986122886681098+eps0Tol) {
		t.Errorf("LongitudinalOf = %+v, %v, %v; want tree 16 at eps0 ln 3", l, ok, err)
	}
	if _, err := r.Parse("joint(krr:k=2," + good + ")"); !errors.Is(err, accountant.ErrLongitudinal) {
		t.Errorf("in joint: err = %v, want ErrLongitudinal", err)
	}
	// A node law that is not 3 rows, or a tree that is not a power of two.
	for _, bad := range []string{
		`{"form": "matrix", "tree": 16, "matrix": {"rows": [[0.75, 0.25], [0.25, 0.75]]}}`,
		`{"form": "matrix", "tree": 12, "matrix": {"rows": [[0.75, 0.25], [0.5, 0.5], [0.25, 0.75]]}}`,
	} {
		if _, err := r.Parse(write("bad.json", bad)); !errors.Is(err, accountant.ErrInvalidDeclaration) {
			t.Errorf("%s: err = %v, want ErrInvalidDeclaration", bad, err)
		}
	}
}
