//go:build audit

package accountant

import "testing"

// TestAuditCalibrateCertEps0: certEps0Compare where the refinement
// without the certificate in eps0 doubled the lattice to its cap.
func TestAuditCalibrateCertEps0(t *testing.T) {
	certEps0Compare(t, KRR(100), []Target{{Eps: 4, Delta: 1e-10, N: 1000000}})
	certEps0Compare(t, KRR(10), []Target{{Eps: 4, Delta: 1e-10, N: 1000000}})
}
