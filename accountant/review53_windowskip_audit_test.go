//go:build audit

package accountant

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Review of 21f108a (helper-53): latticeEvalSkip with windows passed over
// against every window computed, bit for bit, on random pair sets (random
// matrices of 2 to 4 rows, eps0 up to 20, entries often at the extreme
// ratios) and windowSkipSets' k-RR, generic and Hadamard pairs at eps0 4
// to 20; eps in (0, eps0), n from 2 to 1e6 (log-uniform), hRel 0.5, 0.25
// or 0.125, both sides and the upper side alone. About 40 s.

// review53MatrixSet returns the merged pair set of rows 0 and 1 of a
// random matrix and its local budget.
func review53MatrixSet(rng *rand.Rand, eps0Max float64) (AtomSet, float64) {
	k := 2 + rng.IntN(6)
	nrows := 2 + rng.IntN(3)
	eps0 := 0.1 + (eps0Max-0.1)*rng.Float64()
	rows := make([][]float64, nrows)
	base := make([]float64, k)
	for y := range base {
		base[y] = 0.05 + rng.Float64()
	}
	for x := range rows {
		rows[x] = make([]float64, k)
		var s float64
		for y := range rows[x] {
			switch rng.IntN(4) {
			case 0:
				rows[x][y] = base[y]
			case 1:
				rows[x][y] = base[y] * math.Exp(eps0)
			default:
				rows[x][y] = base[y] * math.Exp(eps0*rng.Float64())
			}
			s += rows[x][y]
		}
		for y := range rows[x] {
			rows[x][y] /= s
		}
	}
	var realEps float64
	for y := range k {
		realEps = math.Max(realEps, math.Abs(math.Log(rows[0][y]/rows[1][y])))
	}
	return audPairSet(rows, 0, 1).Merge(), realEps
}

func TestAuditReview53WindowSkipRandom(t *testing.T) {
	const evalsWanted, budget = 1500, 45 * time.Second
	rng := rand.New(rand.NewPCG(53, 21))
	fixed, names, fixedB := windowSkipSets(t, []float64{4, 8, 12, 16, 20})
	start := time.Now()
	evals, skipped := 0, 0
	for evals < evalsWanted && time.Since(start) < budget {
		var s AtomSet
		var eps0 float64
		name := "random matrix"
		if rng.IntN(3) == 0 {
			i := rng.IntN(len(fixed))
			s, eps0, name = fixed[i], fixedB[i], names[i]
		} else {
			s, eps0 = review53MatrixSet(rng, 20)
		}
		if !(eps0 > 0) {
			continue
		}
		// eps in (0, eps0), weighted towards eps0 where windows are
		// passed over.
		eps := eps0 * math.Pow(rng.Float64(), 0.3) * 0.999
		n := max(2, int(math.Pow(10, 0.3+5.7*rng.Float64())))
		hRel := []float64{0.5, 0.25, 0.125}[rng.IntN(3)]
		wantLo := rng.IntN(2) == 0
		p := prepare(s, eps)
		if p.maxZ <= 0 {
			continue
		}
		got, k := latticeEvalSkip(p, n, hRel, wantLo, true)
		want, k0 := latticeEvalSkip(p, n, hRel, wantLo, false)
		if k0 != 0 {
			t.Fatalf("skip off passed over %d windows", k0)
		}
		evals++
		skipped += k
		if got != want {
			t.Errorf("%s %v eps0 %v eps %v n %d hRel %g wantLo %v: %d windows passed over: %+v, every window %+v",
				name, s, eps0, eps, n, hRel, wantLo, k, got, want)
		}
	}
	t.Logf("%d evaluations, %d windows passed over, %v", evals, skipped, time.Since(start))
	if evals < 300 || skipped < 300 {
		t.Errorf("%d evaluations, %d windows passed over: want >= 300 of each", evals, skipped)
	}
}
