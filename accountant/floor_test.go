package accountant_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// krrAmongDraws returns the exact hockey-stick divergence at eps of k-RR's
// victim report (input x against x') among K reports drawn uniformly over
// the k outputs, counted independently of the accountant: the view is the
// histogram of the K + 1 reports, of which the counts (a, b) at x and x'
// are sufficient (the victim's other outputs and the draws are uniform on
// the other k - 2 values under both inputs), so
//
//	P(a, b) = e^eps0 c M(a-1, b) + c M(a, b-1) + (k-2) c M(a, b)
//	Q(a, b) = c M(a-1, b) + e^eps0 c M(a, b-1) + (k-2) c M(a, b)
//
// with M(A, B) the Multinomial(K; 1/k, 1/k, (k-2)/k) probability of A
// draws at x and B at x', c = 1/(e^eps0 + k - 1), and the divergence is
// sum over (a, b) of (P - e^eps Q)_+.
func krrAmongDraws(k int, eps0 float64, K int, eps float64) float64 {
	kf := float64(k)
	lf := func(n int) float64 { v, _ := math.Lgamma(float64(n) + 1); return v }
	logM := func(A, B int) float64 {
		C := K - A - B
		if A < 0 || B < 0 || C < 0 {
			return math.Inf(-1)
		}
		l := lf(K) - lf(A) - lf(B) - lf(C) + float64(A+B)*math.Log(1/kf)
		if C > 0 {
			if k == 2 {
				return math.Inf(-1)
			}
			l += float64(C) * math.Log((kf-2)/kf)
		}
		return l
	}
	M := func(A, B int) float64 { return math.Exp(logM(A, B)) }
	e0 := math.Exp(eps0)
	c := 1 / (e0 + kf - 1)
	ee := math.Exp(eps)
	var d float64
	for a := 0; a <= K+1; a++ {
		for b := 0; a+b <= K+1; b++ {
			ma, mb, m0 := M(a-1, b), M(a, b-1), M(a, b)
			p := e0*c*ma + c*mb + (kf-2)*c*m0
			q := c*ma + e0*c*mb + (kf-2)*c*m0
			if v := p - ee*q; v > 0 {
				d += v
			}
		}
	}
	return d
}

// TestFloorAloneExact: a batch of the victim alone (honest = 1) and m
// shuffler draws of k-RR's blanket (uniform) is bracketed around the exact
// divergence of the victim among m uniform draws, for several k, eps0 and
// m; the bracket is within 2% of it.
func TestFloorAloneExact(t *testing.T) {
	for _, k := range []int{2, 5, 20} {
		for _, eps0 := range []float64{1, 4} {
			for _, m := range []int{0, 1, 10, 60, 200} {
				for _, eps := range []float64{0.1, 0.5, 1.5} {
					if eps >= eps0 {
						continue
					}
					name := fmt.Sprintf("k=%d eps0=%g m=%d eps=%g", k, eps0, m, eps)
					want := krrAmongDraws(k, eps0, m, eps)
					got, err := accountant.FloorDelta(accountant.KRR(k), eps0, 1, m, eps)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got.Upper < want*(1-1e-9) || got.Lower > want*(1+1e-9) {
						t.Errorf("%s: [%.12g, %.12g] does not hold the exact %.12g", name, got.Lower, got.Upper, want)
					}
					if got.Upper > want*1.02+1e-300 {
						t.Errorf("%s: upper %.12g is more than 2%% above the exact %.12g", name, got.Upper, want)
					}
				}
			}
		}
	}
}

