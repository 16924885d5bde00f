// Command blanket-rappor serves the rappor randomizer as a Blanket plugin; the host
// (plugin.Open) starts it. Run by hand it explains that and exits.
package main

import (
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(rappor.FromConfig)) }
