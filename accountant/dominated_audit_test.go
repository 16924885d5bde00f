//go:build audit

package accountant

import "testing"

// TestAuditPruningLeavesEpsilonUnchanged: the case that motivated the
// pruning (hadamard:k=64 at eps0 20, n 1e6: the seven-atom set takes 11 s
// without it), and its neighbours, give the same figures either way.
func TestAuditPruningLeavesEpsilonUnchanged(t *testing.T) {
	for _, eps0 := range []float64{14, 16, 20} {
		d := hadamardAtoms(t, 64, eps0)
		for _, n := range []int{1_000_000, 10_000_000} {
			compareLowerPruning(t, "hadamard:k=64", d, n, 1e-8)
		}
	}
}
