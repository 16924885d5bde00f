package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestRotateKeyCommand: rotate-key refuses a collector that never
// started; 'blanket collector --key-rotation' publishes the next key at
// once; rotate-key, run beside the running collector, withdraws that
// pending key and schedules one a period (and an hour) ahead, which the
// collector serves in its signed plan within seconds, without a restart.
func TestRotateKeyCommand(t *testing.T) {
	src, _ := calibratedTestPlan(t)
	// Ten-second periods: the collector looks at its keys every second.
	planFile := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(planFile, []byte(mustRead(t, src)+"\nperiod: 10s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, stderr, code := execute(t, defaultEnv(), "collector", "rotate-key", "--data", dir); code == exitOK || !strings.Contains(stderr, "start the collector once") {
		t.Fatalf("rotate-key before the first start: exit %d: %s", code, stderr)
	}
	if _, _, code := execute(t, defaultEnv(), "collector", "rotate-key"); code != exitUsage {
		t.Fatalf("rotate-key without --data: exit %d, want %d", code, exitUsage)
	}
	started := time.Now()
	c := startServer(t, "collector", "--data", dir, "--plan", planFile, "--addr", "127.0.0.1:0", "--log-level", "warn", "--key-rotation", "720h")
	defer c.stop(t)
	servedKeys := func() []plan.CollectorKey {
		var p plan.Plan
		getJSON(t, c.url+"/v1/plan", &p)
		return p.CollectorKeys
	}
	waitKeys := func(what string, ok func([]plan.CollectorKey) bool) []plan.CollectorKey {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ks := servedKeys()
			if ok(ks) {
				return ks
			}
			if time.Now().After(deadline) {
				t.Fatalf("the collector serves keys %+v; waited for %s", ks, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := waitKeys("the next key, published at once", func(ks []plan.CollectorKey) bool { return len(ks) == 2 })
	if from := time.Unix(before[1].From, 0); from.Before(started.Add(720*time.Hour).Truncate(10*time.Second)) || before[1].From%10 != 0 {
		t.Fatalf("the next key starts at %v, want a period boundary 720h on", from)
	}
	// The command's clock reads between cmdStart and cmdEnd.
	cmdStart := time.Now()
	out, stderr, code := execute(t, defaultEnv(), "collector", "rotate-key", "--data", dir)
	cmdEnd := time.Now()
	if code != exitOK {
		t.Fatalf("rotate-key: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "withdrew the pending report key "+before[1].ID) {
		t.Errorf("rotate-key did not say it withdrew %s:\n%s", before[1].ID, out)
	}
	after := waitKeys("the new key", func(ks []plan.CollectorKey) bool { return len(ks) == 2 && ks[1].ID != before[1].ID })
	from := time.Unix(after[1].From, 0)
	if !strings.Contains(out, "new report key "+after[1].ID+" seals the periods from "+from.UTC().Format(time.RFC3339)) {
		t.Errorf("rotate-key printed:\n%s\nwant the new key %s from %v", out, after[1].ID, from)
	}
	// The key store's clock is in whole Unix seconds: an hour ahead of
	// the second rotate-key began in.
	if from.Sub(cmdStart.Truncate(time.Second)) < time.Hour || from.Sub(cmdEnd) > time.Hour+10*time.Second || after[1].From%10 != 0 {
		t.Errorf("the new key starts %v after rotate-key began (%v after it ended), want the first period boundary an hour ahead of its clock", from.Sub(cmdStart), from.Sub(cmdEnd))
	}
	if after[0].ID != before[0].ID || !hasRow(out, after[0].ID, "the", "start", "active") || !hasRow(out, after[1].ID, from.UTC().Format(time.RFC3339), "pending") {
		t.Errorf("the schedule printed:\n%s\nwant the first key active from the start, and the new one", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "report-"+before[1].ID+".key")); err == nil {
		t.Error("the withdrawn key's file is still there")
	}
	checkSignedPlan(t, c.url, planKeyOut(t, dir))
}

// hasRow reports whether a line of out has the words fields.
func hasRow(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if slices.Equal(strings.Fields(l), fields) {
			return true
		}
	}
	return false
}