// TestFloorMixtureExact: with honest others the floor is the mixture of
// the victim among m + K' draws over K' ~ Binomial(honest - 1, gamma),
// computed here term by term from krrAmongDraws; the accountant's
// stratified bracket holds it and its upper end is within 3%.
func TestFloorMixtureExact(t *testing.T) {
	for _, c := range []struct {
		k          int
		eps0       float64
		honest, m  int
		epsilonSet []float64
	}{
		{5, 2, 30, 20, []float64{0.3, 0.8}},
		{20, 4, 120, 40, []float64{0.5, 1.2}},
		{2, 1, 80, 0, []float64{0.2, 0.5}},
	} {
		kf := float64(c.k)
		gamma := kf / (math.Exp(c.eps0) + kf - 1)
		for _, eps := range c.epsilonSet {
			name := fmt.Sprintf("k=%d eps0=%g honest=%d m=%d eps=%g", c.k, c.eps0, c.honest, c.m, eps)
			var want float64
			N := c.honest - 1
			for j := 0; j <= N; j++ {
				lp, _ := math.Lgamma(float64(N) + 1)
				l1, _ := math.Lgamma(float64(j) + 1)
				l2, _ := math.Lgamma(float64(N-j) + 1)
				w := math.Exp(lp - l1 - l2 + float64(j)*math.Log(gamma) + float64(N-j)*math.Log1p(-gamma))
				want += w * krrAmongDraws(c.k, c.eps0, c.m+j, eps)
			}
			got, err := accountant.FloorDelta(accountant.KRR(c.k), c.eps0, c.honest, c.m, eps)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.Upper < want*(1-1e-9) {
				t.Errorf("%s: upper %.12g below the exact mixture %.12g", name, got.Upper, want)
			}
			if got.Upper > want*1.03 {
				t.Errorf("%s: upper %.12g more than 3%% above the exact mixture %.12g", name, got.Upper, want)
			}
			if got.Lower != 0 {
				t.Errorf("%s: lower %g, want 0 (unknown with honest others)", name, got.Lower)
			}
		}
	}
}

// TestFloorZeroIsTheBlanketBound: with no draws the floor is §3's bound
// at n = honest, whose exact value krrExactDelta computes independently
// (a different formula: the n-fold sum with the residual): the floor's
// upper end holds it and is within 3%, for n where the strata matter.
func TestFloorZeroIsTheBlanketBound(t *testing.T) {
	floorZeroCases(t, []floorZeroCase{{10, 3, 1000, 0.5}, {2, 2, 300, 0.5}})
}

type floorZeroCase struct {
	k    int
	eps0 float64
	n    int
	eps  float64
}

func floorZeroCases(t *testing.T, cases []floorZeroCase) {
	for _, c := range cases {
		name := fmt.Sprintf("k=%d eps0=%g n=%d eps=%g", c.k, c.eps0, c.n, c.eps)
		want := krrExactDelta(c.k, c.eps0, c.n, c.eps)
		got, err := accountant.FloorDelta(accountant.KRR(c.k), c.eps0, c.n, 0, c.eps)
		if err != nil {
			t.Fatal(err)
		}
		if got.Upper < want*(1-1e-9) || got.Upper > want*1.03 {
			t.Errorf("%s: floor upper %.12g, exact blanket bound %.12g", name, got.Upper, want)
		}
	}
}

// TestFloorEpsilon: eps at delta with a floor is certified and consistent
// with FloorDelta (the delta at the returned eps, plus the tolerance both
// are certified within, is at most the target, and 1% below the eps it
// exceeds it); more draws never raise it; the victim alone among no draws
// keeps eps0. (floorBoth, in make audit, adds honest others.)
func TestFloorEpsilon(t *testing.T) {
	m := accountant.KRR(20)
	const eps0, delta = 4.0, 1e-6
	prev := math.Inf(1)
	for _, floor := range []int{0, 1000, 30000} {
		r, err := accountant.FloorEpsilon(m, eps0, 1, floor, delta)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Tight || r.Upper > prev || r.Lower > r.Upper || r.Lower < r.Upper/(1+accountant.Tolerance)-1e-12 {
			t.Errorf("floor %d alone: %+v (previous upper %g)", floor, r, prev)
		}
		if r.Amplified {
			// Each bound is certified within Tolerance in eps of the
			// same exact value, so past that margin they agree.
			d, err := accountant.FloorDelta(m, eps0, 1, floor, r.Upper*(1+accountant.Tolerance))
			if err != nil || d.Upper > delta {
				t.Errorf("floor %d alone: delta at eps %g (1+Tolerance) is %g > %g (%v)", floor, r.Upper, d.Upper, delta, err)
			}
			d, err = accountant.FloorDelta(m, eps0, 1, floor, r.Upper*0.99)
			if err != nil || d.Lower <= delta {
				t.Errorf("floor %d alone: delta at 0.99 eps %g is only %g (lower), <= %g", floor, r.Upper, d.Lower, delta)
			}
		}
		prev = r.Upper
	}
	if prev >= eps0 {
		t.Errorf("30,000 draws: eps %g, not amplified", prev)
	}
	alone, err := accountant.FloorEpsilon(m, eps0, 1, 0, delta)
	if err != nil || alone.Amplified || alone.Upper != eps0 {
		t.Errorf("the victim alone: %+v, %v; want eps0 = %g", alone, err, eps0)
	}
}

