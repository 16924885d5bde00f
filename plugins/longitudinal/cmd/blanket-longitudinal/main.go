// Command blanket-longitudinal serves the longitudinal randomizer as a
// Blanket plugin; the host (plugin.Open) starts it. Run by hand it explains
// that and exits.
package main

import (
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(longitudinal.FromConfig)) }
