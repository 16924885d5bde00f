package accountant

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// recorder is a probe that remembers every answer it gave, so a test can
// check the search's result against what the probe really said.
type recorder struct {
	g     func(x float64) (float64, error)
	seen  map[float64]bool
	gave  map[string]float64 // each proof given (g <= 0), with its x
	calls int
}

func (r *recorder) probe(x float64) (float64, string, error) {
	r.calls++
	g, err := r.g(x)
	if err != nil {
		return 0, "", err
	}
	if r.seen == nil {
		r.seen, r.gave = map[float64]bool{}, map[string]float64{}
	}
	r.seen[x] = true
	proof := fmt.Sprintf("call %d at %v", r.calls, x)
	if g <= 0 {
		r.gave[proof] = x
	}
	return g, proof, nil
}

// checkProven fails unless the proof returned is one the probe gave at
// exactly x with g <= 0 (point 2 of largest.go).
func checkProven(t *testing.T, r *recorder, x float64, proof string) {
	t.Helper()
	if !r.seen[x] {
		t.Fatalf("returned x = %v, which the probe never saw", x)
	}
	at, ok := r.gave[proof]
	if !ok {
		t.Fatalf("returned x = %v with %q, which is not a proof the probe gave", x, proof)
	}
	if at != x {
		t.Fatalf("returned x = %v with the proof the probe gave at %v", x, at)
	}
}

