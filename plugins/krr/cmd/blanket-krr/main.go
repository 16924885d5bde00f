// Command blanket-krr serves the krr randomizer as a Blanket plugin; the host
// (plugin.Open) starts it. Run by hand it explains that and exits.
package main

import (
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(krr.FromConfig)) }
