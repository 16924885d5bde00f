package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// The tests of --rounds: a user's T reports, each shuffled in its own
// batch, composed.

// roundsCommands are the account commands that take --rounds, with valid
// flags besides it.
var roundsCommands = [][]string{
	{"account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--n", "1e6", "--delta", "1e-6"},
	{"account", "delta", "--mech", "krr:k=10", "--eps0", "4", "--n", "1e6", "--eps", "0.5"},
	{"account", "calibrate", "--mech", "krr:k=10", "--eps", "1", "--delta", "1e-6", "--n", "1e6"},
	{"account", "curve", "--mech", "krr:k=10", "--eps0", "4", "--n", "1e3:1e6", "--delta", "1e-6"},
}

func TestRoundsFlagErrors(t *testing.T) {
	const rule = `--rounds must be an integer in [1, 1000000] (e.g. 365, 1e3, 1_000)`
	for _, args := range roundsCommands {
		for _, v := range []string{"0", "-1", "1.5", "abc", "2e6", "NaN", "Inf", ""} {
			t.Run(args[1]+" "+v, func(t *testing.T) {
				f := &fake{}
				_, stderr, code := execute(t, f.env(), append(slices.Clone(args), "--rounds", v)...)
				if code != exitUsage {
					t.Errorf("exit %d, want %d", code, exitUsage)
				}
				if !strings.Contains(stderr, rule) || !strings.Contains(stderr, strconv.Quote(v)) {
					t.Errorf("stderr %q lacks %q and the value %q", stderr, rule, v)
				}
				if len(f.calls) > 0 {
					t.Errorf("engine called: %v", f.calls)
				}
			})
		}
	}
}

func TestRoundsFlagSyntax(t *testing.T) {
	for _, v := range []string{"1000", "1e3", "1_000", " 1000 "} {
		f := &fake{}
		_, stderr, code := execute(t, f.env(), "account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--n", "1e6", "--delta", "1e-6", "--rounds", v)
		if code != exitOK {
			t.Fatalf("--rounds %q: exit %d, stderr %s", v, code, stderr)
		}
		if want := "compose krr:k=10 4 1000000 1000"; len(f.calls) == 0 || f.calls[0] != want {
			t.Errorf("--rounds %q: calls = %v, want %q first", v, f.calls, want)
		}
	}
}

// checkRoundsBaselines checks the baselines of a report over rounds
// reports: the single-report ones are set for one round and null for
// several, the composition ones the other way round (the fake's kov15 is
// always null).
func checkRoundsBaselines(t *testing.T, b any, rounds int) {
	t.Helper()
	bl := checkBaselines(t, b)
	set := map[string]bool{accountant.BaselineClone: true, accountant.BaselineFMT21: true}
	if rounds > 1 {
		set = map[string]bool{accountant.BaselineBasicComposition: true, accountant.BaselineCloneComposed: true}
	}
	for name, v := range bl {
		if set[name] != (v != nil) {
			t.Errorf("rounds %d: baseline %s = %v, want set %v", rounds, name, v, set[name])
		}
	}
}

func TestRoundsJSON(t *testing.T) {
	keys := map[string][]string{
		"eps":       epsKeys,
		"delta":     {"mechanism", "eps0", "n", "rounds", "eps", "delta_upper", "delta_lower", "baselines", "seconds"},
		"calibrate": {"mechanism", "eps", "delta", "n", "rounds", "eps0", "achieved", "baselines", "seconds"},
	}
	for _, args := range roundsCommands {
		for _, rounds := range []int{1, 3} {
			t.Run(args[1]+" "+strconv.Itoa(rounds), func(t *testing.T) {
				f := &fake{}
				out, stderr, code := execute(t, f.env(), append(slices.Clone(args), "--rounds", strconv.Itoa(rounds), "--json")...)
				if code != exitOK {
					t.Fatalf("exit %d, stderr %s", code, stderr)
				}
				var objs []map[string]any
				if args[1] == "curve" {
					if err := json.Unmarshal([]byte(out), &objs); err != nil || len(objs) < 2 {
						t.Fatalf("rows: %v, %d\n%s", err, len(objs), out)
					}
				} else {
					objs = []map[string]any{decodeObject(t, out, keys[args[1]]...)}
				}
				for _, obj := range objs {
					if args[1] == "curve" {
						for _, k := range epsKeys {
							if _, ok := obj[k]; !ok {
								t.Errorf("row lacks %q: %v", k, obj)
							}
						}
					}
					if obj["rounds"] != float64(rounds) {
						t.Errorf("rounds = %v, want %d", obj["rounds"], rounds)
					}
					checkRoundsBaselines(t, obj["baselines"], rounds)
				}
				// One round goes through the single-report engine, several
				// through a composition.
				composed := slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "compose ") })
				if args[1] != "calibrate" && composed != (rounds > 1) {
					t.Errorf("rounds %d: calls = %v", rounds, f.calls)
				}
				if args[1] == "calibrate" && !strings.HasSuffix(f.calls[0], " rounds "+strconv.Itoa(rounds)) {
					t.Errorf("calibrate target: %v, want rounds %d", f.calls, rounds)
				}
			})
		}
	}
}

