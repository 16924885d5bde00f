package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
)

// execute runs the command line in-process and returns stdout, stderr and
// the exit code.
func execute(t *testing.T, e *env, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut, e)
	return out.String(), errOut.String(), code
}

// fake is an engine with closed-form results, for testing the plumbing
// without the numerical engine. It records the calls it gets.
type fake struct {
	mu    sync.Mutex
	calls []string
	// inFlight and maxInFlight measure the concurrency of epsilon calls.
	inFlight, maxInFlight atomic.Int64
	// barrier, when not nil, makes every epsilon call wait until it is
	// closed, so that a test can observe the concurrency.
	barrier chan struct{}
	// fail makes epsilon fail at this n.
	fail int
}

func (f *fake) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// baselines returns a value for clone and fmt21 and nil for the others.
func (f *fake) baselines(v float64) map[string]*float64 {
	return map[string]*float64{
		accountant.BaselineClone: &v,
		accountant.BaselineFMT21: new(2 * v),
	}
}

// compositionBaselines returns a value for basic_composition and
// clone_composed, nil for kov15 and for the single-report ones (as the
// accountant does for several rounds).
func (f *fake) compositionBaselines(v float64) map[string]*float64 {
	m := map[string]*float64{
		accountant.BaselineBasicComposition: &v,
		accountant.BaselineKOV15:            nil,
		accountant.BaselineCloneComposed:    new(v / 2),
	}
	for _, name := range accountant.BaselineNames {
		m[name] = nil
	}
	return m
}

// fakeComposition is the fake's composition: p.Rounds reports, eps
// growing with the square root of the rounds when one report is amplified,
// the local eps of all reports when not.
type fakeComposition struct {
	f *fake
	p accountant.Part
}

// single is the fake's one-report upper bound.
func (c *fakeComposition) single() float64 {
	return math.Min(c.p.Eps0, 10*c.p.Eps0/math.Sqrt(float64(c.p.N)))
}

func (c *fakeComposition) Epsilon(delta float64) (accountant.EpsilonResult, error) {
	c.f.record("composed epsilon %g %d %g", c.p.Eps0, c.p.Rounds, delta)
	local := float64(c.p.Rounds) * c.p.Eps0
	up := local
	if c.single() < c.p.Eps0 {
		up = math.Min(local, c.single()*math.Sqrt(float64(c.p.Rounds)))
	}
	return accountant.EpsilonResult{Upper: up, Lower: up / 2, LocalEps: local, Amplified: up < local, Tight: true}, nil
}

func (c *fakeComposition) Delta(eps float64) (accountant.DeltaResult, error) {
	c.f.record("composed delta %g %d %g", c.p.Eps0, c.p.Rounds, eps)
	return accountant.DeltaResult{Upper: 1e-6 * float64(c.p.Rounds), Lower: 5e-7}, nil
}

func (c *fakeComposition) EpsilonBaselines(delta float64) (map[string]*float64, error) {
	if c.p.Rounds == 1 {
		return c.f.baselines(c.p.Eps0), nil
	}
	return c.f.compositionBaselines(float64(c.p.Rounds) * c.single()), nil
}

func (c *fakeComposition) DeltaBaselines(eps float64) (map[string]*float64, error) {
	if c.p.Rounds == 1 {
		return c.f.baselines(1e-5), nil
	}
	return c.f.compositionBaselines(1e-5 * float64(c.p.Rounds)), nil
}

func (c *fakeComposition) withRounds(rounds int) (composition, error) {
	p := c.p
	p.Rounds = rounds
	return &fakeComposition{f: c.f, p: p}, nil
}

