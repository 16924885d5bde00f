package accountant

import (
	"fmt"
	"math"
	"testing"
)

// hadamardFamily is Hadamard response over k inputs as a budget-dependent
// mechanism (a matrix at every eps0).
func hadamardFamily(k int) Mechanism {
	return FuncMech{Name: fmt.Sprintf("hadamard-rows:k=%d", k), Declare: func(e0 float64) (*Declaration, error) {
		mx, err := NewMatrix(hadamardRows(k, e0))
		if err != nil {
			return nil, err
		}
		return &Declaration{Eps0: e0, Form: FormMatrix, Matrix: mx}, nil
	}}
}

// TestHorizonFailsSameSearch: the horizon search with the certificate
// (largest.go, point 6) returns the same eps0, bit for bit, and the same
// proven eps as without it, and the certificate does skip probes.
func TestHorizonFailsSameSearch(t *testing.T) {
	for _, c := range []struct {
		m Mechanism
		t Target
	}{
		{KRR(10), Target{Eps: 0.5, Delta: 1e-9, N: 10000, Rounds: 30}},
		{KRR(100), Target{Eps: 1, Delta: 1e-6, N: 20000, Rounds: 12}},
		{hadamardFamily(8), Target{Eps: 1, Delta: 1e-6, N: 10000, Rounds: 10}},
		{Generic(), Target{Eps: 2, Delta: 1e-7, N: 5000, Rounds: 20}},
	} {
		name := fmt.Sprintf("%s %+v", c.m, c.t)
		certified, skipped := 0, 0
		fails := func(eps0 float64) bool {
			f := lowerExceeds(c.m, eps0, c.t)
			certified++
			if f {
				skipped++
			}
			return f
		}
		with, proofWith, err := searchRoundsWith(c.m, c.t, fails)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		without, proofWithout, err := searchRoundsWith(c.m, c.t, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if skipped == 0 {
			t.Errorf("%s: the certificate skipped no probe (%d asked)", name, certified)
		}
		if math.Float64bits(with) != math.Float64bits(without) {
			t.Errorf("%s: eps0 %.17g with the certificate, %.17g without", name, with, without)
		}
		if a, b := proofWith(), proofWithout(); a != b {
			t.Errorf("%s: proof %+v with the certificate, %+v without", name, a, b)
		}
	}
}

// TestLowerExceedsMeansProbeFails checks the certificate's argument
// (horizon_fails.go) against the probe itself: wherever one report's lower
// bound exceeds twice delta, the horizon's pessimistic PLDs do not prove
// the target, and the certificate fires on a grid reaching far above the
// answer. An independent check of point 3: the PLD bound is computed
// without the certificate.
func TestLowerExceedsMeansProbeFails(t *testing.T) {
	fired := 0
	for _, c := range []struct {
		m Mechanism
		t Target
	}{
		{KRR(4), Target{Eps: 0.5, Delta: 1e-6, N: 2000, Rounds: 5}},
		{KRR(50), Target{Eps: 1, Delta: 1e-8, N: 5000, Rounds: 3}},
		{hadamardFamily(4), Target{Eps: 1, Delta: 1e-6, N: 3000, Rounds: 4}},
	} {
		for eps0 := 0.5; eps0 <= 12; eps0 *= 1.3 {
			if !lowerExceeds(c.m, eps0, c.t) {
				continue
			}
			fired++
			comp, err := NewComposition(Part{Mech: c.m, Eps0: eps0, N: c.t.N, Rounds: c.t.Rounds})
			if err != nil {
				t.Fatal(err)
			}
			d := composedDelta(comp.plds(c.t.Delta, 0, true).upper, c.t.Eps, true)
			if !(d > c.t.Delta) {
				t.Errorf("%s at eps0 %.4g: certified to fail, but the horizon bound %.3g meets delta %.3g", c.m, eps0, d, c.t.Delta)
			}
		}
	}
	if fired < 10 {
		t.Errorf("the certificate fired at %d points only", fired)
	}
}

// TestLowerExceedsFloorAndRefusal: no certificate with a floor of blanket
// draws, nor at a budget the mechanism refuses.
func TestLowerExceedsFloorAndRefusal(t *testing.T) {
	tg := Target{Eps: 0.5, Delta: 1e-6, N: 2000, Rounds: 5}
	if !lowerExceeds(KRR(4), 12, tg) {
		t.Fatal("k-RR at eps0 12: want the certificate to fire without a floor")
	}
	tg.Floor = 100
	if lowerExceeds(KRR(4), 12, tg) {
		t.Error("certificate used with a floor")
	}
	refuse := FuncMech{Name: "refuses", Declare: func(float64) (*Declaration, error) {
		return nil, fmt.Errorf("%w: no", ErrInvalidArgument)
	}}
	if lowerExceeds(refuse, 12, Target{Eps: 0.5, Delta: 1e-6, N: 2000, Rounds: 5}) {
		t.Error("certificate fired at a refused budget")
	}
}
