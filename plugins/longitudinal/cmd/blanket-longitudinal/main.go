// Command blanket-longitudinal serves the longitudinal randomizer as a
// Blanket plugin; the host (sdk.Open) starts it. Run by hand it explains
// that and exits.
package main

import (
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
)

func main() { sdk.Serve(sdk.FactoryOf(longitudinal.FromConfig)) }