func (f *fake) env() *env {
	return &env{
		engine: engine{
			epsilon: func(m accountant.Mechanism, eps0 float64, n int, delta float64) (accountant.EpsilonResult, error) {
				f.record("epsilon %s %g %d %g", m, eps0, n, delta)
				cur := f.inFlight.Add(1)
				defer f.inFlight.Add(-1)
				for {
					old := f.maxInFlight.Load()
					if cur <= old || f.maxInFlight.CompareAndSwap(old, cur) {
						break
					}
				}
				if f.barrier != nil {
					<-f.barrier
				}
				if n == f.fail {
					return accountant.EpsilonResult{}, errors.New("fake failure")
				}
				up := math.Min(eps0, 10*eps0/math.Sqrt(float64(n)))
				return accountant.EpsilonResult{Upper: up, Lower: up / 2, LocalEps: eps0, Amplified: up < eps0, Tight: true}, nil
			},
			delta: func(m accountant.Mechanism, eps0 float64, n int, eps float64) (accountant.DeltaResult, error) {
				f.record("delta %s %g %d %g", m, eps0, n, eps)
				return accountant.DeltaResult{Upper: 1e-6, Lower: 5e-7}, nil
			},
			calibrate: func(m accountant.Mechanism, t accountant.Target) (accountant.CalibrationResult, error) {
				f.record("calibrate %s %g %g %d rounds %d", m, t.Eps, t.Delta, t.N, t.Rounds)
				if _, ok := m.FixedEps0(); ok {
					return accountant.CalibrationResult{}, accountant.ErrNotCalibratable
				}
				return accountant.CalibrationResult{Eps0: 3, Achieved: accountant.EpsilonResult{Upper: t.Eps, Lower: t.Eps / 2, LocalEps: 3, Amplified: true, Tight: true}}, nil
			},
			epsilonBaselines: func(m accountant.Mechanism, eps0 float64, n int, delta float64) (map[string]*float64, error) {
				return f.baselines(eps0), nil
			},
			deltaBaselines: func(m accountant.Mechanism, eps0 float64, n int, eps float64) (map[string]*float64, error) {
				return f.baselines(1e-5), nil
			},
			calibrateBaselines: func(m accountant.Mechanism, t accountant.Target) (map[string]*float64, error) {
				if t.Rounds > 1 {
					return f.compositionBaselines(2 / float64(t.Rounds)), nil
				}
				return f.baselines(2), nil
			},
			compose: func(p accountant.Part) (composition, error) {
				f.record("compose %s %g %d %d", p.Mech, p.Eps0, p.N, p.Rounds)
				return &fakeComposition{f: f, p: p}, nil
			},
		},
		registry:   mechspec.NewRegistry(),
		workers:    4,
		isTerminal: func(io.Writer) bool { return false },
	}
}

// decodeObject decodes one JSON object and checks that it has the keys.
func decodeObject(t *testing.T, data string, keys ...string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(data), &obj); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, data)
	}
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON lacks key %q: %s", k, data)
		}
	}
	return obj
}

// checkBaselines checks that b is an object with every baseline name, the
// single-report and the composition ones.
func checkBaselines(t *testing.T, b any) map[string]any {
	t.Helper()
	m, ok := b.(map[string]any)
	if !ok {
		t.Fatalf("baselines = %v (%T), want an object", b, b)
	}
	for _, name := range slices.Concat(accountant.BaselineNames, accountant.CompositionBaselineNames) {
		if _, ok := m[name]; !ok {
			t.Errorf("baselines lack %q: %v", name, m)
		}
	}
	return m
}

var epsKeys = []string{"mechanism", "eps0", "n", "rounds", "delta", "eps_upper", "eps_lower", "local_eps", "amplified", "tight", "baselines", "seconds"}

func TestEpsJSON(t *testing.T) {
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "eps", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--delta", "1e-6", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, epsKeys...)
	bl := checkBaselines(t, obj["baselines"])
	if bl["clone"] != 4.0 || bl["bbgn19_hoeffding"] != nil {
		t.Errorf("baselines = %v, want clone 4 and bbgn19_hoeffding null", bl)
	}
	if obj["n"] != 1e6 || obj["mechanism"] != "krr:k=100" || obj["eps_upper"] != 0.04 {
		t.Errorf("JSON = %v", obj)
	}
	if want := []string{"epsilon krr:k=100 4 1000000 1e-06"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls = %v, want %v", f.calls, want)
	}
}

