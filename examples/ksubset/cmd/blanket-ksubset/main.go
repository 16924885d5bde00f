// Command blanket-ksubset serves the k-subset randomizer of package
// ksubset as a Blanket plugin; the host (plugin.Open) starts it from a
// plugin directory (--plugin-dir or $BLANKET_PLUGIN_DIR). Run by hand it
// explains that and exits. The algorithm lives in the importable, tested
// package; this is the whole binary.
package main

import (
	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(ksubset.FromConfig)) }
