package client_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// TestPluginDir reports a metric whose randomizer is not built in: the
// example plugin olh (examples/custom-plugin), run as a plugin binary from
// a plugin directory, which an app opts into through Config.Randomizers
// (builtin.Opener with plugin.WithPluginDir).
func TestPluginDir(t *testing.T) {
	dir := filepath.Dir(testbuild.Binary(t, "github.com/blanket-dp/blanket/examples/custom-plugin/cmd/blanket-olh"))
	f := newFakeServer(t, nil)
	pl := testPlan(f.priv.PublicKey().Bytes())
	pl.Metrics[1].Plugin = "olh" // app/feature
	f.setPlan(pl)

	cfg := fastConfig(f, t.TempDir())
	if _, err := client.NewProvider(context.Background(), cfg); err == nil {
		t.Fatal("a plan naming olh was accepted without its plugin")
	}
	cache := client.NewRandomizerCache(builtin.Opener(plugin.WithPluginDir(dir)))
	t.Cleanup(func() { cache.Close() })
	cfg.Randomizers = cache
	clk := newTestClock()
	cfg.Now = clk.Now
	p := newProvider(t, cfg)
	values := []string{"a", "b", "c", "d"}
	recordPeriods(t, clk, len(values), func(i int) error {
		return p.Meter("app").Categorical("feature").Record(context.Background(), values[i])
	})
	flush(t, p)
	if got := f.checkReportsWith(t, p.Plan(), builtin.Opener(plugin.WithPluginDir(dir))); got["app/feature"] != 4 {
		t.Errorf("server holds %d olh reports, want 4", got["app/feature"])
	}
}
