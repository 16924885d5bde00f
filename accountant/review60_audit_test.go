//go:build audit

package accountant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// TestReview60AuditPairWalkGate: as TestReview60PairWalkTermsExact, 240
// pairs with left at the gate's limit and the worst rho of 1000 candidates.
func TestReview60AuditPairWalkGate(t *testing.T) {
	ln2 := bigLn2()
	r := rand.New(rand.NewPCG(60, 9))
	lf := logFactorials(100_000)
	var st r60WalkStats
	for i := range 240 {
		gap := []float64{0, 0.5, 5, 60}[i%4]
		lx, ly, _ := r60WorstPair(ln2, r, 1000, gap)
		d := lx - ly
		left := int(walkRel / ((math.Abs(d) + 5) * ulp * 1.01))
		r60CheckWalk(t, ln2, lf, left, lx, ly, &st)
	}
	t.Logf("%d walked terms; worst term error %.3g (%.3f of k(|d|+7)u1.01, %.3f of the old k(|d|+5)u1.01, %.3f of 1.4 walkRel)",
		st.terms, st.worstRel, st.worstOfBound, st.worstOfOld, st.worstRel/(1.4*walkRel))
}

// TestReview60AuditLaplaceStopVsExhaustive: on laplace upper sets where
// epsUpper stops early (after a shortcut), the refinement run to the end
// without shortcut or stop (r60Exhaustive) never gives a larger root than
// the stop's: stopping keeps the root continuing would only lower. The
// reviewer ran eps0 12 and 20, both upper sets, once (177 s); the audit
// keeps eps0 20's first set.
func TestReview60AuditLaplaceStopVsExhaustive(t *testing.T) {
	for _, eps0 := range []float64{20} {
		d, err := Decompose(laplace.Declaration(eps0, laplace.Bins))
		if err != nil {
			t.Fatal(err)
		}
		const n, delta = 30, 1e-6
		for i, s := range d.Upper[:1] {
			var tr r60Trace
			e, ok := r60EpsUpper(s, n, delta, eps0, &tr)
			eo, oko := r60Exhaustive(s, n, delta, eps0)
			t.Logf("eps0 %g set %d: stop (%v, %v, shortcuts %d, early %v), exhaustive (%v, %v)", eps0, i, e, ok, tr.shortcuts, tr.earlyStop, eo, oko)
			if e < eo {
				t.Errorf("eps0 %g set %d: %v below the exhaustive %v", eps0, i, e, eo)
			}
		}
	}
}