// floorBoth: honest others and draws together beat either alone (k-RR,
// k = 20, eps0 = 4, delta = 1e-6, 10,000 of each; make audit).
func floorBoth(t *testing.T) {
	m := accountant.KRR(20)
	const eps0, delta = 4.0, 1e-6
	both, err := accountant.FloorEpsilon(m, eps0, 10000, 10000, delta)
	if err != nil {
		t.Fatal(err)
	}
	honest, err := accountant.Epsilon(m, eps0, 10000, delta)
	if err != nil {
		t.Fatal(err)
	}
	draws, err := accountant.FloorEpsilon(m, eps0, 1, 10000, delta)
	if err != nil {
		t.Fatal(err)
	}
	if !both.Tight || both.Upper >= honest.Upper || both.Upper >= draws.Upper {
		t.Errorf("10,000 honest and 10,000 draws: %+v; honest alone %g, draws alone %g", both, honest.Upper, draws.Upper)
	}
	t.Logf("k-RR k=20 eps0=4 delta=1e-6: 10,000 draws alone %.4f, 10,000 honest alone %.4f, both %.4f", draws.Upper, honest.Upper, both.Upper)
}

// TestFloorArguments: a floor query names its bad argument.
func TestFloorArguments(t *testing.T) {
	m := accountant.KRR(4)
	for _, c := range []struct {
		honest, floor int
		want          string
	}{{0, 10, "n must be >= 1"}, {10, -1, "floor must be in"}} {
		_, err := accountant.FloorDelta(m, 2, c.honest, c.floor, 0.5)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("honest %d floor %d: %v, want %q", c.honest, c.floor, err, c.want)
		}
	}
}

// krrAmongDrawsLosses returns the privacy loss distribution of k-RR's
// victim among K uniform draws (krrAmongDraws's view): the log-likelihood
// ratios ln P(a, b)/Q(a, b) and their probabilities under P.
func krrAmongDrawsLosses(k int, eps0 float64, K int) (loss, prob []float64) {
	kf := float64(k)
	lf := func(n int) float64 { v, _ := math.Lgamma(float64(n) + 1); return v }
	M := func(A, B int) float64 {
		C := K - A - B
		if A < 0 || B < 0 || C < 0 || (C > 0 && k == 2) {
			return 0
		}
		l := lf(K) - lf(A) - lf(B) - lf(C) + float64(A+B)*math.Log(1/kf)
		if C > 0 {
			l += float64(C) * math.Log((kf-2)/kf)
		}
		return math.Exp(l)
	}
	e0 := math.Exp(eps0)
	c := 1 / (e0 + kf - 1)
	for a := 0; a <= K+1; a++ {
		for b := 0; a+b <= K+1; b++ {
			ma, mb, m0 := M(a-1, b), M(a, b-1), M(a, b)
			p := e0*c*ma + c*mb + (kf-2)*c*m0
			q := c*ma + e0*c*mb + (kf-2)*c*m0
			if p > 0 {
				loss, prob = append(loss, math.Log(p/q)), append(prob, p)
			}
		}
	}
	return loss, prob
}

