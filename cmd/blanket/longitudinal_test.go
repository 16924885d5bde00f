package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// These tests run the account commands on the longitudinal tree protocol:
// the real engine at small n and few periods (executeEngine, skipped with
// -short), and the plumbing with a fake engine.

// longitudinalMech parses spec as the CLI does, with the built-in plugins
// registered.
func longitudinalMech(t *testing.T, spec string) accountant.Mechanism {
	t.Helper()
	e := defaultEnv()
	if err := e.registerPlugins(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.closePlugins)
	m, err := e.registry.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonNum returns obj[key] as a float64, failing when it is not a number.
func jsonNum(t *testing.T, obj map[string]any, key string) float64 {
	t.Helper()
	v, ok := obj[key].(float64)
	if !ok {
		t.Fatalf("%s = %v (%T), want a number", key, obj[key], obj[key])
	}
	return v
}

// checkLongitudinalBaselines checks that the baselines are local = want
// and null for every published one.
func checkLongitudinalBaselines(t *testing.T, b any, want float64) {
	t.Helper()
	bl := checkBaselines(t, b)
	for _, name := range baselineNames() {
		if bl[name] != nil {
			t.Errorf("baseline %s = %v, want null for a tree protocol", name, bl[name])
		}
	}
	if bl["local"] != want {
		t.Errorf("baseline local = %v, want %g", bl["local"], want)
	}
}

// TestLongitudinalEps checks account eps on the built-in plugin at tree =
// 64 over a window of 30 periods against accountant.LongitudinalEpsilon,
// exactly: the command is a window over that same function.
func TestLongitudinalEps(t *testing.T) {
	const spec = "longitudinal:tree=64"
	out, stderr, code := executeEngine(t, "account", "eps", "--mech", spec, "--eps0", "1", "--n", "5000", "--delta", "1e-6", "--rounds", "30", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	want, err := accountant.LongitudinalEpsilon(longitudinalMech(t, spec), 1, 5000, 30, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	obj := decodeObject(t, out, append(epsKeys, "longitudinal")...)
	if got := jsonNum(t, obj, "eps_upper"); got != want.Upper {
		t.Errorf("eps_upper = %v, want LongitudinalEpsilon's %v", got, want.Upper)
	}
	if obj["mechanism"] != spec || obj["rounds"] != 30.0 || obj["n"] != 5000.0 || obj["eps_lower"] != 0.0 || obj["local_eps"] != want.Local || obj["amplified"] != true {
		t.Errorf("JSON = %v", obj)
	}
	checkLongitudinalBaselines(t, obj["baselines"], want.Local)
	parts, ok := obj["longitudinal"].(map[string]any)
	if !ok {
		t.Fatalf("longitudinal = %v, want an object", obj["longitudinal"])
	}
	for key, v := range map[string]float64{
		"upper": want.Upper, "per_period": want.PerPeriod, "trees": float64(want.Trees), "levels": float64(want.Levels),
		"mates": float64(want.Mates), "tail": want.Tail, "local": want.Local, "users": 0,
	} {
		if got := jsonNum(t, parts, key); got != v {
			t.Errorf("longitudinal.%s = %v, want %v", key, got, v)
		}
	}
	if parts["transcript"] != nil {
		t.Errorf("transcript = %v without --users, want null", parts["transcript"])
	}
	// A window of 30 periods meets two trees of 64 with 7 levels.
	if want.Trees != 2 || want.Levels != 7 {
		t.Errorf("trees %d, levels %d; want 2 and 7", want.Trees, want.Levels)
	}
}

// TestLongitudinalUsers checks that --users adds the transcript bound, the
// one of accountant.Longitudinal with Users set, and that the result is
// the smallest bound. At 700 users over two trees the transcript bound is
// the smaller one.
func TestLongitudinalUsers(t *testing.T) {
	const spec = "longitudinal:tree=64"
	out, stderr, code := executeEngine(t, "account", "eps", "--mech", spec, "--eps0", "1", "--n", "700", "--delta", "1e-6", "--rounds", "10", "--users", "700", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	l, ok, err := accountant.LongitudinalOf(longitudinalMech(t, spec), 1)
	if err != nil || !ok {
		t.Fatalf("LongitudinalOf: %v, %v", ok, err)
	}
	l.Periods, l.Batch, l.Users = 10, 700, 700
	want, err := l.Epsilon(1e-6)
	if err != nil {
		t.Fatal(err)
	}
	obj := decodeObject(t, out, "eps_upper", "longitudinal")
	parts := obj["longitudinal"].(map[string]any)
	tr, pp, up := jsonNum(t, parts, "transcript"), jsonNum(t, parts, "per_period"), jsonNum(t, obj, "eps_upper")
	if tr != want.Transcript || pp != want.PerPeriod || up != want.Upper || jsonNum(t, parts, "users") != 700 {
		t.Errorf("transcript %v, per_period %v, upper %v; want %v, %v, %v", tr, pp, up, want.Transcript, want.PerPeriod, want.Upper)
	}
	if !(tr < pp) || up != math.Min(tr, pp) {
		t.Errorf("transcript %v, per_period %v, upper %v: want the transcript bound smaller here, and upper the minimum", tr, pp, up)
	}
}

// TestLongitudinalCalibrate checks that the eps0 calibrate returns meets the
// target, by an independent evaluation of LongitudinalEpsilon there.
func TestLongitudinalCalibrate(t *testing.T) {
	const spec = "longitudinal:tree=8"
	out, stderr, code := executeEngine(t, "account", "calibrate", "--mech", spec, "--eps", "1", "--delta", "1e-6", "--n", "1000", "--rounds", "4", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, "eps0", "achieved", "baselines", "longitudinal")
	eps0 := jsonNum(t, obj, "eps0")
	got, err := accountant.LongitudinalEpsilon(longitudinalMech(t, spec), eps0, 1000, 4, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if !(got.Upper <= 1) {
		t.Errorf("eps at the calibrated eps0 = %g is %g, above the target 1", eps0, got.Upper)
	}
	// Shuffling 1000 reports allows more than the local bound alone: two
	// trees of eps0 each, eps0 = 1/2.
	if !(eps0 > 0.5) {
		t.Errorf("eps0 = %g, want above the local bound's 0.5", eps0)
	}
	if a := obj["achieved"].(map[string]any); jsonNum(t, a, "eps_upper") != got.Upper {
		t.Errorf("achieved eps_upper = %v, want %v", a["eps_upper"], got.Upper)
	}
	if p := obj["longitudinal"].(map[string]any); jsonNum(t, p, "upper") != got.Upper || jsonNum(t, p, "trees") != 2 {
		t.Errorf("longitudinal = %v, want upper %v over 2 trees", p, got.Upper)
	}
	checkLongitudinalBaselines(t, obj["baselines"], 0.5)
}

// TestLongitudinalDelta checks account delta at the eps that
// LongitudinalEpsilon gives at delta = 1e-6: the delta is at most 1e-6 (the
// round trip of longitudinal_delta_test.go, through the CLI) and the parts
// are reported.
func TestLongitudinalDelta(t *testing.T) {
	const spec = "longitudinal:tree=8"
	// The delta command gets the eps as text: the shortest decimal that
	// round-trips the float64 exactly.
	res, err := accountant.LongitudinalEpsilon(longitudinalMech(t, spec), 1, 2000, 8, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	eps := res.Upper
	out, stderr, code := executeEngine(t, "account", "delta", "--mech", spec, "--eps0", "1", "--n", "2000", "--rounds", "8", "--eps", strconv.FormatFloat(eps, 'g', -1, 64), "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, "delta_upper", "delta_lower", "baselines", "longitudinal")
	if d := jsonNum(t, obj, "delta_upper"); !(d > 0 && d <= 1e-6) {
		t.Errorf("delta at eps = %v is %v, want in (0, 1e-6]", eps, d)
	}
	p := obj["longitudinal"].(map[string]any)
	if p["transcript"] != nil || jsonNum(t, p, "trees") != 2 || jsonNum(t, p, "local") != 2 {
		t.Errorf("longitudinal = %v", p)
	}
	local := jsonNum(t, p, "local_delta")
	checkLongitudinalBaselines(t, obj["baselines"], local)
}

// TestLongitudinalCurve sweeps the window: every row is a tree protocol's,
// and the bound grows with the window.
func TestLongitudinalCurve(t *testing.T) {
	out, stderr, code := executeEngine(t, "account", "curve", "--mech", "longitudinal:tree=8", "--eps0", "1", "--n", "1000", "--rounds", "1:16", "--points", "3", "--delta", "1e-6")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("CSV: %v, %d records\n%s", err, len(recs), out)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	prev := 0.0
	for _, r := range recs[1:] {
		if r[col["local"]] == "" || r[col["clone"]] != "" {
			t.Errorf("row %v: want local and no clone", r)
		}
		var up float64
		if err := json.Unmarshal([]byte(r[col["eps_upper"]]), &up); err != nil || !(up >= prev) {
			t.Errorf("row %v: eps_upper below the previous window's %v", r, prev)
		}
		prev = up
	}
}

// TestLongitudinalPlumbing checks what the commands pass to the engine and
// print, with a fake engine: the window, the batch, --users, the effective
// eps0 of a mechanism that fixes its own.
func TestLongitudinalPlumbing(t *testing.T) {
	e := defaultEnv()
	var got []accountant.Longitudinal
	e.engine.longitudinalEpsilon = func(l accountant.Longitudinal, delta float64) (accountant.LongitudinalResult, error) {
		got = append(got, l)
		return accountant.LongitudinalResult{Upper: 0.25, PerPeriod: 0.5, Transcript: 0.25, Trees: 3, Levels: 5, Mates: 123, Tail: 1e-9, Local: 4.5}, nil
	}
	e.engine.longitudinalDelta = func(l accountant.Longitudinal, eps float64) (accountant.LongitudinalDeltaResult, error) {
		got = append(got, l)
		return accountant.LongitudinalDeltaResult{Upper: 2e-7, PerPeriod: 2e-7, Transcript: math.Inf(1), LocalDelta: 0.3, Trees: 3, Levels: 5, Mates: 99, Tail: 3e-8, Local: 4.5}, nil
	}
	out, stderr, code := execute(t, e, "account", "eps", "--mech", "longitudinal:tree=16:eps0=1.5", "--n", "4000", "--delta", "1e-6", "--rounds", "40", "--users", "3000")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if len(got) != 1 || got[0].Tree != 16 || got[0].Eps0 != 1.5 || got[0].Periods != 40 || got[0].Batch != 4000 || got[0].Users != 3000 {
		t.Fatalf("engine got %+v, want tree 16, eps0 1.5, 40 periods, batch 4000, 3000 users", got)
	}
	for _, want := range []string{"per_period", "0.5", "transcript", "0.25", "mates", "123", "users", "3000", "local", "4.5",
		"--rounds is the window in periods", "no lower bound is known for a tree protocol", "only local applies"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "shuffling cannot help") || strings.Contains(out, "not certified") {
		t.Errorf("notes of independent reports in a tree protocol's table:\n%s", out)
	}
	got = nil
	out, stderr, code = execute(t, e, "account", "delta", "--mech", "longitudinal:tree=16", "--eps0", "2", "--n", "4000", "--eps", "0.3", "--rounds", "40", "--json")
	if code != exitOK {
		t.Fatalf("delta: exit %d, stderr %s", code, stderr)
	}
	if len(got) != 1 || got[0].Eps0 != 2 || got[0].Users != 0 || got[0].Periods != 40 {
		t.Fatalf("engine got %+v", got)
	}
	obj := decodeObject(t, out, "delta_upper", "longitudinal")
	if p := obj["longitudinal"].(map[string]any); obj["delta_upper"] != 2e-7 || p["transcript"] != nil || p["local_delta"] != 0.3 || p["mates"] != 99.0 {
		t.Errorf("delta JSON = %v", obj)
	}
}

// TestLongitudinalErrors checks the usage errors: bad tree values, a tree
// protocol inside a combinator, --users on another mechanism, calibrating
// a fixed eps0.
func TestLongitudinalErrors(t *testing.T) {
	for _, tt := range []struct {
		mech string
		want []string
	}{
		{"longitudinal:tree=63", []string{"tree must be a power of two", "got 63", "^"}},
		{"longitudinal:tree=0", []string{"tree must be a power of two"}},
		{"longitudinal:tree=x", []string{"tree must be an integer"}},
		{"longitudinal:tree=8192", []string{"tree = 8192, must be a power of two in [1, 4096]"}},
		{"joint(longitudinal:tree=64,krr:k=2)", []string{"joint: longitudinal:tree=64 is a longitudinal tree protocol", "not independent across periods", "account for it alone"}},
		{"parallel(0.5:krr:k=2,0.5:longitudinal)", []string{"parallel: longitudinal is a longitudinal tree protocol"}},
		{"subsample(0.1,longitudinal:tree=8)", []string{"subsample: longitudinal:tree=8 is a longitudinal tree protocol"}},
	} {
		_, stderr, code := execute(t, defaultEnv(), "account", "eps", "--mech", tt.mech, "--eps0", "1", "--n", "5000", "--delta", "1e-6")
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d; stderr %s", tt.mech, code, exitUsage, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tt.mech, w, stderr)
			}
		}
	}
	_, stderr, code := execute(t, defaultEnv(), "account", "eps", "--mech", "krr:k=4", "--eps0", "1", "--n", "5000", "--delta", "1e-6", "--users", "100")
	if code != exitUsage || !strings.Contains(stderr, "--users 100: the transcript bound applies to a longitudinal tree protocol only") {
		t.Errorf("--users on krr: exit %d, stderr %s", code, stderr)
	}
	_, stderr, code = execute(t, defaultEnv(), "account", "calibrate", "--mech", "longitudinal:tree=8:eps0=1", "--eps", "1", "--delta", "1e-6", "--n", "1000")
	if code != exitUsage || !strings.Contains(stderr, "fixed eps0") {
		t.Errorf("calibrating a fixed eps0: exit %d, stderr %s", code, stderr)
	}
}

// TestLongitudinalHelp checks that the help documents the mechanism, the
// window and the precondition of --users.
func TestLongitudinalHelp(t *testing.T) {
	out, _, _ := execute(t, defaultEnv(), "account", "--help")
	for _, want := range []string{
		"longitudinal:tree=H     the tree protocol of Erlingsson et al. 2019 over trees of H",
		"--rounds is the window in periods",
		"Registered mechanisms:", "longitudinal",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("account --help lacks %q", want)
		}
	}
	for _, sub := range []string{"eps", "delta", "curve"} {
		out, _, _ := execute(t, defaultEnv(), "account", sub, "--help")
		// The help wraps lines: compare with single spaces.
		out = strings.Join(strings.Fields(out), " ")
		for _, want := range []string{"--users", "the reports of all U users are shuffled in one batch", "every user reports at every end of a node of its level", "--rounds W is the window in periods"} {
			if !strings.Contains(out, want) {
				t.Errorf("account %s --help lacks %q", sub, want)
			}
		}
	}
}