// dropSeconds removes what differs between two runs of the same command:
// the wall time in JSON, tables and CSV.
func dropSeconds(s string) string {
	s = regexp.MustCompile(`"seconds": [0-9.e-]+`).ReplaceAllString(s, `"seconds": 0`)
	s = regexp.MustCompile(`(?m)^seconds .*$`).ReplaceAllString(s, "seconds")
	return regexp.MustCompile(`(?m),[0-9.]+$`).ReplaceAllString(s, ",0")
}

func TestRoundsOneUnchanged(t *testing.T) {
	for _, args := range roundsCommands {
		for _, format := range [][]string{nil, {"--json"}} {
			args := slices.Concat(args, format)
			f := &fake{}
			without, _, code := execute(t, f.env(), args...)
			if code != exitOK {
				t.Fatalf("%v: exit %d", args, code)
			}
			with, _, code := execute(t, f.env(), append(slices.Clone(args), "--rounds", "1")...)
			if code != exitOK {
				t.Fatalf("%v --rounds 1: exit %d", args, code)
			}
			if dropSeconds(with) != dropSeconds(without) {
				t.Errorf("%v: --rounds 1 changes the output:\n%s\nwithout:\n%s", args, with, without)
			}
		}
	}
}

func TestRoundsTables(t *testing.T) {
	roundsLine := regexp.MustCompile(`(?m)^rounds +365$`)
	for _, args := range roundsCommands[:3] {
		t.Run(args[1], func(t *testing.T) {
			f := &fake{}
			out, stderr, code := execute(t, f.env(), append(slices.Clone(args), "--rounds", "365")...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			if !roundsLine.MatchString(out) {
				t.Errorf("table lacks the line \"rounds  365\":\n%s", out)
			}
			for _, name := range slices.Concat(accountant.BaselineNames, accountant.CompositionBaselineNames) {
				if !regexp.MustCompile(`(?m)^` + name + ` `).MatchString(out) {
					t.Errorf("table lacks the baseline %s:\n%s", name, out)
				}
			}
			if !regexp.MustCompile(`(?m)^kov15 +n/a$`).MatchString(out) || !regexp.MustCompile(`(?m)^clone +n/a$`).MatchString(out) {
				t.Errorf("table does not show n/a for kov15 and clone:\n%s", out)
			}
			if regexp.MustCompile(`(?m)^basic_composition +n/a$`).MatchString(out) {
				t.Errorf("basic_composition n/a over 365 rounds:\n%s", out)
			}
		})
	}
	// Unamplified over several rounds: eps is the local eps of all reports.
	f := &fake{}
	out, _, _ := execute(t, f.env(), "account", "eps", "--mech", "krr:k=10", "--eps0", "4", "--n", "4", "--delta", "1e-6", "--rounds", "3")
	if !strings.Contains(out, noteNotAmplifiedRounds) || !regexp.MustCompile(`(?m)^upper +12$`).MatchString(out) {
		t.Errorf("unamplified composition:\n%s", out)
	}
}

// readCurve parses curve CSV into its header and rows.
func readCurve(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("CSV: %v, %d records\n%s", err, len(recs), out)
	}
	return recs[0], recs[1:]
}

