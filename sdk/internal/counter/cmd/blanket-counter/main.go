// Command blanket-counter serves the stateful test randomizer of package
// counter as a plugin, for the host's and the app SDK's tests.
package main

import (
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/internal/counter"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

func main() { plugin.Serve(sdk.FactoryOf(counter.FromConfig)) }
