package laplace

import (
	"context"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// blanketTol is the relative tolerance of TestBlanketIsMiddleLaw: both
// sides are a few exponentials and expm1s of the same arguments.
const blanketTol = 1e-9

// TestBlanketIsMiddleLaw: the blanket masses R the declaration gives the
// pair's bins (the minimum over centres, t·u^max(|k|, |k-m|) summed over
// a bin) are gamma = u^(m/2) times the mass the law at centre m/2 gives
// the bin, for every bin including both tails, at eps0 from 0.001 to 30:
// the law SampleBlanket draws from (the library at s = 1/2) is the
// blanket, bin by bin.
func TestBlanketIsMiddleLaw(t *testing.T) {
	for _, eps0 := range []float64{1e-3, 0.5, 2, 8, 30} {
		b := newBinning(eps0, Bins)
		h := b.m / 2
		gamma := math.Exp(-b.lam * float64(h))
		tail := math.Exp(-b.lam) / (1 + math.Exp(-b.lam)) // sum_{j>=1} t·u^j
		// The law at centre h: a run [a, z] below h has mass
		// sum t·u^(h-k), above h sum t·u^(k-h); each tail u^h·tail.
		middle := []float64{math.Exp(-b.lam*float64(h)) * tail}
		for _, run := range b.runs() {
			a, z := run[0], run[1]
			if z <= h {
				middle = append(middle, b.down(a, z, h))
			} else {
				middle = append(middle, b.up(a, z, -h))
			}
		}
		middle = append(middle, middle[0])
		pair := Declaration(eps0, Bins).Pairs[0]
		sum := 0.0
		for i, bin := range pair.Bins {
			sum += bin.R
			if want := gamma * middle[i]; math.Abs(bin.R-want) > blanketTol*want {
				t.Errorf("eps0=%v bin %d: declared blanket %.15g, gamma times the middle law's mass %.15g", eps0, i, bin.R, want)
			}
		}
		if math.Abs(sum-gamma) > blanketTol*gamma {
			t.Errorf("eps0=%v: the bins' blanket masses sum to %.15g, gamma = u^(m/2) = %.15g", eps0, sum, gamma)
		}
	}
}

// TestSampleBlanket: the library's draws at s = 1/2 follow the pair's
// bins' blanket masses R over their sum (the bins through Outputs), at
// eps0 = 0.5 and 2; they are reports Accumulate counts, and bad arguments
// fail. 5000 draws per eps0: Google's sampler is the costliest under
// make test's -race (the kit's TestBuiltins draws 5000 more at each of
// three eps0), and Pearson's test pools the bins that expect fewer than 5.
func TestSampleBlanket(t *testing.T) {
	r, err := New(Options{Lo: -5, Hi: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, eps0 := range []float64{0.5, 2} {
		d, err := r.Declare(context.Background(), eps0)
		if err != nil {
			t.Fatal(err)
		}
		b := newBinning(eps0, Bins)
		output := func(rep []byte) (int, error) {
			k, err := Decode(rep, eps0)
			return b.binOf(k), err
		}
		ldptest.CheckOutputs(t, "blanket draws against the bins' blanket masses", ldptest.SampleBlanket(t, r, eps0, 5000), output, ldptest.PairBlanketLaw(d.Pairs[0]))
	}
	ldptest.CheckBlanketContract(t, r, 1, 100)
}
