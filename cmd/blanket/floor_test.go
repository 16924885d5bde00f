package main

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// TestFloorFlag runs the real accountant: 'account eps --floor M' and
// 'account delta --floor M' print, besides the usual bounds, the bound with
// the M draws and the n honest reports and the bound of the draws alone,
// equal to the accountant's FloorEpsilon and FloorDelta (with the honest
// floor of n under --max-fake-fraction); 'account calibrate --floor M'
// hands the accountant Target.Floor; 'account curve --floor M' adds both
// bounds as columns and plot curves; the table shows both; --floor 0
// prints nothing more; a tree protocol and a negative count are usage
// errors naming the flag.
func TestFloorFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test of the real engine; skipped with -short")
	}
	e := defaultEnv()
	e.engine.epsilonBaselines = func(accountant.Mechanism, float64, int, float64) (map[string]*float64, error) { return nil, nil }
	e.engine.deltaBaselines = e.engine.epsilonBaselines
	e.engine.calibrateBaselines = func(accountant.Mechanism, accountant.Target) (map[string]*float64, error) { return nil, nil }
	m := accountant.KRR(5)
	out, stderr, code := execute(t, e, "account", "eps", "--mech", "krr:k=5", "--eps0", "2", "--n", "120", "--max-fake-fraction", "0.2", "--delta", "1e-5", "--floor", "40", "--json")
	if code != exitOK {
		t.Fatalf("eps: exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, "floor")
	fl, _ := obj["floor"].(map[string]any)
	with, err := accountant.FloorEpsilon(m, 2, 96, 40, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := accountant.FloorEpsilon(m, 2, 1, 40, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	alone40 := alone
	near := func(a any, b float64) bool { v, ok := a.(float64); return ok && math.Abs(v-b) <= 1e-9*b }
	if fl["draws"] != 40.0 || !near(fl["upper"], with.Upper) || !near(fl["alone"], alone.Upper) || !near(fl["alone_lower"], alone.Lower) {
		t.Errorf("eps --floor 40 at 96 honest of 120: %v; want upper %v, alone %v (lower %v)", fl, with.Upper, alone.Upper, alone.Lower)
	}
	if up, _ := obj["eps_upper"].(float64); !(with.Upper < up && alone.Upper < 2) {
		t.Errorf("with the floor %v is not below the bound without it %v, or alone %v is not amplified", with.Upper, obj["eps_upper"], alone.Upper)
	}

	out, stderr, code = execute(t, e, "account", "delta", "--mech", "krr:k=5", "--eps0", "2", "--n", "96", "--eps", "0.8", "--floor", "40", "--json")
	if code != exitOK {
		t.Fatalf("delta: exit %d, stderr %s", code, stderr)
	}
	fl, _ = decodeObject(t, out, "floor")["floor"].(map[string]any)
	dw, err := accountant.FloorDelta(m, 2, 96, 40, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	da, err := accountant.FloorDelta(m, 2, 1, 40, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	if !near(fl["upper"], dw.Upper) || !near(fl["alone"], da.Upper) || !near(fl["alone_lower"], da.Lower) {
		t.Errorf("delta --floor 40: %v; want upper %v, alone %v (lower %v)", fl, dw.Upper, da.Upper, da.Lower)
	}

	table, _, code := execute(t, e, "account", "eps", "--mech", "krr:k=5", "--eps0", "2", "--n", "96", "--delta", "1e-5", "--floor", "40")
	if code != exitOK || !strings.Contains(table, "40 blanket draws per batch") || !strings.Contains(table, "with the floor") || !strings.Contains(table, "floor alone") {
		t.Errorf("the table does not show the floor:\n%s", table)
	}
	plain, _, _ := execute(t, e, "account", "eps", "--mech", "krr:k=5", "--eps0", "2", "--n", "96", "--delta", "1e-5", "--floor", "0", "--json")
	if strings.Contains(plain, "floor") {
		t.Errorf("--floor 0 prints a floor:\n%s", plain)
	}
	// Calibration with a floor is the accountant's (TestFloorCalibrate):
	// here only that --floor reaches it as Target.Floor.
	var got accountant.Target
	e.engine.calibrate = func(_ accountant.Mechanism, t accountant.Target) (accountant.CalibrationResult, error) {
		got = t
		return accountant.CalibrationResult{Eps0: 2.5, Achieved: accountant.EpsilonResult{Upper: 0.5, LocalEps: 2.5, Amplified: true, Tight: true}}, nil
	}
	out, stderr, code = execute(t, e, "account", "calibrate", "--mech", "krr:k=10", "--eps", "0.5", "--delta", "1e-5", "--n", "500", "--max-fake-fraction", "0.2", "--floor", "80", "--json")
	if code != exitOK {
		t.Fatalf("calibrate: exit %d, stderr %s", code, stderr)
	}
	if cal := decodeObject(t, out, "eps0", "floor"); cal["floor"] != 80.0 || got.Floor != 80 || got.N != 400 {
		t.Errorf("calibrate --floor 80 at 400 honest of 500: %v, the accountant got %+v", cal, got)
	}
	// A curve adds the floor's two bounds to every point, as columns and
	// on the plot.
	plotFile := t.TempDir() + "/floor.svg"
	out, stderr, code = execute(t, e, "account", "curve", "--mech", "krr:k=5", "--eps0", "2", "--n", "50:96", "--points", "2", "--delta", "1e-5", "--floor", "40", "--plot", plotFile)
	if code != exitOK {
		t.Fatalf("curve: exit %d, stderr %s", code, stderr)
	}
	header, rows := readCurve(t, out)
	i := slices.Index(header, "floor_eps_upper")
	if i < 0 || header[i-1] != "floor" || header[i+1] != "floor_eps_alone" || len(rows) != 2 {
		t.Fatalf("curve --floor CSV:\n%s", out)
	}
	for _, row := range rows {
		n, _ := strconv.Atoi(row[0])
		v, _ := strconv.ParseFloat(row[i], 64)
		a, _ := strconv.ParseFloat(row[i+1], 64)
		w, err := accountant.FloorEpsilon(m, 2, n, 40, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if row[i-1] != "40" || math.Abs(v-w.Upper) > 1e-9*w.Upper || math.Abs(a-alone40.Upper) > 1e-9*alone40.Upper {
			t.Errorf("curve --floor row %v: want with %v, alone %v", row, w.Upper, alone40.Upper)
		}
	}
	if svg, err := os.ReadFile(plotFile); err != nil || !strings.Contains(string(svg), "floor alone") {
		t.Errorf("the plot has no floor curves (%v)", err)
	}
	for _, args := range [][]string{
		{"--mech", "krr:k=5", "--eps0", "2", "--n", "400", "--floor", "-1"},
		{"--mech", "longitudinal:tree=8:eps0=1", "--n", "400", "--floor", "10"},
	} {
		_, stderr, code := execute(t, e, append([]string{"account", "eps", "--delta", "1e-5"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "--floor") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming --floor", args, code, stderr)
		}
	}
}

// TestServeWithFloor runs 'blanket serve' on the calibrated test plan with
// a floor of 2000 blanket draws: the shuffler draws them from the k-RR
// plugin's process (SampleBlanket) and adds them to the batch of 1000
// apps' reports; the collector counts the apps' reports alone, takes the
// draws out of its estimates through the plugin (EstimateFloor: every
// category within the z of a 1e-6 false-failure rate, where the draws
// counted as apps' reports would put each 2000/5 off) and states the
// guarantee with the draws and from them alone.
func TestServeWithFloor(t *testing.T) {
	planFile, _ := calibratedTestPlan(t)
	b, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planFile, append(b, []byte("floor: 2000\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "serve", "--data", t.TempDir(), "--plan", planFile, "--addr", "127.0.0.1:0", "--release-interval", "50ms", "--log-level", "warn", "--admission", "open")
	vals, truth := values(1000)
	if res := upload(t, s.url, appReports(t, s.url, "ui/screen", vals)); res.Accepted != 1000 {
		t.Fatalf("upload: %+v", res)
	}
	closePeriods(t, s)
	e := checkEstimate(t, s.url, "ui/screen", 1000, truth)
	if e.Draws != 2000 || e.Guarantee == nil || e.Guarantee.Draws != 2000 || e.Floor == nil || e.Floor.Eps == nil || e.Floor.Draws != 2000 {
		t.Fatalf("period: draws %d, guarantee %+v, floor %+v; want 2000 draws in both and the floor alone's eps", e.Draws, e.Guarantee, e.Floor)
	}
	if !(e.Guarantee.Eps < *e.Floor.Eps && *e.Floor.Eps < e.Eps0) {
		t.Errorf("guarantee %v, floor alone %v, eps0 %v: want the guarantee below the floor alone, amplified below eps0", e.Guarantee.Eps, *e.Floor.Eps, e.Eps0)
	}
	checkOps(t, s, `{"collector":true,"shuffler":false}`, `{"collector":true,"shuffler":true}`,
		`blanket_shuffler_blanket_draws_total 2000`,
		`blanket_collector_reports_total{pool="ui/screen",result="draw"} 2000`,
		`blanket_collector_reports_total{pool="ui/screen",result="valid"} 1000`)
}