// TestLargestMonotoneFindsThreshold: where g grows with x and crosses 0 at
// x*, the search returns a proven x in [x*(1-tol), x*] from starts below,
// at and above x*, with interpolating g, with proof-only g (bisection), and
// with the mirrored root finder.
func TestLargestMonotoneFindsThreshold(t *testing.T) {
	for _, star := range []float64{1e-5, 0.37, 1, 2.5, 17.3} {
		for _, start := range []float64{star / 40, star / 1.1, star, star * 1.7, star * 900} {
			for _, kind := range []string{"log", "sign"} {
				r := &recorder{g: func(x float64) (float64, error) {
					if kind == "sign" {
						if x <= star {
							return math.Inf(-1), nil
						}
						return 1, nil
					}
					return math.Log(x / star), nil
				}}
				s := largest[string]{probe: r.probe, floor: 1e-6, ceil: 1000, tol: calTol,
					grow: func(x float64, _ int) float64 { return 2 * x }}
				x, proof, err := s.run(start)
				name := fmt.Sprintf("x*=%v start=%v %s", star, start, kind)
				if star < 1e-6*2 && start > star {
					// Halving from above may step below the floor before the
					// threshold: then errBelowFloor is the right answer.
					if err != nil && !errors.Is(err, errBelowFloor) {
						t.Fatalf("%s: %v", name, err)
					}
					if err != nil {
						continue
					}
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkProven(t, r, x, proof)
				if x > star || x < star*(1-calTol) {
					t.Errorf("%s: x = %v, want in [%v, %v]", name, x, star*(1-calTol), star)
				}
			}
		}
	}
}

// TestLargestNarrowMirrored: Calibrate's rule returns a proven point within
// the root finder's tolerance of the threshold, and the lower end when the
// probe no longer proves anything inside.
func TestLargestNarrowMirrored(t *testing.T) {
	for _, star := range []float64{1.0001, 1.3, 1.999, 3.7} {
		r := &recorder{g: func(x float64) (float64, error) { return math.Log(x / star), nil }}
		s := largest[string]{probe: r.probe}
		x, _, err := s.narrowMirrored(1, 4)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := s.proof(x)
		if !ok {
			t.Fatalf("x* = %v: x = %v has no proof", star, x)
		}
		checkProven(t, r, x, p)
		// The root finder stops at relative width rootTol of the mirrored
		// coordinate y = 5 - x, at most 4.
		if x > star || star-x > rootTol*4*1.0001 {
			t.Errorf("x* = %v: x = %v", star, x)
		}
	}
	r := &recorder{g: func(x float64) (float64, error) { return 1, nil }}
	s := largest[string]{probe: r.probe}
	if x, _, err := s.narrowMirrored(1, 4); err != nil || x != 1 {
		t.Errorf("nothing proven inside: got %v, %v; want the lower end 1", x, err)
	}
}

// TestLargestNeverReturnsUnproven: for probes that are not monotone and
// whose answers vary between calls (as parallel sums do in their last
// digits), whatever the search returns was proven by the probe at that
// very x, with that call's proof.
func TestLargestNeverReturnsUnproven(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		// A proven set that is a union of random intervals, flipped at
		// random in one call of ten, so that a repeated x may change its
		// answer.
		var cuts []float64
		for range 1 + rng.IntN(6) {
			cuts = append(cuts, 0.01+rng.Float64()*30)
		}
		noise := rng.Float64() * 0.5
		r := &recorder{g: func(x float64) (float64, error) {
			in := false
			for _, c := range cuts {
				if x < c {
					in = !in
				}
			}
			if rng.IntN(10) == 0 {
				in = !in
			}
			v := 0.5 + noise*(rng.Float64()-0.5)
			if in {
				return -v, nil
			}
			return v, nil
		}}
		s := largest[string]{probe: r.probe, floor: 1e-3, ceil: 50, tol: calTol,
			grow: func(x float64, k int) float64 { return x*1.25 + float64(k) }}
		x, proof, err := s.run(0.1 + rng.Float64()*20)
		if errors.Is(err, errBelowFloor) {
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkProven(t, r, x, proof)
	}
}

// TestLargestEnds: everything proven gives the ceiling without narrowing,
// the start when there is no growth; nothing proven ends at the floor
// after halvings only; a probe error ends the search unless outside says it
// only means "not proven here".
func TestLargestEnds(t *testing.T) {
	all := &recorder{g: func(float64) (float64, error) { return -1, nil }}
	s := largest[string]{probe: all.probe, floor: 1e-6, ceil: 20, tol: calTol,
		grow: func(x float64, _ int) float64 { return 3 * x }}
	if x, _, err := s.run(1); err != nil || x != 20 {
		t.Errorf("all proven: %v, %v; want the ceiling 20", x, err)
	}
	s = largest[string]{probe: all.probe, floor: 1e-6, ceil: 7, tol: calTol}
	if x, _, err := s.run(7); err != nil || x != 7 {
		t.Errorf("all proven, no growth: %v, %v; want the start 7", x, err)
	}

	none := &recorder{g: func(float64) (float64, error) { return 1, nil }}
	s = largest[string]{probe: none.probe, floor: 0.01, ceil: 20, tol: calTol,
		grow: func(x float64, _ int) float64 { return 2 * x }}
	if _, _, err := s.run(1); !errors.Is(err, errBelowFloor) {
		t.Errorf("none proven: %v, want errBelowFloor", err)
	}
	if none.calls != 7 { // 1, 1/2, ..., 1/64; 1/128 < 0.01 is not tried
		t.Errorf("none proven: %d probes, want 7 (halving to the floor)", none.calls)
	}
	s.floor = 1
	none.calls = 0
	if _, _, err := s.run(1); !errors.Is(err, errBelowFloor) || none.calls != 1 {
		t.Errorf("floor at the start: %v after %d probes, want errBelowFloor after 1", err, none.calls)
	}

	refuse := func(x float64) (float64, error) {
		if x > 4 {
			return 0, fmt.Errorf("%w: budget %v", ErrInvalidArgument, x)
		}
		return math.Log(x / 9), nil // the bound alone would allow 9
	}
	r := &recorder{g: refuse}
	s = largest[string]{probe: r.probe, outside: isOutsideDomain, floor: 1e-6, ceil: 20, tol: calTol,
		grow: func(x float64, _ int) float64 { return 2 * x }}
	x, proof, err := s.run(1)
	if err != nil {
		t.Fatal(err)
	}
	checkProven(t, r, x, proof)
	if x > 4 || x < 4*(1-calTol) {
		t.Errorf("refused above 4: x = %v, want just below 4", x)
	}
	s.outside = nil
	if _, _, err := s.run(1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("without outside, a refusal must end the search: %v", err)
	}
}

// TestStepDown: the first budget the check accepts, stepping down by the
// factor; none accepted in 40 steps says so.
func TestStepDown(t *testing.T) {
	x, r, ok, err := stepDown(10, 0.1, func(x float64) (float64, bool, error) { return x * 2, x < 7, nil })
	if err != nil || !ok || x >= 7 || x < 7*0.9 || r != 2*x {
		t.Errorf("stepDown = %v, %v, %v, %v; want the first of 10*0.9^k below 7 with its result", x, r, ok, err)
	}
	calls := 0
	if _, _, ok, err := stepDown(10, 0.1, func(float64) (int, bool, error) { calls++; return 0, false, nil }); ok || err != nil || calls != 40 {
		t.Errorf("never accepted: ok %v, err %v after %d checks; want false, nil after 40", ok, err, calls)
	}
	boom := errors.New("boom")
	if _, _, _, err := stepDown(10, 0.1, func(float64) (int, bool, error) { return 0, false, boom }); !errors.Is(err, boom) {
		t.Errorf("an error must end stepDown: %v", err)
	}
}

// TestLargestKeepsProofsOnly: a later failure at the same x keeps the proof
// made there, and a failure never becomes a proof.
func TestLargestKeepsProofsOnly(t *testing.T) {
	answers := []float64{-1, 1}
	r := &recorder{g: func(float64) (float64, error) {
		g := answers[0]
		answers = answers[1:]
		return g, nil
	}}
	s := largest[string]{probe: r.probe}
	for range 2 {
		if _, err := s.eval(3); err != nil {
			t.Fatal(err)
		}
	}
	p, ok := s.proof(3)
	if !ok {
		t.Fatal("the proof made at 3 was lost when a later probe failed there")
	}
	checkProven(t, r, 3, p)
	answers = []float64{0.5}
	if _, err := s.eval(4); err != nil {
		t.Fatal(err)
	}
	if p, ok := s.proof(4); ok {
		t.Errorf("a failed probe at 4 became the proof %q", p)
	}
}

// TestLargestNaNIsNoProof: a probe answering NaN proves nothing, in run,
// in bracket's growth and in narrowing.
func TestLargestNaNIsNoProof(t *testing.T) {
	nan := &recorder{g: func(float64) (float64, error) { return math.NaN(), nil }}
	s := largest[string]{probe: nan.probe, floor: 0.01, ceil: 30, tol: calTol,
		grow: func(x float64, _ int) float64 { return 2 * x }}
	if x, p, err := s.run(1); !errors.Is(err, errBelowFloor) {
		t.Errorf("NaN everywhere: run = %v, %q, %v; want errBelowFloor", x, p, err)
	}
	// Proven up to 2, NaN above: the bracket must end at the first NaN.
	r := &recorder{g: func(x float64) (float64, error) {
		if x <= 2 {
			return -1, nil
		}
		return math.NaN(), nil
	}}
	s = largest[string]{probe: r.probe, floor: 0.01, ceil: 30, tol: calTol,
		grow: func(x float64, _ int) float64 { return 2 * x }}
	x, p, err := s.run(1)
	if err != nil {
		t.Fatal(err)
	}
	checkProven(t, r, x, p)
	if x > 2 {
		t.Errorf("NaN above 2 read as a proof: x = %v", x)
	}
}

// TestLargestNarrowMirroredRounding: where a + b - b rounds above a, the
// mirrored rule must still return a itself when nothing inside is proven
// (the rounded point was never proven).
func TestLargestNarrowMirroredRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	found := 0
	for range 100000 {
		a := rng.Float64() * 10
		b := a + rng.Float64()*10
		if a+b-b <= a {
			continue
		}
		found++
		r := &recorder{g: func(x float64) (float64, error) {
			if x == a {
				return -1, nil
			}
			return 1, nil
		}}
		s := largest[string]{probe: r.probe}
		x, _, err := s.narrowMirrored(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if x != a {
			t.Fatalf("[%v, %v]: nothing proven inside, got %v, want the end %v", a, b, x, a)
		}
		if found == 20 {
			return
		}
	}
	t.Fatalf("found only %d brackets where a + b - b rounds above a", found)
}

// TestSolveDecreasingNeverMet: when f misses the target everywhere, by
// however little, the root finder says so (a log distance below the
// target value was once read as met).
func TestSolveDecreasingNeverMet(t *testing.T) {
	for _, above := range []float64{1e-3, 1e-7, 1e-12, 0x1p-52} {
		target := 1e-6
		f := func(float64) float64 { return target * (1 + above) }
		if x, ok := solveDecreasing(f, target, 0, 2); ok {
			t.Errorf("f = target*(1+%g) everywhere: solveDecreasing = %v, met; want not met", above, x)
		}
		if a := solveDecreasingLow(f, target, 0, 2); a == 0 {
			t.Errorf("f = target*(1+%g) everywhere: solveDecreasingLow = 0 (met at 0); want an end where it is missed", above)
		}
	}
}

// TestCalibrateLongitudinalArguments: bad arguments are named as such,
// not searched for (a refused budget counts as not proven there).
func TestCalibrateLongitudinalArguments(t *testing.T) {
	m := LongitudinalMech{Tree: 4}
	for _, tg := range []Target{
		{Eps: 0, Delta: 1e-6, N: 1000},
		{Eps: 1, Delta: 1e-6, N: 1000, Rounds: MaxRounds + 1},
		{Eps: 1, Delta: 1e-6, N: 1000, Rounds: -1},
	} {
		if _, err := CalibrateLongitudinal(m, tg); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", tg, err)
		}
	}
}

