package plugin_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func TestMain(m *testing.M) {
	// goplugin.TestPluginGRPCConn logs go-plugin's debug chatter to hclog's
	// default output, which would interleave with test and benchmark output.
	hclog.DefaultOutput = io.Discard
	os.Exit(testbuild.Main(m))
}

// pluginPackages maps plugin names to the main packages of their binaries.
var pluginPackages = map[string]string{
	"krr":        "github.com/blanket-dp/blanket/plugins/krr/cmd/blanket-krr",
	"hadamard":   "github.com/blanket-dp/blanket/plugins/hadamard/cmd/blanket-hadamard",
	"rappor":     "github.com/blanket-dp/blanket/plugins/rappor/cmd/blanket-rappor",
	"summation":  "github.com/blanket-dp/blanket/plugins/summation/cmd/blanket-summation",
	"testplugin": "github.com/blanket-dp/blanket/sdk/internal/testplugin",
}

// buildPlugin returns a plugin directory holding the binary blanket-<name>
// (testbuild: built once per test binary, skipped in -short mode).
func buildPlugin(t testing.TB, name string) string {
	t.Helper()
	return filepath.Dir(testbuild.Named(t, pluginPackages[name], plugin.BinaryPrefix+name))
}
