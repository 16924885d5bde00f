package main

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// planKeyOut runs `blanket collector plan-key` on dir and returns the key.
func planKeyOut(t *testing.T, dir string) string {
	t.Helper()
	out, stderr, code := execute(t, (&fake{}).env(), "collector", "plan-key", "--data", dir)
	if code != 0 {
		t.Fatalf("plan-key: exit %d: %s", code, stderr)
	}
	return strings.TrimSpace(out)
}

// TestPlanKeyCommands: plan-key makes the key once and prints it again;
// rotate-plan-key prints the old and the new key, which plan-key prints
// from then on; plan-key without --data is a usage error.
func TestPlanKeyCommands(t *testing.T) {
	dir := t.TempDir()
	k0 := planKeyOut(t, dir)
	if _, err := plan.ParseSigningKey(k0); err != nil {
		t.Fatalf("plan-key printed %q: %v", k0, err)
	}
	if again := planKeyOut(t, dir); again != k0 {
		t.Fatalf("plan-key printed %q, then %q", k0, again)
	}
	out, stderr, code := execute(t, (&fake{}).env(), "collector", "rotate-plan-key", "--data", dir)
	if code != 0 || !strings.Contains(out, "old plan key: "+k0) {
		t.Fatalf("rotate-plan-key: exit %d: %s%s", code, out, stderr)
	}
	k1 := planKeyOut(t, dir)
	if k1 == k0 || !strings.Contains(out, "new plan key: "+k1) {
		t.Fatalf("after the rotation plan-key prints %q; rotate-plan-key said %q", k1, out)
	}
	// No line of the key file passes for the key plan-key prints: the
	// first, the private seed, is refused as such.
	file, err := os.ReadFile(filepath.Join(dir, collector.PlanKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(file))
	if len(lines) != 2 {
		t.Fatalf("%s holds %d lines after one rotation, want the seed and an endorsement", collector.PlanKeyFile, len(lines))
	}
	for i, l := range lines {
		_, err := plan.ParseSigningKey(l)
		if !errors.Is(err, plan.ErrBadSigningKey) || (i == 0 && !strings.Contains(err.Error(), "PRIVATE")) {
			t.Fatalf("line %d of %s as a pin: %v; want ErrBadSigningKey (saying PRIVATE for the seed)", i+1, collector.PlanKeyFile, err)
		}
	}
	if _, _, code := execute(t, (&fake{}).env(), "collector", "plan-key"); code != 2 {
		t.Fatalf("plan-key without --data: exit %d, want 2", code)
	}
	if _, _, code := execute(t, (&fake{}).env(), "collector", "rotate-plan-key", "--data", dir, "--not-before", "tomorrow"); code != 2 {
		t.Fatalf("rotate-plan-key --not-before tomorrow: exit %d, want 2", code)
	}
}

// checkSignedPlan fetches the plan at base and checks that it verifies
// under the plan-signing key key (plan-key's output).
func checkSignedPlan(t *testing.T, base, key string) {
	t.Helper()
	pin, err := plan.ParseSigningKey(key)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	s, err := plan.ParseSignature(resp.Header.Get(plan.SignatureHeader), resp.Header.Get(plan.EndorsementsHeader))
	if err == nil {
		_, err = plan.VerifyPlan(pin, body, s, time.Now())
	}
	if err != nil {
		t.Fatalf("the plan at %s: %v", base, err)
	}
}