// TestFloorComposed: two rounds of k-RR's victim alone among m draws each
// (a Composition of Part{N: 1, Floor: m, Rounds: 2}) against the exact
// composition, delta(eps) = E_P[(1 - e^(eps - L1 - L2))_+] over every pair
// of the exact losses (the view of krrAmongDraws; symmetric, so one
// direction suffices): the composed upper bound holds it and is within
// HorizonTolerance in eps; with 40 honest others too the bound is below the
// floor alone's. One round agrees with FloorEpsilon.
func TestFloorComposed(t *testing.T) {
	const k, eps0, m, delta = 5, 2.0, 30, 1e-4
	loss, prob := krrAmongDrawsLosses(k, eps0, m)
	exact := func(eps float64) float64 {
		var d float64
		for i := range loss {
			for j := range loss {
				if v := -math.Expm1(eps - loss[i] - loss[j]); v > 0 {
					d += prob[i] * prob[j] * v
				}
			}
		}
		return d
	}
	c, err := accountant.NewComposition(accountant.Part{Mech: accountant.KRR(k), Eps0: eps0, N: 1, Floor: m, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if d := exact(r.Upper); d > delta*(1+1e-9) {
		t.Errorf("2 rounds: eps upper %.6g, but the exact composition has delta %.6g > %g there", r.Upper, d, delta)
	}
	if d := exact(r.Upper / (1 + accountant.HorizonTolerance)); d <= delta {
		t.Errorf("2 rounds: eps upper %.6g is not within %g of the exact (delta %.6g at eps/(1+tol))", r.Upper, accountant.HorizonTolerance, d)
	}
	if r.Lower <= 0 || r.Lower > r.Upper || exact(r.Lower*(1-1e-9)) < delta {
		t.Errorf("2 rounds: eps lower %.6g (upper %.6g) is not a lower bound: exact delta there %.6g", r.Lower, r.Upper, exact(r.Lower))
	}
	one, err := c.WithRounds(1)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := one.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	f1, err := accountant.FloorEpsilon(accountant.KRR(k), eps0, 1, m, delta)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r1.Upper-f1.Upper) > 0.02*f1.Upper {
		t.Errorf("1 round: composition %.6g, FloorEpsilon %.6g", r1.Upper, f1.Upper)
	}
	withOthers, err := accountant.NewComposition(accountant.Part{Mech: accountant.KRR(k), Eps0: eps0, N: 40, Floor: m, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	w, err := withOthers.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	if w.Upper >= r.Upper || w.Lower != 0 {
		t.Errorf("2 rounds with 40 honest reports and %d draws: %+v, want below the draws alone (%.6g) and no lower bound", m, w, r.Upper)
	}
	t.Logf("k=%d eps0=%g m=%d delta=%g, 2 rounds: alone [%.5f, %.5f], with 40 honest %.5f", k, eps0, m, delta, r.Lower, r.Upper, w.Upper)
}

// floorCalibrate checks calibration with a floor over the given rounds
// (make audit's TestFloorDeep; the CLI's plumbing is TestFloorFlag's): it
// returns the largest eps0 whose floor bound meets the target (FloorEpsilon
// there is at most the target, and 1% above eps0 it is not), larger than
// without the draws; over several rounds likewise through the
// composition. (With enough draws no local noise is needed at all: 2,000
// uniform draws alone keep a k-RR report at eps0 = 30, its value in
// clear, at eps 0.40 for 1e-6, and calibration returns the largest budget
// it accepts.)
func floorCalibrate(t *testing.T, roundsList ...int) {
	m := accountant.KRR(10)
	for _, rounds := range roundsList {
		tg := accountant.Target{Eps: 0.5, Delta: 1e-5, N: 400, Rounds: rounds, Floor: 80}
		c, err := accountant.Calibrate(m, tg)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := accountant.Calibrate(m, accountant.Target{Eps: 0.5, Delta: 1e-5, N: 400, Rounds: rounds})
		if err != nil {
			t.Fatal(err)
		}
		if c.Eps0 <= plain.Eps0 || c.Achieved.Upper > tg.Eps {
			t.Errorf("rounds %d: with the floor eps0 %g (achieved %+v), without %g", rounds, c.Eps0, c.Achieved, plain.Eps0)
		}
		if rounds == 1 {
			above, err := accountant.FloorEpsilon(m, c.Eps0*1.01, tg.N, tg.Floor, tg.Delta)
			if err != nil || above.Upper <= tg.Eps {
				t.Errorf("1%% above the calibrated eps0 %g the floor still meets the target: %+v, %v", c.Eps0, above, err)
			}
		}
		t.Logf("k-RR k=10, (0.5, 1e-5), n = 400, %d rounds: eps0 %.4f with 80 draws, %.4f without", rounds, c.Eps0, plain.Eps0)
	}
}

// TestFloorCalibrateErrors: a negative floor is refused by name.
func TestFloorCalibrateErrors(t *testing.T) {
	m := accountant.KRR(10)
	if _, err := accountant.Calibrate(m, accountant.Target{Eps: 0.5, Delta: 1e-6, N: 2000, Floor: -3}); err == nil || !strings.Contains(err.Error(), "floor") {
		t.Errorf("a negative floor: %v", err)
	}
}
