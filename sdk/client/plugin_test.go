package client_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/blanket-dp/blanket/sdk/client"
)

// TestPluginDir reports a metric whose randomizer is not built in: the
// example plugin olh (examples/custom-plugin), run as a plugin binary from
// Config.PluginDir.
func TestPluginDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "blanket-olh"), "github.com/blanket-dp/blanket/examples/custom-plugin/cmd/blanket-olh")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	f := newFakeServer(t, nil)
	pl := testPlan(f.priv.PublicKey().Bytes())
	pl.Metrics[1].Plugin = "olh" // app/feature
	f.setPlan(pl)

	cfg := fastConfig(f, t.TempDir())
	if _, err := client.NewProvider(context.Background(), cfg); err == nil {
		t.Fatal("a plan naming olh was accepted without its plugin")
	}
	cfg.PluginDir = dir
	clk := newTestClock()
	cfg.Now = clk.Now
	p := newProvider(t, cfg)
	values := []string{"a", "b", "c", "d"}
	recordPeriods(t, clk, len(values), func(i int) error {
		return p.Meter("app").Categorical("feature").Record(context.Background(), values[i])
	})
	flush(t, p)
	if got := f.checkReportsWith(t, p.Plan(), client.PluginOpener(dir)); got["app/feature"] != 4 {
		t.Errorf("server holds %d olh reports, want 4", got["app/feature"])
	}
}
