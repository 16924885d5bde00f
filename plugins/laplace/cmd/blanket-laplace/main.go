// Command blanket-laplace serves the Laplace randomizer as a Blanket plugin; the host
// (plugin.Open) starts it. Run by hand it explains that and exits.
package main

import (
	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(laplace.FromConfig)) }
