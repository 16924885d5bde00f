//go:build audit

package accountant

import "testing"

// (The reviewer also checked the leaf bound's exact edge, r = 65535 and
// 65536 rare atoms at n = 1, once: about 5 minutes, so it is not kept;
// TestReview59LeafCheckBoundary checks the same comparison at r = 360/361.)

// The steering grid: every mechanism of the brief, eps0 8 to 20, n 1e2 to
// 1e8, steered roots proven by the lattice and within tolerance of the
// unsteered ones. Several minutes.
func TestReview59AuditSteerGrid(t *testing.T) {
	mechs := []string{"krr:k=2", "krr:k=10", "krr:k=100", "krr:k=1000", "hadamard:k=64", "hadamard:k=256"}
	cases := r59SteerCases(t, mechs, []float64{8, 12, 16, 20}, []int{100, 10000, 1000000, 100000000}, []float64{1e-8})
	cases = append(cases, r59SteerCases(t, mechs, []float64{20}, []int{1000, 100000000}, []float64{1e-12, 1e-5})...)
	r59CheckSteer(t, cases, true)
}

// A wider grid: eps0 8 to 20 by 2, n 1e2 to 1e8 by decades, three deltas,
// with laplace (many rare atoms: compoundFew declines) added.
func TestReview59AuditSteerGridWide(t *testing.T) {
	mechs := []string{"krr:k=2", "krr:k=10", "krr:k=100", "krr:k=1000", "hadamard:k=64", "hadamard:k=256"}
	cases := r59SteerCases(t, mechs, []float64{8, 10, 14, 18, 20}, []int{100, 1000, 100000, 10000000, 100000000}, []float64{1e-5, 1e-10})
	cases = append(cases, r59SteerCases(t, []string{"laplace"}, []float64{8, 14, 20}, []int{100, 1000, 1000000}, []float64{1e-8})...)
	r59CheckSteer(t, cases, true)
}

func TestReview59AuditCompoundLowerBelowLatticeUpper(t *testing.T) {
	r59Overlap(t, []string{"krr:k=2", "krr:k=10", "krr:k=100", "krr:k=1000", "hadamard:k=64", "hadamard:k=256"},
		[]float64{8, 14, 20}, []int{1000, 100000, 1000000, 100000000}, []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9})
}
