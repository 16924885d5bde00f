package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/internal/testbuild"
)

// olhPluginDir returns a plugin directory holding the third-party example
// plugin olh (examples/custom-plugin), built once for the package's tests.
func olhPluginDir(t *testing.T) string {
	t.Helper()
	return filepath.Dir(testbuild.Binary(t, "github.com/blanket-dp/blanket/examples/custom-plugin/cmd/blanket-olh"))
}

// TestCustomPluginEndToEnd loads the OLH example from a plugin directory:
// it is listed, passes the conformance kit through the real subprocess,
// and is usable by name in --mech. The kit runs at one eps0 with 5000
// samples per input (examples/custom-plugin/olh's TestConformance runs it
// in full in process); TestCustomPluginEndToEndDeep (make audit) runs
// 'plugin verify' with its defaults.
func TestCustomPluginEndToEnd(t *testing.T) {
	customPluginEndToEnd(t, "--eps0", "2", "--samples", "5000")
}

// customPluginEndToEnd runs TestCustomPluginEndToEnd with verifyFlags
// added to 'blanket plugin verify'.
func customPluginEndToEnd(t *testing.T, verifyFlags ...string) {
	dir := olhPluginDir(t)
	out, errOut, code := executeEngine(t, "plugin", "list", "--plugin-dir", dir)
	if code != 0 || !strings.Contains(out, "olh") || !strings.Contains(out, "binary") {
		t.Fatalf("plugin list: code %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = executeEngine(t, append([]string{"plugin", "verify", filepath.Join(dir, "blanket-olh"), "--categories", "4"}, verifyFlags...)...)
	if code != 0 || !strings.Contains(out, "PASS") {
		t.Fatalf("plugin verify: code %d\n%s%s", code, out, errOut)
	}
	// OLH's reports are (seed, y), not output indices: the frequency
	// check maps them through the plugin's Outputs RPC.
	if !strings.Contains(out, "PASS frequencies") {
		t.Errorf("plugin verify did not run the frequency check through Outputs:\n%s", out)
	}
	out, errOut, code = executeEngine(t, "account", "eps", "--plugin-dir", dir, "--mech", "olh:d=50", "--eps0", "2", "--n", "1e5", "--delta", "1e-6", "--json")
	if code != 0 {
		t.Fatalf("account eps --mech olh: code %d\n%s%s", code, out, errOut)
	}
	obj := decodeObject(t, out, "eps_upper", "eps_lower")
	up, lo := obj["eps_upper"].(float64), obj["eps_lower"].(float64)
	if !(lo > 0 && lo <= up && up < 2) {
		t.Errorf("olh: eps lower %g, upper %g: want 0 < lower <= upper < eps0 = 2", lo, up)
	}
}

// TestBuiltinPluginMechs checks every built-in plugin is a --mech name and
// that the plugin's own declaration of k-RR agrees with the analytic krr.
func TestBuiltinPluginMechs(t *testing.T) {
	for _, m := range []string{"rappor:d=16", "hadamard:k=100", "summation:k=20"} {
		out, errOut, code := executeEngine(t, "account", "eps", "--mech", m, "--eps0", "3", "--n", "1e4", "--delta", "1e-6", "--json")
		if code != 0 {
			t.Fatalf("%s: code %d\n%s%s", m, code, out, errOut)
		}
		decodeObject(t, out, "eps_upper", "eps_lower", "baselines")
	}
	// summation is (k+1)-ary randomized response on its levels: its
	// declared bound equals the analytic k-RR bound with k+1 categories.
	a, _, _ := executeEngine(t, "account", "eps", "--mech", "summation:k=9", "--eps0", "3", "--n", "1e4", "--delta", "1e-6", "--json")
	b, _, _ := executeEngine(t, "account", "eps", "--mech", "krr:k=10", "--eps0", "3", "--n", "1e4", "--delta", "1e-6", "--json")
	ua := decodeObject(t, a, "eps_upper")["eps_upper"].(float64)
	ub := decodeObject(t, b, "eps_upper")["eps_upper"].(float64)
	// The plugin declares a matrix and krr uses exact atoms: the two are
	// computed in a different order, so they agree to rounding only.
	const rel = 1e-9
	if math.Abs(ua-ub) > rel*ub {
		t.Errorf("summation:k=9 eps upper %v != krr:k=10 %v", ua, ub)
	}
	_, errOut, code := executeEngine(t, "account", "eps", "--mech", "rappor:d=1", "--eps0", "3", "--n", "1e4", "--delta", "1e-6")
	if code != exitUsage || !strings.Contains(errOut, "d") {
		t.Errorf("rappor:d=1: code %d, stderr %q; want a usage error naming d", code, errOut)
	}
}

func TestPluginVerifyErrors(t *testing.T) {
	_, errOut, code := executeEngine(t, "plugin", "verify", "/nonexistent/blanket-x")
	if code == 0 || !strings.Contains(errOut, "blanket-x") {
		t.Errorf("missing binary: code %d, stderr %q", code, errOut)
	}
	_, errOut, code = executeEngine(t, "plugin", "verify", "krr", "--param", "novalue")
	if code != exitUsage || !strings.Contains(errOut, "--param") {
		t.Errorf("bad --param: code %d, stderr %q", code, errOut)
	}
	_, errOut, code = executeEngine(t, "plugin", "verify", "krr", "--batches", "5")
	if code != exitUsage || !strings.Contains(errOut, "--batches") {
		t.Errorf("--batches 5: code %d, stderr %q; want a usage error naming --batches", code, errOut)
	}
	// --batches and --batch-size reach the estimator check, which says
	// how many batches it ran.
	out, errOut, code := executeEngine(t, "plugin", "verify", "krr", "--json", "--seed", "7", "--batches", "30", "--batch-size", "2000")
	if code != 0 {
		t.Fatalf("verify krr: code %d\n%s%s", code, out, errOut)
	}
	decodeObject(t, out, "checks")
	if !strings.Contains(out, "over 30 batches") {
		t.Errorf("verify krr --batches 30: the report does not say it ran 30 batches:\n%.2000s", out)
	}
}

// TestPluginVerifySummary: the last line of verify's report never says a
// bare PASS when the sampler went unchecked (the longitudinal plugin's
// default tree of 64 periods is too large for its exact transcript law),
// and --strict fails such a run; k-RR over 100 buckets declares atoms
// and maps reports to them, so its sampler is checked there, and it passes
// --strict with a bare PASS.
func TestPluginVerifySummary(t *testing.T) {
	lastLine := func(out string) string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	// The summary line is the subject, not the kit's power: small samples
	// (the race detector slows sampling tenfold).
	small := []string{"--samples", "4000", "--batches", "20", "--batch-size", "200"}
	out, errOut, code := executeEngine(t, append([]string{"plugin", "verify", "longitudinal", "--eps0", "2"}, small...)...)
	if code != 0 || !strings.HasPrefix(lastLine(out), "PASS, SAMPLER UNCHECKED") {
		t.Errorf("verify longitudinal: code %d, last line %q\n%s", code, lastLine(out), errOut)
	}
	out, _, code = executeEngine(t, append([]string{"plugin", "verify", "longitudinal", "--eps0", "2", "--strict"}, small...)...)
	if code == 0 || lastLine(out) != "FAIL" || !strings.Contains(out, "--strict") {
		t.Errorf("verify longitudinal --strict: code %d, last line %q", code, lastLine(out))
	}
	out, errOut, code = executeEngine(t, append([]string{"plugin", "verify", "krr", "--categories", "100", "--eps0", "2", "--strict"}, small...)...)
	if code != 0 || lastLine(out) != "PASS" || !strings.Contains(out, "PASS frequencies") {
		t.Errorf("verify krr --categories 100 --strict: code %d, last line %q\n%s%s", code, lastLine(out), out, errOut)
	}
}

// TestPluginHelpAndUnknownMech: plugin --help lists every built-in; a
// --mech that names no mechanism says where a plugin's binary is looked
// for, one of a categorical plugin without categories which keys give
// them, and account --help which keys the host takes.
func TestPluginHelpAndUnknownMech(t *testing.T) {
	out, _, code := executeEngine(t, "plugin", "--help")
	if code != 0 {
		t.Fatalf("plugin --help: code %d", code)
	}
	for _, n := range builtinNames() {
		if !strings.Contains(out, n) {
			t.Errorf("plugin --help does not name the built-in %s:\n%s", n, out)
		}
	}
	if !strings.Contains(out, "longitudinal") {
		t.Errorf("plugin --help leaves out longitudinal:\n%s", out)
	}
	_, errOut, code := executeEngine(t, "account", "eps", "--mech", "ksubset:s=2", "--eps0", "1", "--n", "1000", "--delta", "1e-6")
	if code != exitUsage || !strings.Contains(errOut, "blanket-ksubset in --plugin-dir or $BLANKET_PLUGIN_DIR") {
		t.Errorf("unknown mechanism: code %d, stderr %q; want a usage error naming the plugin binary and where it is looked for", code, errOut)
	}
	// A categorical plugin without its number of categories: the error
	// names the host's keys that give it.
	_, errOut, code = executeEngine(t, "account", "eps", "--mech", "hadamard", "--eps0", "1", "--n", "1000", "--delta", "1e-6")
	if code != exitUsage || !strings.Contains(errOut, "add k=N (or d=N, or categories=N)") {
		t.Errorf("hadamard without k: code %d, stderr %q; want a usage error saying to add k=N", code, errOut)
	}
	out, _, _ = executeEngine(t, "account", "--help")
	if !strings.Contains(out, "The host takes some keys") {
		t.Errorf("account --help does not say which --mech keys the host takes:\n%s", out)
	}
}
