//go:build audit

package plugintest_test

import (
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// TestBuiltinsLaplaceDeep is TestBuiltins' laplace/default with the kit's
// default draws.
func TestBuiltinsLaplaceDeep(t *testing.T) {
	plugintest.Run(t, must(laplace.FromConfig(sdk.Config{Lo: -5, Hi: 60})), plugintest.Options{})
}

// TestBuiltinsRapporDeep is TestBuiltins' rappor/default with the kit's
// default draws.
func TestBuiltinsRapporDeep(t *testing.T) {
	plugintest.Run(t, must(rappor.FromConfig(sdk.Config{Categories: labels(100)})), plugintest.Options{Strict: true})
}
