package plugintest_test

import (
	"os"
	"testing"

	"github.com/blanket-dp/blanket/internal/testbuild"
)

// TestMain removes the binaries the tests built (the longitudinal plugin
// of TestStatefulPluginProcess).
func TestMain(m *testing.M) { os.Exit(testbuild.Main(m)) }