func TestEpsTable(t *testing.T) {
	f := &fake{}
	out, _, code := execute(t, f.env(), "account", "eps", "--mech", "generic", "--eps0", "4", "--n", "1_000_000", "--delta", "1e-6")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"upper", "0.04", "lower", "0.02", "clone", "fmt21", "8", "bbgn19_bennett", "n/a", "efmrtt19"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "shuffling cannot help") {
		t.Errorf("note for an amplified result:\n%s", out)
	}
	// n = 4: the fake does not amplify.
	out, _, _ = execute(t, f.env(), "account", "eps", "--mech", "generic", "--eps0", "4", "--n", "4", "--delta", "1e-6")
	if !strings.Contains(out, "shuffling cannot help at this n; eps = eps0") {
		t.Errorf("no note for an unamplified result:\n%s", out)
	}
	out, _, _ = execute(t, f.env(), "account", "eps", "--mech", "generic", "--eps0", "4", "--n", "4", "--delta", "1e-6", "--json")
	if obj := decodeObject(t, out, "amplified"); obj["amplified"] != false {
		t.Errorf("amplified = %v, want false", obj["amplified"])
	}
}

func TestDeltaJSON(t *testing.T) {
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "delta", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--eps", "0.5", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, "mechanism", "eps0", "n", "eps", "delta_upper", "delta_lower", "baselines", "seconds")
	checkBaselines(t, obj["baselines"])
	out, _, _ = execute(t, f.env(), "account", "delta", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--eps", "0.5")
	if !strings.Contains(out, "1e-06") || !strings.Contains(out, "delta") {
		t.Errorf("table:\n%s", out)
	}
}

func TestCalibrateJSON(t *testing.T) {
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "calibrate", "--mech", "krr:k=100", "--eps", "1", "--delta", "1e-6", "--n", "1e6", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, "mechanism", "eps", "delta", "n", "eps0", "achieved", "baselines", "seconds")
	checkBaselines(t, obj["baselines"])
	if obj["eps0"] != 3.0 {
		t.Errorf("eps0 = %v, want 3", obj["eps0"])
	}
	out, _, _ = execute(t, f.env(), "account", "calibrate", "--mech", "krr:k=100", "--eps", "1", "--delta", "1e-6", "--n", "1e6")
	if !strings.Contains(out, "largest eps0") || !strings.Contains(out, "this work") {
		t.Errorf("table:\n%s", out)
	}
	// A fixed mechanism cannot be calibrated: a usage error.
	_, stderr, code = execute(t, f.env(), "account", "calibrate", "--mech", "generic:eps0=1", "--eps", "1", "--delta", "1e-6", "--n", "1e6")
	if code != exitUsage || !strings.Contains(stderr, "fixed eps0") {
		t.Errorf("fixed mechanism: exit %d, stderr %s", code, stderr)
	}
}

