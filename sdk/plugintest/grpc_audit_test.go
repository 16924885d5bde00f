//go:build audit

package plugintest_test

import (
	"testing"

	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// TestOverGRPCDeep is TestOverGRPC with laplace at the kit's default eps0s
// and estimator batches of 1000, as the other plugins.
func TestOverGRPCDeep(t *testing.T) {
	light := plugintest.Options{Samples: 5000, Batches: 50}
	overGRPC(t, light, light)
}
