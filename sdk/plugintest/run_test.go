package plugintest_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// runChildEnv makes TestRunChildBroken run: it fails on purpose, so it
// runs only as the child of TestRunReportsAtCallersLine.
const runChildEnv = "BLANKET_PLUGINTEST_RUN_CHILD"

// TestRunChildBroken runs the kit through Run on a sampler hotter than it
// declares (hotSampler). It is not a test of its own: see
// TestRunReportsAtCallersLine.
func TestRunChildBroken(t *testing.T) {
	if os.Getenv(runChildEnv) == "" {
		t.Skip("the child of TestRunReportsAtCallersLine")
	}
	plugintest.Run(t, hotSampler{newKRR(1)}, plugintest.Options{Eps0s: []float64{1}, Skip: []string{plugintest.CheckEstimator}}) // the caller's line
}

// TestRunReportsAtCallersLine: a failure of Run is reported at the line of
// the caller's test that called it (not inside the kit), with the failed
// test's statistic, threshold and p-value, and the check's subtest fails
// too. The kit runs in a child process of this test binary, whose failure
// is the point.
func TestRunReportsAtCallersLine(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRunChildBroken$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), runChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the broken sampler passed Run:\n%s", out)
	}
	src, rerr := os.ReadFile("run_test.go")
	if rerr != nil {
		t.Fatal(rerr)
	}
	lines := strings.Split(string(src), "\n")
	at := regexp.MustCompile(`(\w+\.go):(\d+): frequencies: `).FindAllStringSubmatch(string(out), -1)
	if len(at) == 0 {
		t.Fatalf("no failure of the frequencies check in the output:\n%s", out)
	}
	for _, m := range at {
		n, _ := strconv.Atoi(m[2])
		if m[1] != "run_test.go" || n < 1 || n > len(lines) || !strings.Contains(lines[n-1], "plugintest.Run(") {
			t.Errorf("a failure is reported at %s:%s, not at the caller's call of plugintest.Run", m[1], m[2])
		}
	}
	for _, want := range []string{"statistic ", "threshold ", "p-value ", "--- FAIL: TestRunChildBroken/frequencies"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
