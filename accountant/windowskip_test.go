package accountant

import (
	"math"
	"math/bits"
	"testing"
)

// hadamardRows is the Hadamard response matrix of k inputs (K = 2^b
// outputs, K > k): R[x][y] = 2e/((e+1)K) where popcount((x+1) & y) is even,
// 2/((e+1)K) elsewhere, e = e^eps0.
func hadamardRows(k int, eps0 float64) [][]float64 {
	K := 2
	for K <= k {
		K *= 2
	}
	e := math.Exp(eps0)
	rows := make([][]float64, k)
	for x := range rows {
		rows[x] = make([]float64, K)
		for y := range rows[x] {
			if bits.OnesCount(uint((x+1)&y))%2 == 0 {
				rows[x][y] = 2 * e / ((e + 1) * float64(K))
			} else {
				rows[x][y] = 2 / ((e + 1) * float64(K))
			}
		}
	}
	return rows
}

// windowSkipSets returns pair sets at large budgets, where the blanket is
// small, the tilted law nearly a point mass and the first windows fail
// their tail test: k-RR, Hadamard and the generic mechanism.
func windowSkipSets(t testing.TB, eps0s []float64) (sets []AtomSet, names []string, budgets []float64) {
	for _, eps0 := range eps0s {
		for _, m := range []Mechanism{KRR(2), KRR(64), Generic()} {
			d, err := m.Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range d.Upper {
				sets = append(sets, s)
				names = append(names, m.String())
				budgets = append(budgets, eps0)
			}
		}
		mat, err := NewMatrix(hadamardRows(12, eps0))
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decompose(&Declaration{Eps0: eps0, Form: FormMatrix, Matrix: mat})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Upper {
			sets = append(sets, s)
			names = append(names, "hadamard:k=12")
			budgets = append(budgets, eps0)
		}
	}
	return sets, names, budgets
}

// windowSkipCompare checks that latticeEval's passing over windows
// (latticeEvalSkip, engine.go) changes no bracket, bit for bit, against
// computing every window, on the sets of windowSkipSets at eps from near 0
// to near eps0, both sides and the upper side alone; it returns how many
// windows were passed over.
func windowSkipCompare(t *testing.T, eps0s []float64, ns []int, hRels []float64) (evals, skipped int) {
	sets, names, budgets := windowSkipSets(t, eps0s)
	for i, s := range sets {
		eps0 := budgets[i]
		for _, n := range ns {
			for _, f := range []float64{0.05, 0.2, 0.4, 0.6} {
				eps := f * eps0
				p := prepare(s, eps)
				if p.maxZ <= 0 {
					continue
				}
				for _, hRel := range hRels {
					for _, wantLo := range []bool{false, true} {
						got, k := latticeEvalSkip(p, n, hRel, wantLo, true)
						want, k0 := latticeEvalSkip(p, n, hRel, wantLo, false)
						if k0 != 0 {
							t.Fatalf("skip off passed over %d windows", k0)
						}
						evals++
						skipped += k
						if got != want {
							t.Errorf("%s eps0 %.4g eps %.4g n %d hRel %g wantLo %v: %d windows passed over: %+v, every window %+v",
								names[i], eps0, eps, n, hRel, wantLo, k, got, want)
						}
					}
				}
			}
		}
	}
	t.Logf("%d evaluations, %d windows passed over", evals, skipped)
	return evals, skipped
}

// TestWindowSkipKeepsBits: windowSkipCompare at eps0 8 and 14, n 1e3 and
// 3e4; the windows passed over must be many (else it shows little).
// make audit runs a larger grid (TestAuditWindowSkipKeepsBits).
func TestWindowSkipKeepsBits(t *testing.T) {
	_, skipped := windowSkipCompare(t, []float64{8, 14}, []int{1000, 30000}, []float64{0.5})
	if skipped < 20 {
		t.Errorf("%d windows passed over, want >= 20", skipped)
	}
}
