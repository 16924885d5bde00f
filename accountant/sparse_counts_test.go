package accountant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestCountingCountsBruteForce: countingCounts gives exactly the m of m0,
// m0 + stride, ..., m1 that sumRange's test mFirst <= m <= mLast keeps,
// with infinite, NaN and fractional ends.
func TestCountingCountsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 28))
	ends := func(m0, m1 int) float64 {
		switch rng.IntN(8) {
		case 0:
			return math.Inf(1)
		case 1:
			return math.Inf(-1)
		case 2:
			return math.NaN()
		}
		return float64(m0-20) + rng.Float64()*float64(m1-m0+40)
	}
	for range 20000 {
		m0 := rng.IntN(50)
		m1 := m0 + rng.IntN(300)
		stride := 1 + rng.IntN(40)
		mFirst, mLast := ends(m0, m1), ends(m0, m1)
		if rng.IntN(4) == 0 {
			mFirst = math.Floor(mFirst)
		}
		if rng.IntN(3) == 0 {
			mLast = math.Ceil(mLast) // rootCounts' last is whole
		}
		var want []int
		for m := m0; m <= m1; m += stride {
			if !(float64(m) < mFirst || float64(m) > mLast) {
				want = append(want, m)
			}
		}
		first, last := countingCounts(m0, m1, stride, mFirst, mLast)
		var got []int
		for m := first; m <= last; m += stride {
			if !(float64(m) < mFirst || float64(m) > mLast) {
				got = append(got, m)
			}
		}
		// Every m the walk visits must be one sumRange keeps, so that it
		// skips nothing it would have done and does nothing more.
		visited := 0
		for m := first; m <= last; m += stride {
			visited++
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || visited != len(want) {
			t.Fatalf("m0 %d m1 %d stride %d mFirst %v mLast %v: walk [%d, %d] keeps %v (%d visited), want %v",
				m0, m1, stride, mFirst, mLast, first, last, got, visited, want)
		}
		if len(want) > 0 && (first-m0)%stride != 0 {
			t.Fatalf("first %d is off the stride %d from %d", first, stride, m0)
		}
	}
}

// TestEmBelowBoundsEveryCount: where emBelow holds, no m of [0, m1] has
// sumRange's exponent error above 0.01, computed from the log masses
// sumRange reads (an independent check of the analytic bound); and it
// does not hold where some m's error passes 0.01.
func TestEmBelowBoundsEveryCount(t *testing.T) {
	checked := 0
	for _, n := range []int{10, 1000, 100000, 400000} {
		for _, pi := range []float64{1e-9, 1e-4, 0.3, 0.9, 1 - 1e-9} {
			for _, a := range []int{1, 2, 7, 300, 100000, 50000000} {
				for _, maxL := range []float64{0, 5, 700} {
					m1 := min(n, int(float64(n)*pi+6*math.Sqrt(float64(n)*pi)+10))
					lf := logFactorials(m1)
					if !emBelow(a, n, pi, lf[m1], m1, maxL) {
						continue
					}
					checked++
					lpms := logBinomPMFs(n, pi, m1)
					for m := 0; m <= m1; m++ {
						if math.IsInf(lpms[m], -1) {
							continue
						}
						em := float64(2*a+10) * ulp * (math.Abs(lpms[m]) + 2*lf[m] + float64(m)*(maxL+1))
						if em > 0.005*(1+1e-9) {
							t.Fatalf("n %d pi %g a %d maxL %g: emBelow holds but E_%d = %g", n, pi, a, maxL, m, em)
						}
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("emBelow held in %d cases only", checked)
	}
	// A case where E_m passes 0.01: a huge a.
	if emBelow(1<<40, 1000000, 0.3, logFactorials(400000)[400000], 400000, 5) {
		t.Error("emBelow holds for a = 2^40, where E_m passes 0.01")
	}
}

// TestSparseCountingCountsSameBits: the sparse path's brackets are the
// same, bit for bit, whether sumRange walks every m or only those whose
// leaves may count, on k-RR, generic and matrix sets of the sparse regime.
func TestSparseCountingCountsSameBits(t *testing.T) {
	defer func() { sparseWalkEveryCount = false }()
	compared := 0
	for _, m := range []Mechanism{KRR(2), KRR(10), Generic(), hadamardFamily(4)} {
		for _, eps0 := range []float64{0.3, 1.5, 4, 9} {
			d, err := m.Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			sets := append(append([]AtomSet{}, d.Upper...), d.Lower...)
			for _, s := range sets {
				for _, n := range []int{30, 2000, 200000} {
					for _, eps := range []float64{0.003, 0.05, 0.4, 1.2} {
						p := prepare(s, eps)
						// The skipping walk first, on empty tables: the
						// reference would fill every mass it reads
						// (review 66).
						forgetSparseTables()
						got, ok := sparseExact(p, n)
						sparseWalkEveryCount = true
						want, okWant := sparseExact(p, n)
						sparseWalkEveryCount = false
						if ok != okWant || math.Float64bits(got.lo) != math.Float64bits(want.lo) || math.Float64bits(got.hi) != math.Float64bits(want.hi) {
							t.Fatalf("%s eps0 %g n %d eps %g: %+v (%v), walking every m %+v (%v)", m, eps0, n, eps, got, ok, want, okWant)
						}
						if ok {
							compared++
						}
					}
				}
			}
		}
	}
	if compared < 50 {
		t.Errorf("only %d sparse brackets compared", compared)
	}
}
