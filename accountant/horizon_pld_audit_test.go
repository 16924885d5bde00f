//go:build audit

package accountant

import "testing"

// TestHorizonTinyAsymmetricDeep is TestHorizonTinyAsymmetric over sixteen
// more random compositions.
func TestHorizonTinyAsymmetricDeep(t *testing.T) { horizonTinyAsymmetric(t, 5, 16) }
