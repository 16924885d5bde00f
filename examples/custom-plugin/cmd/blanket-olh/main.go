// Command blanket-olh serves the optimal local hashing randomizer of package
// olh as a Blanket plugin; the host (plugin.Open) starts it. Run by hand it
// explains that and exits. It is the whole binary of a third-party plugin:
// the algorithm lives in an importable, tested package.
package main

import (
	"github.com/blanket-dp/blanket/examples/custom-plugin/olh"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(olh.FromConfig)) }