// TestLargestFailsCertificate: a certificate that the probe fails
// (largest.go, point 6) leaves the search's result and every probe after
// the halving as they are, skips the probes it certifies except the last
// unproven point, and a certificate the probe contradicts is an error.
func TestLargestFailsCertificate(t *testing.T) {
	for _, star := range []float64{0.37, 2.5, 17.3} {
		for _, start := range []float64{star * 1.7, star * 30, star * 900} {
			g := func(x float64) (float64, error) { return math.Log(x / star), nil }
			plain := &recorder{g: g}
			s := largest[string]{probe: plain.probe, floor: 1e-6, ceil: 1000, tol: calTol}
			x0, _, err := s.run(start)
			if err != nil {
				t.Fatal(err)
			}
			cert := &recorder{g: g}
			asked := map[float64]bool{}
			c := largest[string]{probe: cert.probe, floor: 1e-6, ceil: 1000, tol: calTol,
				fails: func(x float64) bool { asked[x] = true; return x > 1.2*star }}
			x1, proof, err := c.run(start)
			if err != nil {
				t.Fatal(err)
			}
			checkProven(t, cert, x1, proof)
			if x0 != x1 {
				t.Errorf("x* = %v start %v: %v with the certificate, %v without", star, start, x1, x0)
			}
			// Every point probed with the certificate was probed without
			// it, and every point skipped was certified.
			for x := range cert.seen {
				if !plain.seen[x] {
					t.Errorf("x* = %v start %v: probed %v, which the plain search never probed", star, start, x)
				}
			}
			for x := range plain.seen {
				if !cert.seen[x] && !asked[x] {
					t.Errorf("x* = %v start %v: skipped %v without asking the certificate", star, start, x)
				}
			}
			if start > 6*star && cert.calls >= plain.calls {
				t.Errorf("x* = %v start %v: %d probes with the certificate, %d without", star, start, cert.calls, plain.calls)
			}
		}
	}
	// A certificate the probe contradicts (it proves a point said to
	// fail) is dropped: the search returns what it returns without one.
	for _, start := range []float64{8, 30, 700} {
		g := func(x float64) (float64, error) { return math.Log(x / 5), nil }
		plain := &recorder{g: g}
		p := largest[string]{probe: plain.probe, floor: 1e-6, ceil: 1000, tol: calTol}
		want, _, err := p.run(start)
		if err != nil {
			t.Fatal(err)
		}
		r := &recorder{g: g}
		s := largest[string]{probe: r.probe, floor: 1e-6, ceil: 1000, tol: calTol,
			fails: func(x float64) bool { return x > 1 }}
		got, proof, err := s.run(start)
		if err != nil {
			t.Fatalf("start %v: a contradicted certificate gave err = %v", start, err)
		}
		checkProven(t, r, got, proof)
		if got != want {
			t.Errorf("start %v: %v after a contradicted certificate, %v without one", start, got, want)
		}
	}
}
