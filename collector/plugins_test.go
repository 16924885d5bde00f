package collector

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// childRunning returns the pid of the one child process of this test
// process running the binary bin, or 0.
func childRunning(t *testing.T, bin string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to find the plugin process in: %v", err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || exe != bin {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(self) {
			return pid
		}
	}
	return 0
}

// TestPluginRestartsCounted kills the process of a real plugin opened
// through Plugins: the next call restarts it, and
// blanket_plugin_restarts_total{plugin="testplugin"} goes from 0 to 1
// and stays there after Close.
func TestPluginRestartsCounted(t *testing.T) {
	// sdk/internal/testplugin: k-RR served as a plugin process.
	bin := testbuild.Named(t, "github.com/blanket-dp/blanket/sdk/internal/testplugin", plugin.BinaryPrefix+"testplugin")
	dir := filepath.Dir(bin)
	ctx := context.Background()
	ps := NewPlugins(plugin.WithPluginDir(dir))
	t.Cleanup(func() { ps.Close() })
	r, err := ps.Open(ctx, "testplugin", sdk.Config{Categories: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	randomize := func() {
		t.Helper()
		if _, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"a", "b", "c", "a"}}); err != nil {
			t.Fatalf("Randomize: %v", err)
		}
	}
	randomize()
	m := ps.Collector()
	if n := testutil.ToFloat64(m); n != 0 {
		t.Fatalf("restarts before any kill: %v", n)
	}
	pid := childRunning(t, bin)
	if pid == 0 {
		t.Fatalf("no child process runs %s", bin)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	randomize() // restarts the process, before the call or on its failure
	if got := childRunning(t, bin); got == 0 || got == pid {
		t.Errorf("plugin process after the kill: pid %d, was %d", got, pid)
	}
	if n := testutil.ToFloat64(m); n != 1 {
		t.Errorf("blanket_plugin_restarts_total = %v after one kill, want 1", n)
	}
	ps.Close()
	if n := testutil.ToFloat64(m); n != 1 {
		t.Errorf("blanket_plugin_restarts_total = %v after Close, want 1 (kept)", n)
	}
	if problems, err := testutil.CollectAndLint(m); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
