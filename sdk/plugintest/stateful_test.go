package plugintest_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/internal/counter"
	"github.com/blanket-dp/blanket/sdk/plugin"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// statefulLight are the options of the kit's runs on the longitudinal
// plugin here: one budget, a few thousand users per state sequence and a
// few hundred per estimator batch, so that a run stays near a second
// under the race detector (make test). The statistical tests keep their
// false-failure rate (1e-6 per run); only their power is lower, and the
// broken randomizers below are far beyond it (see their comments).
var statefulLight = plugintest.Options{Eps0s: []float64{1}, Samples: 4000, Batches: 40, BatchSize: 300}

// protocolLight are lighter still, for the runs through the plugin
// protocol, which are about the protocol: TestStatefulConformance runs
// the statistical checks in process.
var protocolLight = plugintest.Options{Eps0s: []float64{1}, Samples: 1000, Batches: 20, BatchSize: 200}

// only returns statefulLight with every check but those skipped.
func only(checks ...string) plugintest.Options {
	o := statefulLight
	for _, c := range []string{plugintest.CheckDeclaration, plugintest.CheckFrequencies, plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics} {
		if !slices.Contains(checks, c) {
			o.Skip = append(o.Skip, c)
		}
	}
	return o
}

func newLongitudinal(tree, changes int, seed uint64) *longitudinal.Randomizer {
	return must(longitudinal.New(longitudinal.Options{Tree: tree, Changes: changes, Rand: seeded(seed)}))
}

// TestStatefulConformance runs the kit on the longitudinal tree protocol:
// small trees (4 periods and k = 2; one period), where the declared whole-transcript level is checked by
// enumeration and the sampler's transcripts by chi-square, and the
// default tree of 64 periods, where those two are skipped with a message
// and everything else runs.
func TestStatefulConformance(t *testing.T) {
	tests := []struct {
		name    string
		r       sdk.Randomizer
		opts    plugintest.Options
		skipped []string // tests expected to be skipped, by name fragment
	}{
		{"tree4-k2", newLongitudinal(4, 2, 1), statefulLight, nil},
		{"tree1-k1", newLongitudinal(1, 1, 3), statefulLight, nil},
		// Lighter: this case is about what runs on a large tree.
		{"default", must(longitudinal.FromConfig(sdk.Config{})), protocolLight, []string{"transcript level", "transcripts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := plugintest.Verify(t.Context(), tt.r, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() {
				t.Fatalf("the kit failed the longitudinal plugin:\n%s", rep)
			}
			for _, c := range rep.Checks {
				want := plugintest.Pass
				switch c.Name {
				case plugintest.CheckPrivacy:
					want = plugintest.Skip // a tree's transcripts are tested against their exact law instead
				case plugintest.CheckBlanket, plugintest.CheckFloorEstimate:
					want = plugintest.Skip // the tree protocol offers no blanket draws (plugins/longitudinal says why)
				}
				if c.Status != want {
					t.Errorf("check %s: %s, want %s:\n%s", c.Name, c.Status, want, rep)
				}
			}
			for _, frag := range tt.skipped {
				if !hasTest(rep, "", frag, plugintest.Skip) {
					t.Errorf("no skipped test %q:\n%s", frag, rep)
				}
			}
			if tt.skipped == nil && (hasTest(rep, plugintest.CheckDeclaration, "", plugintest.Skip) || hasTest(rep, plugintest.CheckFrequencies, "", plugintest.Skip) || hasTest(rep, plugintest.CheckEstimator, "", plugintest.Skip)) {
				t.Errorf("a small tree skips tests:\n%s", rep)
			}
		})
	}
}

// hasTest reports whether check (any when "") has a test whose name
// contains frag with the given status.
func hasTest(rep *plugintest.Report, check, frag string, status plugintest.Status) bool {
	for _, c := range rep.Checks {
		if check != "" && c.Name != check {
			continue
		}
		for _, tt := range c.Tests {
			if tt.Status == status && strings.Contains(tt.Name, frag) {
				return true
			}
		}
	}
	return false
}

// The broken stateful randomizers below each wrap a correct longitudinal
// randomizer (tree 4, k = 2) and break one rule; the kit must fail each
// in the named checks.

// smallEps0 declares a whole-transcript level 0.3 below the budget with
// the budget's node law: the node's ratio e^eps0 exceeds it (declaration:
// the accountant's validation, the kit's ratio and the enumeration).
type smallEps0 struct{ *longitudinal.Randomizer }

