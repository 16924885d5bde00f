package accountant

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// Review 65: bracket with a certificate (halveCertified) against bracket
// without one, for probes that are not monotone and certificates that are
// right (they certify only points whose probe fails) but patchy: the same
// a and b, bit for bit, the same error, and no probe the plain search did
// not make.

type r65Probe struct {
	g     func(x float64) float64
	err   func(x float64) error
	order []float64
}

func (p *r65Probe) probe(x float64) (float64, string, error) {
	p.order = append(p.order, x)
	if p.err != nil {
		if err := p.err(x); err != nil {
			return 0, "", err
		}
	}
	return p.g(x), fmt.Sprint(x), nil
}

func r65Bracket(g func(float64) float64, perr func(float64) error, fails func(float64) bool, x0, floor float64, ceil ...float64) (a, b probed, order []float64, err error) {
	p := &r65Probe{g: g, err: perr}
	s := largest[string]{probe: p.probe, floor: floor, ceil: x0, tol: calTol, fails: fails}
	if len(ceil) > 0 && ceil[0] > x0 {
		// A growth phase too (searchRounds has none: its ceiling is its
		// start), so that a certificate used there would be seen.
		s.ceil = ceil[0]
		s.grow = func(x float64, step int) float64 { return x * (2 + float64(step%3)) }
	}
	a, b, err = s.bracket(x0)
	return a, b, p.order, err
}

func sameProbed(u, v probed) bool {
	return math.Float64bits(u.x) == math.Float64bits(v.x) && math.Float64bits(u.g) == math.Float64bits(v.g)
}

func TestReview65HalveCertifiedDifferential(t *testing.T) {
	rng := rand.New(rand.NewSource(65))
	for trial := 0; trial < 20000; trial++ {
		x0 := math.Exp(rng.Float64()*12 - 4)
		floor := []float64{1e-6, x0 / 1000, x0 / 3, x0 * 2}[rng.Intn(4)]
		// g: positive above a threshold, with random holes (proofs above
		// the threshold: not monotone), random NaN answers, occasional 0.
		thr := x0 * math.Exp(-rng.Float64()*14)
		ceil := x0
		if rng.Float64() < 0.3 {
			thr = x0 * math.Exp(rng.Float64()*6)
			ceil = x0 * math.Exp(rng.Float64()*8)
		}
		holes := map[int]bool{}
		nans := map[int]bool{}
		for k := 0; k < 64; k++ {
			if rng.Float64() < 0.08 {
				holes[k] = true
			}
			if rng.Float64() < 0.05 {
				nans[k] = true
			}
		}
		zeroAt := -1
		if rng.Float64() < 0.1 {
			zeroAt = rng.Intn(20)
		}
		level := func(x float64) int { return int(math.Round(math.Log2(x0/x))) & 63 }
		g := func(x float64) float64 {
			k := level(x)
			if nans[k] {
				return math.NaN()
			}
			if k == zeroAt {
				return 0
			}
			if holes[k] {
				return -0.5
			}
			return math.Log(x / thr)
		}
		// A right certificate: it fires only where the probe fails
		// (g > 0 or NaN), at random.
		pfire := rng.Float64()
		cert := map[int]bool{}
		for k := 0; k < 64; k++ {
			cert[k] = rng.Float64() < pfire
		}
		fails := func(x float64) bool {
			gx := g(x)
			return cert[level(x)] && (gx > 0 || math.IsNaN(gx))
		}
		a0, b0, ord0, e0 := r65Bracket(g, nil, nil, x0, floor, ceil)
		a1, b1, ord1, e1 := r65Bracket(g, nil, fails, x0, floor, ceil)
		if (e0 == nil) != (e1 == nil) || (e0 != nil && !errors.Is(e1, e0) && e0.Error() != e1.Error()) {
			t.Fatalf("trial %d: err %v without, %v with", trial, e0, e1)
		}
		if e0 == nil && (!sameProbed(a0, a1) || !sameProbed(b0, b1)) {
			t.Fatalf("trial %d: (%v, %v) without, (%v, %v) with", trial, a0, b0, a1, b1)
		}
		seen := map[float64]bool{}
		for _, x := range ord0 {
			seen[x] = true
		}
		for _, x := range ord1 {
			if !seen[x] {
				t.Fatalf("trial %d: probed %v, which the plain search did not", trial, x)
			}
		}
	}
}

// A probe error at a point the certificate settles is not seen with the
// certificate (largest.go point 6 says so): the plain search returns the
// error, the certified one the bracket (or errBelowFloor). Recorded here as
// the one behavioural difference with a right certificate.
func TestReview65HalveCertifiedHidesSkippedError(t *testing.T) {
	boom := errors.New("boom")
	g := func(x float64) float64 { return math.Log(x / 1) }
	perr := func(x float64) error {
		if x == 16 {
			return boom
		}
		return nil
	}
	fails := func(x float64) bool { return x > 1.5 }
	_, _, _, e0 := r65Bracket(g, perr, nil, 32, 1e-6)
	_, _, _, e1 := r65Bracket(g, perr, fails, 32, 1e-6)
	if !errors.Is(e0, boom) {
		t.Fatalf("plain: err %v, want boom", e0)
	}
	if e1 != nil {
		t.Logf("certified: err %v", e1)
	} else {
		t.Logf("certified: no error (the probe error at 16 is skipped), as documented")
	}
	// Every point certified down to the floor: errBelowFloor in both.
	all := func(float64) bool { return true }
	_, _, ord, e2 := r65Bracket(func(x float64) float64 { return 1 }, nil, all, 8, 1)
	_, _, _, e3 := r65Bracket(func(x float64) float64 { return 1 }, nil, nil, 8, 1)
	if !errors.Is(e2, errBelowFloor) || !errors.Is(e3, errBelowFloor) || len(ord) != 0 {
		t.Fatalf("all certified: %v (%d probes), plain %v", e2, len(ord), e3)
	}
}
