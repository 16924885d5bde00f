package main

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestFakeFractionFlag: with --max-fake-fraction 0.1 every account
// command hands the accountant the honest floor of --n (9000 of 10000;
// 900 of 1000 on a curve) and of --users, and its output keeps n as given
// next to max_fake_fraction and honest_n; without the flag neither key
// is printed.
func TestFakeFractionFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		call string
	}{
		{[]string{"account", "eps", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e4", "--delta", "1e-6"}, "epsilon krr:k=100 4 9000 1e-06"},
		{[]string{"account", "eps", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e4", "--delta", "1e-6", "--rounds", "30"}, "compose krr:k=100 4 9000 30"},
		{[]string{"account", "delta", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e4", "--eps", "0.5"}, "delta krr:k=100 4 9000 0.5"},
		{[]string{"account", "calibrate", "--mech", "krr:k=100", "--eps", "1", "--delta", "1e-6", "--n", "1e4"}, "calibrate krr:k=100 1 1e-06 9000 rounds 1"},
		{[]string{"account", "calibrate", "--mech", "krr:k=100", "--eps", "1", "--delta", "1e-6", "--n", "1e4", "--rounds", "30"}, "calibrate krr:k=100 1 1e-06 9000 rounds 30"},
	} {
		f := &fake{}
		out, stderr, code := execute(t, f.env(), append(tc.args, "--max-fake-fraction", "0.1", "--json")...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stderr %s", tc.args, code, stderr)
		}
		obj := decodeObject(t, out, "n", "max_fake_fraction", "honest_n")
		if obj["n"] != 1e4 || obj["max_fake_fraction"] != 0.1 || obj["honest_n"] != 9e3 {
			t.Errorf("%v: n %v, max_fake_fraction %v, honest_n %v; want 10000, 0.1, 9000", tc.args, obj["n"], obj["max_fake_fraction"], obj["honest_n"])
		}
		if len(f.calls) == 0 || f.calls[0] != tc.call {
			t.Errorf("%v: calls %v, want %q first", tc.args, f.calls, tc.call)
		}
		out, _, _ = execute(t, (&fake{}).env(), append(tc.args, "--json")...)
		if strings.Contains(out, "max_fake_fraction") || strings.Contains(out, "honest_n") {
			t.Errorf("%v without the flag prints the assumption:\n%s", tc.args, out)
		}
		table, _, _ := execute(t, (&fake{}).env(), append(tc.args, "--max-fake-fraction", "0.1")...)
		if !strings.Contains(table, "max fake fraction") || !strings.Contains(table, "9000 (the bounds' n)") {
			t.Errorf("%v: the table does not show the assumption:\n%s", tc.args, table)
		}
	}

	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e3:1e4", "--points", "2", "--delta", "1e-6", "--max-fake-fraction", "0.1")
	if code != exitOK {
		t.Fatalf("curve: exit %d, stderr %s", code, stderr)
	}
	header, rows := readCurve(t, out)
	if !slices.Equal(header[:3], []string{"n", "max_fake_fraction", "honest_n"}) || len(rows) != 2 ||
		!slices.Equal(rows[0][:3], []string{"1000", "0.1", "900"}) || !slices.Equal(rows[1][:3], []string{"10000", "0.1", "9000"}) {
		t.Errorf("curve CSV:\n%s", out)
	}
	slices.Sort(f.calls)
	if want := []string{"epsilon krr:k=100 4 900 1e-06", "epsilon krr:k=100 4 9000 1e-06"}; !slices.Equal(f.calls, want) {
		t.Errorf("curve calls %v, want %v", f.calls, want)
	}

	// A tree protocol: --n and --users are both counted at their honest
	// floors; the JSON keeps users as given next to honest_users.
	var got []accountant.Longitudinal
	e := defaultEnv()
	e.engine.longitudinalEpsilon = func(l accountant.Longitudinal, delta float64) (accountant.LongitudinalResult, error) {
		got = append(got, l)
		return accountant.LongitudinalResult{Upper: 1, PerPeriod: 1, Local: 2}, nil
	}
	e.engine.longitudinalDelta = func(l accountant.Longitudinal, eps float64) (accountant.LongitudinalDeltaResult, error) {
		got = append(got, l)
		return accountant.LongitudinalDeltaResult{Upper: 1e-7, PerPeriod: 1e-7, LocalDelta: 0.3, Local: 2}, nil
	}
	for _, cmd := range [][]string{{"eps", "--delta", "1e-6"}, {"delta", "--eps", "1"}} {
		got = nil
		args := append([]string{"account"}, cmd...)
		out, stderr, code = execute(t, e, append(args, "--mech", "longitudinal:tree=8:eps0=1", "--n", "1000", "--users", "2000", "--max-fake-fraction", "0.1", "--json")...)
		if code != exitOK {
			t.Fatalf("tree %s: exit %d, stderr %s", cmd[0], code, stderr)
		}
		if len(got) != 1 || got[0].Batch != 900 || got[0].Users != 1800 {
			t.Errorf("tree %s: the accountant got %+v, want batch 900 and 1800 users", cmd[0], got)
		}
		obj := decodeObject(t, out, "longitudinal")
		l, _ := obj["longitudinal"].(map[string]any)
		if obj["n"] != 1e3 || obj["honest_n"] != 900.0 || l["users"] != 2e3 || l["honest_users"] != 1800.0 {
			t.Errorf("tree %s JSON: %s", cmd[0], out)
		}
	}
}

// TestFakeFractionFlagErrors: NaN, infinities, negatives and 1 or more
// are usage errors naming the flag and its domain.
func TestFakeFractionFlagErrors(t *testing.T) {
	for _, v := range []string{"1", "1.5", "-0.1", "NaN", "Inf", "-Inf", "abc", "10%"} {
		_, stderr, code := execute(t, (&fake{}).env(), "account", "eps", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e4", "--delta", "1e-6", "--max-fake-fraction", v)
		if code != exitUsage || !strings.Contains(stderr, "--max-fake-fraction must be a number in [0, 1)") {
			t.Errorf("--max-fake-fraction %s: exit %d, stderr %q", v, code, stderr)
		}
	}
}

// TestEngineFakeFraction runs the real accountant: eps of 10,000 k-RR
// reports of which at most 10% may be fake is the eps of 9,000 (engineTol:
// the engine sums in parallel, so two runs of one query agree to about
// 1e-14 relative, not bit for bit). The baselines, which the flag reaches
// as it reaches the bound (TestFakeFractionFlag), are left out: they take
// most of the time.
func TestEngineFakeFraction(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test of the real engine; skipped with -short")
	}
	const engineTol = 1e-9
	e := defaultEnv()
	e.engine.epsilonBaselines = func(accountant.Mechanism, float64, int, float64) (map[string]*float64, error) { return nil, nil }
	eps := func(args ...string) float64 {
		out, stderr, code := execute(t, e, append([]string{"account", "eps", "--mech", "krr:k=10", "--eps0", "2", "--delta", "1e-6", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stderr %s", args, code, stderr)
		}
		v, ok := decodeObject(t, out, "eps_upper")["eps_upper"].(float64)
		if !ok {
			t.Fatalf("%v: eps_upper not a number:\n%s", args, out)
		}
		return v
	}
	fakes, honest := eps("--n", "10000", "--max-fake-fraction", "0.1"), eps("--n", "9000")
	if math.Abs(fakes-honest) > engineTol*honest {
		t.Errorf("eps at n 10000 with max fake fraction 0.1: %v; at n 9000: %v", fakes, honest)
	}
}

// TestPlanTableFakes: 'blanket plan' says what it assumed of fake
// reports: none, or a plan's max_fake_fraction and the honest floor of
// n_min it was calibrated at (also in --json).
func TestPlanTableFakes(t *testing.T) {
	p := &plan.Plan{
		Target:    plan.Target{Eps: 1, Delta: 1e-6},
		NMin:      10000,
		Travel:    "separate",
		Metrics:   []plan.Metric{{Name: "a", Plugin: "krr", Eps0: 2.5, Delta: 1e-6}},
		Guarantee: &plan.Guarantee{Eps: 0.99, Delta: 1e-6, Rule: "r"},
	}
	var buf bytes.Buffer
	if err := writePlanTable(&buf, p); err != nil {
		t.Fatal(err)
	}
	if r := newPlanReport(p); !strings.Contains(buf.String(), "none assumed (max_fake_fraction 0)") || r.MaxFakeFraction != 0 || r.HonestNMin != 0 {
		t.Errorf("no fakes: report %+v, table:\n%s", r, buf.String())
	}
	p.MaxFakeFraction = 0.1
	buf.Reset()
	if err := writePlanTable(&buf, p); err != nil {
		t.Fatal(err)
	}
	if r := newPlanReport(p); !strings.Contains(buf.String(), "at most 0.1 of a batch's valid reports (max_fake_fraction): calibrated at the honest floor of n_min, 9000 reports") || r.MaxFakeFraction != 0.1 || r.HonestNMin != 9000 {
		t.Errorf("max_fake_fraction 0.1: report %+v, table:\n%s", r, buf.String())
	}
}