// column returns the column name of rows.
func column(t *testing.T, header []string, rows [][]string, name string) []string {
	t.Helper()
	i := slices.Index(header, name)
	if i < 0 {
		t.Fatalf("no column %q in %v", name, header)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r[i])
	}
	return out
}

func TestCurveRounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "horizon.svg")
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--rounds", "1:10", "--delta", "1e-6", "--plot", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	header, rows := readCurve(t, out)
	// 20 log-spaced points from 1 to 10, rounded, repeats dropped.
	if got, want := column(t, header, rows, "rounds"), []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}; !slices.Equal(got, want) {
		t.Errorf("rounds column = %v, want %v", got, want)
	}
	prev := 0.0
	for i, v := range column(t, header, rows, "eps_upper") {
		up, err := strconv.ParseFloat(v, 64)
		if err != nil || up < prev {
			t.Errorf("row %d: eps_upper %q after %v: want non-decreasing in T", i, v, prev)
		}
		prev = up
	}
	// One composition for the sweep, every point from it.
	var composes int
	for _, c := range f.calls {
		if strings.HasPrefix(c, "compose ") {
			composes++
		}
	}
	if composes != 1 {
		t.Errorf("%d compositions built, want 1: %v", composes, f.calls)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"T (reports per user)", "krr:k=100, eps0 = 4, n = 1000000, delta = 1e-06", "eps upper (this work)", "basic_composition", "clone_composed"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("svg lacks %q", want)
		}
	}
	// Over rounds only the composition baselines are drawn (the fake's
	// kov15 has no values).
	for _, absent := range []string{"fmt21", "kov15"} {
		if bytes.Contains(data, []byte(absent)) {
			t.Errorf("svg has a legend entry %q", absent)
		}
	}
}

func TestCurveAtRounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.svg")
	f := &fake{}
	out, stderr, code := execute(t, f.env(), "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e3:1e5", "--points", "3", "--rounds", "7", "--delta", "1e-6", "--plot", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	header, rows := readCurve(t, out)
	if got := column(t, header, rows, "rounds"); !slices.Equal(got, []string{"7", "7", "7"}) {
		t.Errorf("rounds column = %v, want 7 everywhere", got)
	}
	slices.Sort(f.calls)
	for _, want := range []string{"compose krr:k=100 4 1000 7", "compose krr:k=100 4 10000 7", "compose krr:k=100 4 100000 7"} {
		if _, ok := slices.BinarySearch(f.calls, want); !ok {
			t.Errorf("calls %v lack %q", f.calls, want)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("krr:k=100, eps0 = 4, T = 7, delta = 1e-06")) || !bytes.Contains(data, []byte("basic_composition")) {
		t.Errorf("svg lacks the title with T = 7 or the composition baselines")
	}
}

func TestRoundsHelp(t *testing.T) {
	f := &fake{}
	for _, args := range [][]string{{"account"}, {"account", "eps"}, {"account", "delta"}, {"account", "calibrate"}, {"account", "curve"}, {"plan"}} {
		out, _, _ := execute(t, f.env(), append(slices.Clone(args), "--help")...)
		// Compare words: the help wraps lines where it likes.
		words := strings.Join(strings.Fields(out), " ")
		for _, want := range []string{"--rounds", "shuffled in its own batch", "composed through privacy loss distributions"} {
			if !strings.Contains(words, want) {
				t.Errorf("%v --help lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestPlanTableRounds(t *testing.T) {
	p := &plan.Plan{
		Target:    plan.Target{Eps: 1, Delta: 1e-6},
		NMin:      10000,
		Travel:    "separate",
		Horizon:   30,
		Metrics:   []plan.Metric{{Name: "a", Plugin: "krr", Eps0: 2.5, Delta: 1e-6}},
		Guarantee: &plan.Guarantee{Eps: 0.99, Delta: 1e-6, Rule: "r", Rounds: 30},
	}
	var buf bytes.Buffer
	if err := writePlanTable(&buf, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"eps0", "2.5", "eps 1, delta 1e-06 over any 30 consecutive periods of 1 day (30 days) at n_min = 10000",
		"eps 0.99, delta 1e-06 per user over any 30 consecutive periods of 1 day (30 days)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	if r := newPlanReport(p); r.Rounds != 30 || r.Horizon != 30 || r.Period != "24h0m0s" {
		t.Errorf("report rounds %d, horizon %d, period %q: want 30, 30, 24h0m0s", r.Rounds, r.Horizon, r.Period)
	}
	buf.Reset()
	p.Guarantee.Rounds, p.Horizon, p.Period = 0, 0, "1h30m"
	if err := writePlanTable(&buf, p); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); strings.Contains(s, "consecutive") || !strings.Contains(s, "per user per period of 1h30m0s") {
		t.Errorf("one period:\n%s", s)
	}
	if r := newPlanReport(p); r.Rounds != 1 || r.Horizon != 1 {
		t.Errorf("report rounds = %d, horizon %d, want 1", r.Rounds, r.Horizon)
	}
}

func TestPlanRoundsErrors(t *testing.T) {
	for _, v := range []string{"0", "1.5", "abc", "2e6"} {
		_, stderr, code := execute(t, (&fake{}).env(), "plan", "../../examples/plan.yaml", "--rounds", v)
		if code != exitUsage || !strings.Contains(stderr, "--rounds must be an integer in [1, 1000000]") {
			t.Errorf("--rounds %s: exit %d, stderr %q", v, code, stderr)
		}
	}
}

// The tests below run the real accountant (skipped with -short).

func TestEngineRoundsOne(t *testing.T) {
	for _, args := range [][]string{
		{"account", "eps", "--mech", "krr:k=4", "--eps0", "2", "--n", "1000", "--delta", "1e-6", "--json"},
		{"account", "delta", "--mech", "krr:k=4", "--eps0", "2", "--n", "1000", "--eps", "0.5", "--json"},
	} {
		without, stderr, code := executeEngine(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %s", code, stderr)
		}
		with, stderr, code := executeEngine(t, append(slices.Clone(args), "--rounds", "1")...)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %s", code, stderr)
		}
		// One round is answered by the single-report engine, the same
		// calls as without the flag (TestRoundsOneUnchanged checks that
		// exactly). The engine sums in parallel, so two runs of the same
		// call can differ in the last bits: sumTol allows that and
		// nothing more.
		const sumTol = 1e-12
		var a, b map[string]any
		if err := json.Unmarshal([]byte(with), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(without), &b); err != nil {
			t.Fatal(err)
		}
		delete(a, "seconds")
		delete(b, "seconds")
		if !closeJSON(a, b, sumTol) {
			t.Errorf("%v: --rounds 1 changes the numbers:\n%s\nwithout:\n%s", args, with, without)
		}
	}
}

// closeJSON reports whether two decoded JSON values are equal, numbers to
// the relative tolerance tol.
func closeJSON(a, b any, tol float64) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !closeJSON(v, w, tol) {
				return false
			}
		}
		return true
	case float64:
		b, ok := b.(float64)
		return ok && math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
	default:
		return a == b
	}
}

func TestEngineRounds(t *testing.T) {
	out, stderr, code := executeEngine(t, "account", "eps", "--mech", "krr:k=4", "--eps0", "2", "--n", "1000", "--delta", "1e-6", "--rounds", "5", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	obj := decodeObject(t, out, epsKeys...)
	up, lo := obj["eps_upper"].(float64), obj["eps_lower"].(float64)
	if !(0 < lo && lo <= up) {
		t.Errorf("eps lower %v, upper %v: want 0 < lower <= upper", lo, up)
	}
	bl := checkBaselines(t, obj["baselines"])
	basic, ok := bl[accountant.BaselineBasicComposition].(float64)
	if !ok || !(up < basic) {
		t.Errorf("eps upper %v, basic composition %v: want upper < basic", up, bl[accountant.BaselineBasicComposition])
	}
	if obj["rounds"] != 5.0 || obj["local_eps"] != 10.0 || bl[accountant.BaselineClone] != nil {
		t.Errorf("rounds %v, local eps %v, clone %v: want 5, 5 eps0 = 10 and null", obj["rounds"], obj["local_eps"], bl[accountant.BaselineClone])
	}
}

func TestEngineCurveRounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "horizon.png")
	out, stderr, code := executeEngine(t, "account", "curve", "--mech", "krr:k=4", "--eps0", "2", "--n", "1000", "--rounds", "1:100", "--points", "4", "--delta", "1e-6", "--plot", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	header, rows := readCurve(t, out)
	if got, want := column(t, header, rows, "rounds"), []string{"1", "5", "22", "100"}; !slices.Equal(got, want) {
		t.Errorf("rounds column = %v, want %v", got, want)
	}
	prev := 0.0
	for i, v := range column(t, header, rows, "eps_upper") {
		up, err := strconv.ParseFloat(v, 64)
		if err != nil || !(up >= prev) {
			t.Errorf("row %d: eps_upper %q after %v: want non-decreasing in T", i, v, prev)
		}
		prev = up
	}
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		t.Errorf("plot %s: %v", path, err)
	}
}