func (s smallEps0) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := s.Randomizer.Declare(ctx, eps0)
	if err == nil {
		d.Eps0 = eps0 - 0.3
	}
	return d, err
}

// leakyNode declares a node law whose every column ratio is e^eps0 (so
// that the accountant accepts it node by node) but in which the value 0
// is not between -1 and +1: rows (-1, 0, +1) = (hi, lo), (lo, hi),
// (hi, lo). A change moving from one node to another then changes two
// reports each by e^eps0, a transcript ratio of e^(2·eps0): only the
// enumeration of whole transcripts catches it.
type leakyNode struct{ *longitudinal.Randomizer }

func (l leakyNode) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := l.Randomizer.Declare(ctx, eps0)
	if err != nil {
		return nil, err
	}
	e := math.Exp(eps0)
	hi, lo := e/(e+1), 1/(e+1)
	m, err := accountant.NewMatrix([][]float64{{hi, lo}, {lo, hi}, {hi, lo}})
	if err != nil {
		return nil, err
	}
	d.Matrix = m
	return d, nil
}

// hotStep steps at eps0 + 1.5 what it declares at eps0: at eps0 = 1 a
// node holding the change keeps its sign with probability 0.92 instead
// of 0.73: over 4000 users of a sequence with a change, the chi-square
// statistic of the transcripts is in the hundreds, against a threshold
// near 75. (Its estimates are biased by a factor tanh(1.25)/tanh(0.5) =
// 1.8 as well, but with the light options' 40 batches of 300 users that
// is only about 4 standard errors: the estimator check may pass it.)
type hotStep struct{ *longitudinal.Randomizer }

func (h hotStep) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) ([][]byte, [][]byte, error) {
	return h.Randomizer.Step(ctx, eps0+1.5, period, states, in)
}

// longitudinalLevelByte is the offset of the level h in a longitudinal
// state (plugins/longitudinal/state.go); levels is L of a tree of 4.
const (
	longitudinalLevelByte = 28
	longitudinalLevels    = 3
)

// restless redraws its level at every step (rewriting it in the state):
// the periods it reports in no longer follow one level's nodes, which
// the frequency check sees in nearly every user.
type restless struct {
	*longitudinal.Randomizer
	rng *rand.Rand
}

func (r restless) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) ([][]byte, [][]byte, error) {
	moved := make([][]byte, len(states))
	for i, s := range states {
		if len(s) > longitudinalLevelByte {
			s = append([]byte(nil), s...)
			s[longitudinalLevelByte] = byte(1 + r.rng.IntN(longitudinalLevels))
		}
		moved[i] = s
	}
	return r.Randomizer.Step(ctx, eps0, period, moved, in)
}

// forgiving starts afresh (new random choices) on a state it cannot
// take, a replayed period included: a user could then draw again.
type forgiving struct{ *longitudinal.Randomizer }

func (f forgiving) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) ([][]byte, [][]byte, error) {
	reps, next, err := f.Randomizer.Step(ctx, eps0, period, states, in)
	if errors.Is(err, sdk.ErrBadState) {
		return f.Randomizer.Step(ctx, eps0, period, make([][]byte, len(states)), in)
	}
	return reps, next, err
}

// otherK declares k = 1 while it reports one of 2 changes: half of the
// users draw j = 2, whose node values the declared law (always the first
// change) does not have, so every sequence with a change fails, with a
// chi-square statistic in the hundreds against a threshold near 75.
type otherK struct{ *longitudinal.Randomizer }

func (o otherK) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := o.Randomizer.Declare(ctx, eps0)
	if err == nil {
		d.Changes = 1
	}
	return d, err
}

// perPeriodSpan says each period is estimated alone (Span 1): a tree
// protocol's estimate needs the tree's periods merged. The declaration
// check fails it (Span must be Tree). Its estimates are biased too, but
// in a tree of 4 only at position 3 (whose cover reaches back to node
// (2,1)), by about 7 standard errors with the light options: near the
// estimator check's threshold, so that check is not required to fail.
type perPeriodSpan struct{ *longitudinal.Randomizer }

func (p perPeriodSpan) Describe(ctx context.Context) (*sdk.Description, error) {
	d, err := p.Randomizer.Describe(ctx)
	if err == nil {
		d.Span = 1
	}
	return d, err
}