func TestFixedEps0(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rr.json")
	if err := os.WriteFile(path, []byte(`{"eps0": 1.1, "rows": [[0.75, 0.25], [0.25, 0.75]]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fake{}
	// A mechanism that fixes its budget needs no --eps0.
	_, stderr, code := execute(t, f.env(), "account", "eps", "--mech", "matrix:"+mechspec.Quote(path), "--n", "100", "--delta", "1e-6")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if len(f.calls) != 1 || !strings.Contains(f.calls[0], " 1.1 100 ") {
		t.Errorf("calls = %v, want eps0 1.1", f.calls)
	}
	// One that does not, does.
	_, stderr, code = execute(t, f.env(), "account", "eps", "--mech", "krr:k=2", "--n", "100", "--delta", "1e-6")
	if code != exitUsage || !strings.Contains(stderr, "missing required flag --eps0: krr:k=2 does not fix its own local budget") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
}

func TestCountFlag(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"1e6", 1000000, true},
		{"1_000_000", 1000000, true},
		{"1000000", 1000000, true},
		{"1", 1, true},
		{"1e10", 10_000_000_000, true},
		{"1.5", 0, false},
		{"0", 0, false},
		{"-5", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e11", 0, false},
		{"", 0, false},
		{"ten", 0, false},
	}
	for _, tt := range tests {
		v := newCountValue()
		err := v.Set(tt.in)
		if (err == nil) != tt.ok || v.v != tt.want {
			t.Errorf("Set(%q) = %v, v = %d; want ok %v, v = %d", tt.in, err, v.v, tt.ok, tt.want)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	base := []string{"account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--n", "1e6", "--delta", "1e-6"}
	with := func(flag, value string) []string {
		args := slices.Clone(base)
		i := slices.Index(args, flag)
		args[i+1] = value
		return args
	}
	tests := []struct {
		args []string
		msg  string
	}{
		{with("--n", "1.5"), `--n must be an integer in [1, 10000000000] (e.g. 1e6, 1_000_000), got "1.5"`},
		{with("--n", "NaN"), `--n must be an integer in [1, 10000000000]`},
		{with("--n", "-1"), `--n must be an integer in [1, 10000000000]`},
		{with("--n", "Inf"), `got "Inf"`},
		{with("--delta", "1"), `--delta must be a number in (0,1), got "1"`},
		{with("--delta", "0"), `--delta must be a number in (0,1), got "0"`},
		{with("--delta", "NaN"), `--delta must be a number in (0,1), got "NaN"`},
		{with("--eps0", "0"), `--eps0 must be a finite number in (0, 30], got "0"`},
		{with("--eps0", "Inf"), `--eps0 must be a finite number in (0, 30], got "Inf"`},
		{with("--eps0", "-2"), `--eps0 must be a finite number in (0, 30], got "-2"`},
		{with("--mech", "krr:k=1"), `--mech: mechspec: at 6 in "krr:k=1": krr: k must be >= 2, got 1`},
		{with("--mech", "joint(krr:k=10,"), `--mech: mechspec: at 15 in "joint(krr:k=10,": expected mechanism name, got end of input`},
		{[]string{"account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--delta", "1e-6"}, "missing required flag --n"},
		{[]string{"account", "eps", "--eps0", "4", "--n", "5", "--delta", "1e-6"}, "missing required flag --mech"},
		{[]string{"account", "delta", "--mech", "krr:k=10", "--eps0", "4", "--n", "5", "--eps", "0"}, `--eps must be a finite number > 0, got "0"`},
		{[]string{"account", "eps", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"account", "eps", "extra", "--mech", "krr:k=10"}, `unknown command "extra"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := &fake{}
			out, stderr, code := execute(t, f.env(), tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, tt.msg) {
				t.Errorf("stderr %q lacks %q", stderr, tt.msg)
			}
			if strings.Contains(stderr+out, "Usage:") {
				t.Errorf("usage dumped on a value error:\n%s%s", out, stderr)
			}
			if len(f.calls) > 0 {
				t.Errorf("engine called: %v", f.calls)
			}
		})
	}
}

func TestCaret(t *testing.T) {
	_, stderr, _ := execute(t, (&fake{}).env(), "account", "eps", "--mech", "joint(krr:k=10,krr)", "--eps0", "1", "--n", "5", "--delta", "0.1")
	want := "  joint(krr:k=10,krr)\n                 ^\n"
	if !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr %q does not end with the caret %q", stderr, want)
	}
}

func TestEngineErrorExit(t *testing.T) {
	e := (&fake{}).env()
	e.engine.epsilon = func(accountant.Mechanism, float64, int, float64) (accountant.EpsilonResult, error) {
		return accountant.EpsilonResult{}, errors.New("boom")
	}
	_, stderr, code := execute(t, e, "account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--n", "5", "--delta", "0.1")
	if code != exitFailure || stderr != "blanket: boom\n" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	e.engine.epsilon = func(accountant.Mechanism, float64, int, float64) (accountant.EpsilonResult, error) {
		return accountant.EpsilonResult{}, fmt.Errorf("%w: eps0 too big", accountant.ErrInvalidArgument)
	}
	if _, _, code := execute(t, e, "account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--n", "5", "--delta", "0.1"); code != exitUsage {
		t.Errorf("invalid argument: exit %d, want %d", code, exitUsage)
	}
}

