package accountant

import (
	"math"
	"testing"
)

// certEps0Compare calibrates each case with and without the certificate in
// eps0 (calibrateOne) and wants the same result, to 1e-12 relative, in
// fewer lattice steps: these are cases where delta is flat in eps near the
// target, so the certificate in eps never passes and the refinement used
// to run to maxRefine (or the cap) for the same answer. (The design
// allows twice the search's tolerance between the two; they agreed bit
// for bit until the sparse path's walk allowance grew by 4e-12 relative,
// after which krr:k=10 differs by 2 ulp.)
func certEps0Compare(t *testing.T, m Mechanism, targets []Target) {
	for _, tg := range targets {
		got, steps, err := calibrateOne(m, tg, true)
		if err != nil {
			t.Fatalf("%s %+v: %v", m, tg, err)
		}
		want, stepsOld, err := calibrateOne(m, tg, false)
		if err != nil {
			t.Fatalf("%s %+v without the certificate in eps0: %v", m, tg, err)
		}
		close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }
		if !close(got.Eps0, want.Eps0) || !close(got.Achieved.Upper, want.Achieved.Upper) ||
			!close(got.Achieved.Lower, want.Achieved.Lower) || got.Achieved.Tight != want.Achieved.Tight {
			t.Errorf("%s %+v: %+v, without the certificate in eps0 %+v", m, tg, got, want)
		}
		if steps >= stepsOld {
			t.Errorf("%s %+v: %d lattice steps, without the certificate in eps0 %d: want fewer", m, tg, steps, stepsOld)
		}
		t.Logf("%s %+v: eps0 %v in %d lattice steps (%d without)", m, tg, got.Eps0, steps, stepsOld)
	}
}

// TestCalibrateCertEps0 runs certEps0Compare on k-RR and the generic
// mechanism at eps 4 (make audit adds k-RR with k = 10 and 100 at
// n = 1e6, 25 s each without the certificate).
func TestCalibrateCertEps0(t *testing.T) {
	certEps0Compare(t, KRR(2), []Target{
		{Eps: 4, Delta: 1e-10, N: 100000},
		{Eps: 4, Delta: 1e-6, N: 1000000},
	})
	certEps0Compare(t, KRR(10), []Target{{Eps: 4, Delta: 1e-6, N: 100000}})
	certEps0Compare(t, Generic(), []Target{{Eps: 4, Delta: 1e-6, N: 1000000}})
}