func TestStatefulBrokenFail(t *testing.T) {
	r := func(seed uint64) *longitudinal.Randomizer { return newLongitudinal(4, 2, seed) }
	// Each case runs only the checks it must fail (TestStatefulConformance
	// shows the others pass on the wrapped randomizer).
	tests := []struct {
		name   string
		r      sdk.Randomizer
		failed []string
		test   string // a test that must fail, by name fragment ("" for any)
	}{
		{"declares a smaller transcript level", smallEps0{r(30)}, []string{plugintest.CheckDeclaration}, "transcript level"},
		{"node law leaks over two nodes", leakyNode{r(31)}, []string{plugintest.CheckDeclaration, plugintest.CheckFrequencies}, "transcript level"},
		{"steps at a larger eps0", hotStep{r(32)}, []string{plugintest.CheckFrequencies}, ""},
		{"redraws its level every period", restless{r(33), rand.New(rand.NewPCG(33, 34))}, []string{plugintest.CheckFrequencies}, ""},
		{"starts afresh on a bad state", forgiving{r(34)}, []string{plugintest.CheckInputs}, "replayed period"},
		{"declares another k", otherK{r(35)}, []string{plugintest.CheckFrequencies}, "states 0110"},
		{"span of one period", perPeriodSpan{r(36)}, []string{plugintest.CheckDeclaration}, "span"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := plugintest.Verify(t.Context(), tt.r, only(tt.failed...))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", rep)
			if rep.Passed() {
				t.Fatalf("the kit passed a broken randomizer:\n%s", rep)
			}
			for _, name := range tt.failed {
				if c := rep.Check(name); c == nil || c.Status != plugintest.Fail {
					t.Errorf("check %q did not fail:\n%s", name, rep)
				}
			}
			if tt.test != "" && !hasTest(rep, "", tt.test, plugintest.Fail) {
				t.Errorf("no failed test %q:\n%s", tt.test, rep)
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("report does not encode as JSON: %v", err)
			}
		})
	}
}

// TestStatefulWithoutTree runs the kit on a stateful randomizer that
// declares no tree protocol (sdk/internal/counter, the host's test
// randomizer, which declares k-RR per period and reports its inputs): the
// declaration check fails it, the checks that step a tree protocol are
// skipped with a message, and those of the contract that still apply
// (inputs and states through Step, reports, statistics) run.
func TestStatefulWithoutTree(t *testing.T) {
	r := must(counter.FromConfig(sdk.Config{Categories: []string{"a", "b", "c"}}))
	rep, err := plugintest.Verify(t.Context(), r, statefulLight)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]plugintest.Status{
		plugintest.CheckDescribe:    plugintest.Pass,
		plugintest.CheckDeclaration: plugintest.Fail,
		plugintest.CheckFrequencies: plugintest.Skip,
		plugintest.CheckEstimator:   plugintest.Skip,
		plugintest.CheckInputs:      plugintest.Pass,
		plugintest.CheckReports:     plugintest.Pass,
		plugintest.CheckStatistics:  plugintest.Pass,
	}
	for name, s := range want {
		if c := rep.Check(name); c == nil || c.Status != s {
			t.Errorf("check %s is not %s:\n%s", name, s, rep)
		}
	}
	if !hasTest(rep, plugintest.CheckDeclaration, "tree", plugintest.Fail) {
		t.Errorf("no failed tree test:\n%s", rep)
	}
}

// TestStatefulOverGRPC runs the kit on the longitudinal plugin behind the
// plugin protocol in process (Step, Outputs and the error sentinels,
// sdk.ErrBadState included, cross as gRPC).
func TestStatefulOverGRPC(t *testing.T) {
	cfg := sdk.Config{Params: map[string]string{"tree": "4", "changes": "2"}}
	plugintest.Run(t, served(t, sdk.FactoryOf(longitudinal.FromConfig), cfg), protocolLight)
}

// TestStatefulPluginProcess runs the kit on the blanket-longitudinal
// binary through the host (plugin.Open), as `blanket plugin verify
// path/to/blanket-longitudinal` does: Step goes through the host's
// chunking and the plugin process. It builds the binary, so it is skipped
// in -short mode.
func TestStatefulPluginProcess(t *testing.T) {
	dir := filepath.Dir(testbuild.Named(t, "github.com/blanket-dp/blanket/plugins/longitudinal/cmd/blanket-longitudinal", plugin.BinaryPrefix+longitudinal.Name))
	p, err := plugin.Open(t.Context(), longitudinal.Name, sdk.Config{Params: map[string]string{"tree": "4", "changes": "2"}},
		plugin.WithBuiltins(nil), plugin.WithPluginDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, ok := any(p).(sdk.Stateful); !ok {
		t.Fatal("host.Plugin does not implement sdk.Stateful")
	}
	plugintest.Run(t, p, protocolLight)
}
