package plugin_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// binDir holds the plugin binaries the tests build, once per test binary.
var binDir string

func TestMain(m *testing.M) {
	// goplugin.TestPluginGRPCConn logs go-plugin's debug chatter to hclog's
	// default output, which would interleave with test and benchmark output.
	hclog.DefaultOutput = io.Discard
	if os.Getenv(hostHelperEnv) == "" {
		dir, err := os.MkdirTemp("", "blanket-plugins-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		binDir = dir
		defer os.RemoveAll(dir)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildMu sync.Mutex
	built   = map[string]error{}
)

// pluginPackages maps plugin names to the main packages of their binaries.
var pluginPackages = map[string]string{
	"krr":        "github.com/blanket-dp/blanket/plugins/krr/cmd/blanket-krr",
	"hadamard":   "github.com/blanket-dp/blanket/plugins/hadamard/cmd/blanket-hadamard",
	"rappor":     "github.com/blanket-dp/blanket/plugins/rappor/cmd/blanket-rappor",
	"summation":  "github.com/blanket-dp/blanket/plugins/summation/cmd/blanket-summation",
	"testplugin": "github.com/blanket-dp/blanket/sdk/internal/testplugin",
}

// buildPlugin builds the binary blanket-<name> into binDir (once) and
// returns binDir. Tests that need it are skipped in -short mode.
func buildPlugin(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a plugin binary; skipped in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build plugin binaries")
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	err, ok := built[name]
	if !ok {
		out := filepath.Join(binDir, "blanket-"+name)
		cmd := exec.Command(goBin, "build", "-o", out, pluginPackages[name])
		if b, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build %s: %v\n%s", pluginPackages[name], berr, b)
		}
		built[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return binDir
}