func TestHelpAndVersion(t *testing.T) {
	f := &fake{}
	out, _, code := execute(t, f.env(), "--help")
	if code != exitOK || !strings.Contains(out, "proves the central (eps, delta)") || !strings.Contains(out, "blanket serve") {
		t.Errorf("root help (exit %d):\n%s", code, out)
	}
	out, _, _ = execute(t, f.env(), "account", "--help")
	for _, want := range []string{"joint(M1,M2,...)", "parallel(W1:M1,W2:M2)", "subsample(S,M)", "matrix:FILE.json", "Registered mechanisms: generic, krr, matrix."} {
		if !strings.Contains(out, want) {
			t.Errorf("account help lacks %q", want)
		}
	}
	out, _, _ = execute(t, f.env(), "account", "curve", "--help")
	for _, want := range []string{"log-spaced", "--plot", "--points"} {
		if !strings.Contains(out, want) {
			t.Errorf("curve help lacks %q", want)
		}
	}
	out, _, code = execute(t, f.env(), "version")
	if code != exitOK || !strings.HasPrefix(out, "blanket ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	out, _, code = execute(t, f.env(), "--version")
	if code != exitOK || !strings.HasPrefix(out, "blanket ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

func TestCurveCSV(t *testing.T) {
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e3:1e8", "--points", "6", "--delta", "1e-6")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("output is not CSV: %v\n%s", err, out)
	}
	wantHeader := slices.Concat(curveColumns, accountant.BaselineNames, accountant.CompositionBaselineNames, []string{"seconds"})
	if !slices.Equal(recs[0], wantHeader) {
		t.Errorf("header = %v, want %v", recs[0], wantHeader)
	}
	var ns []string
	for _, r := range recs[1:] {
		ns = append(ns, r[0])
	}
	if want := []string{"1000", "10000", "100000", "1000000", "10000000", "100000000"}; !slices.Equal(ns, want) {
		t.Errorf("n column = %v, want %v", ns, want)
	}
	if got := recs[1][slices.Index(recs[0], "bbgn19_hoeffding")]; got != "" {
		t.Errorf("missing baseline cell = %q, want empty", got)
	}
	if stderr != "" {
		t.Errorf("stderr is not a terminal but got %q", stderr)
	}
}

func TestCurveEps0JSON(t *testing.T) {
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "curve", "--mech", "krr:k=100", "--eps0", "0.5:8", "--n", "1e6", "--points", "5", "--delta", "1e-6", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	// Log-spaced from 0.5 to 8 in 5 points: ratio 2.
	want := []float64{0.5, 1, 2, 4, 8}
	// spacingTol allows the rounding of exp(log(16) i/4).
	const spacingTol = 1e-12
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		for _, k := range epsKeys {
			if _, ok := r[k]; !ok {
				t.Errorf("row %d lacks %q", i, k)
			}
		}
		checkBaselines(t, r["baselines"])
		if e := r["eps0"].(float64); math.Abs(e-want[i]) > spacingTol*want[i] {
			t.Errorf("row %d eps0 = %v, want %v", i, e, want[i])
		}
	}
}

func TestCurveErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--eps0", "1:2", "--n", "1:100"}, exitUsage, "exactly one of --n, --eps0 and --rounds must be a range LO:HI, got --n 1:100 and --eps0 1:2"},
		{[]string{"--eps0", "1", "--n", "1:100", "--rounds", "1:10"}, exitUsage, "exactly one of --n, --eps0 and --rounds must be a range LO:HI, got --n 1:100 and --rounds 1:10"},
		{[]string{"--eps0", "1:2", "--n", "1:100", "--rounds", "1:10"}, exitUsage, "got --n 1:100 and --eps0 1:2 and --rounds 1:10"},
		{[]string{"--eps0", "1", "--n", "100"}, exitUsage, "exactly one of --n, --eps0 and --rounds must be a range LO:HI (e.g. --n 1e3:1e8), got none"},
		{[]string{"--eps0", "1", "--n", "100", "--rounds", "5"}, exitUsage, "got none"},
		{[]string{"--eps0", "1", "--n", "100", "--rounds", "0:10"}, exitUsage, `--rounds must be an integer in [1, 1000000] (e.g. 365, 1e3, 1_000), or a range LO:HI of such values, got "0:10"`},
		{[]string{"--eps0", "1", "--n", "100", "--rounds", "10:5"}, exitUsage, `--rounds must be a range LO:HI with LO < HI, got "10:5"`},
		{[]string{"--eps0", "1", "--n", "100", "--rounds", "1:2e6"}, exitUsage, `--rounds must be an integer in [1, 1000000]`},
		{[]string{"--eps0", "2:1", "--n", "100"}, exitUsage, `--eps0 must be a range LO:HI with LO < HI, got "2:1"`},
		{[]string{"--eps0", "1", "--n", "1:1.5"}, exitUsage, `--n must be an integer in [1, 10000000000] (e.g. 1e6, 1_000_000), or a range LO:HI of such values, got "1:1.5"`},
		{[]string{"--eps0", "1", "--n", "1:100", "--points", "1"}, exitUsage, `--points must be an integer in [2, 10000], got "1"`},
		{[]string{"--eps0", "1", "--n", "1:100", "--plot", "x.gif"}, exitUsage, `--plot must name a .svg, .png, .pdf file, got "x.gif"`},
		{[]string{"--eps0", "1", "--n", "10:1000", "--points", "3"}, exitFailure, "point 2: n=100 eps0=1: fake failure"},
		{[]string{"--eps0", "1:2", "--n", "100", "--mech", "generic:eps0=1"}, exitUsage, "--eps0 1:2: sweeping eps0 has no effect, generic:eps0=1 fixes its own local budget"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := &fake{fail: 100}
			args := append([]string{"account", "curve", "--mech", "krr:k=3", "--delta", "1e-6"}, tt.args...)
			_, stderr, code := execute(t, f.env(), args...)
			if code != tt.code || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.msg)
			}
		})
	}
}

func TestCurvePlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"eps.svg", "eps.png", "eps.pdf"} {
		path := filepath.Join(dir, name)
		f := &fake{}
		_, stderr, code := execute(t, f.env(), "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e2:1e8", "--points", "7", "--delta", "1e-6", "--plot", path)
		if code != exitOK {
			t.Fatalf("%s: exit %d, stderr %s", name, code, stderr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 1000 {
			t.Errorf("%s: %d bytes", name, len(data))
		}
		if name == "eps.svg" {
			for _, want := range []string{"eps upper (this work)", "eps lower (this work)", "clone", "fmt21", "krr:k=100, eps0 = 4, delta = 1e-06", "n (number of users)"} {
				if !bytes.Contains(data, []byte(want)) {
					t.Errorf("svg lacks %q", want)
				}
			}
			// bbgn19_hoeffding has no values: no legend entry.
			if bytes.Contains(data, []byte("bbgn19_hoeffding")) {
				t.Errorf("svg has a legend entry for a baseline without values")
			}
		}
	}
}

func TestCurveProgress(t *testing.T) {
	f := &fake{}
	e := f.env()
	e.isTerminal = func(io.Writer) bool { return true }
	_, stderr, code := execute(t, e, "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e3:1e8", "--points", "4", "--delta", "1e-6")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if !strings.Contains(stderr, "4/4 points (100%)") || !strings.HasSuffix(stderr, "\r\x1b[K") {
		t.Errorf("progress = %q", stderr)
	}
}

func TestCurveConcurrency(t *testing.T) {
	f := &fake{barrier: make(chan struct{})}
	e := f.env()
	e.workers = 3
	done := make(chan string)
	go func() {
		out, _, _ := execute(t, e, "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1:1e4", "--points", "9", "--delta", "1e-6")
		done <- out
	}()
	// Wait until the pool is full, then release every call.
	for f.inFlight.Load() < int64(e.workers) {
		runtime.Gosched()
	}
	close(f.barrier)
	out := <-done
	if got := f.maxInFlight.Load(); got != int64(e.workers) {
		t.Errorf("max concurrent calls = %d, want %d", got, e.workers)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 10 {
		t.Fatalf("CSV: %v, %d records\n%s", err, len(recs), out)
	}
	prev := 0
	for _, r := range recs[1:] {
		n, _ := strconv.Atoi(r[0])
		if n <= prev {
			t.Errorf("rows out of order: n = %d after %d", n, prev)
		}
		prev = n
	}
}
