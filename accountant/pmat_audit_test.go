//go:build audit

package accountant

import (
	"math/rand/v2"
	"testing"
)

// TestBandEndAdversarialGrid is TestBandEndAdversarialLaws on 40,000 laws
// (about 2 s; it cuts about a third of them and checks some 3e7
// coefficients past bandEnd's k1).
func TestBandEndAdversarialGrid(t *testing.T) {
	checkBandEndAdversarial(t, rand.New(rand.NewPCG(42, 45)), 40_000)
}