// checkPlanRounds runs blanket plan on planFile with --rounds rounds: the
// summary and the written plan record the rounds, and the guarantee meets
// the target.
func checkPlanRounds(t *testing.T, planFile string, rounds int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plan.yaml")
	stdout, stderr, code := execute(t, defaultEnv(), "plan", planFile, "--rounds", strconv.Itoa(rounds), "-o", out, "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var r planReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if r.Rounds != rounds || r.Guarantee == nil || r.Guarantee.Rounds != rounds {
		t.Fatalf("report rounds %d, guarantee %+v: want %d", r.Rounds, r.Guarantee, rounds)
	}
	if g := r.Guarantee; !(g.Eps <= r.Target.Eps) || g.Delta > r.Target.Delta {
		t.Errorf("guarantee %+v misses the target %+v", g, r.Target)
	}
	for _, m := range r.Metrics {
		// Shuffling lets eps0 exceed the target eps, so only its domain is
		// certain here; the guarantee above is the accountant's proof.
		if !(m.Eps0 > 0 && m.Eps0 <= accountant.MaxEps0) {
			t.Errorf("metric %s: eps0 = %v", m.Name, m.Eps0)
		}
	}
	written, err := plan.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if written.Guarantee == nil || written.Guarantee.Rounds != rounds || written.Digest() != r.Digest {
		t.Errorf("written plan %+v does not match the summary", written.Guarantee)
	}
}

func TestCurveRoundsProgress(t *testing.T) {
	f := &fake{}
	e := f.env()
	e.isTerminal = func(io.Writer) bool { return true }
	_, stderr, code := execute(t, e, "account", "curve", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--rounds", "1:100", "--points", "3", "--delta", "1e-6")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if !strings.Contains(stderr, "3/3 points (100%)") || !strings.HasSuffix(stderr, "\r\x1b[K") {
		t.Errorf("progress = %q", stderr)
	}
}

// TestStatusLine: a single long computation on a terminal shows a
// "working" line on stderr and erases it before the answer; off a terminal
// stderr stays empty.
func TestStatusLine(t *testing.T) {
	for _, args := range [][]string{
		{"account", "eps", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--delta", "1e-6", "--rounds", "30"},
		{"account", "delta", "--mech", "krr:k=100", "--eps0", "4", "--n", "1e6", "--eps", "1", "--rounds", "30"},
		{"account", "calibrate", "--mech", "krr:k=100", "--eps", "1", "--delta", "1e-6", "--n", "1e6", "--rounds", "30"},
	} {
		for _, tty := range []bool{true, false} {
			f := &fake{}
			e := f.env()
			e.isTerminal = func(io.Writer) bool { return tty }
			_, stderr, code := execute(t, e, args...)
			if code != exitOK {
				t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
			}
			want := "blanket account " + args[1] + ": working, "
			if tty && (!strings.HasPrefix(stderr, "\r\x1b[K"+want) || !strings.HasSuffix(stderr, "\r\x1b[K")) {
				t.Errorf("%v on a terminal: stderr = %q", args, stderr)
			}
			if !tty && stderr != "" {
				t.Errorf("%v off a terminal: stderr = %q", args, stderr)
			}
		}
	}
}
