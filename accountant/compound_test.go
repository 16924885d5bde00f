package accountant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// enumerateDelta returns (1/n) E[(S_n)_+] for the atoms (z, w) by summing
// every vector of counts (c_j) with sum n, each with its multinomial
// probability n!/prod c_j! prod w_j^c_j (log-factorials from math.Lgamma),
// with Neumaier's compensated summation of the non-negative terms. It
// shares nothing with compound.go (no conditioning, no lattice).
func enumerateDelta(z, w []float64, n int) float64 {
	lw := make([]float64, len(w))
	for j, v := range w {
		lw[j] = math.Log(v)
	}
	lf := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	var sum, comp float64
	add := func(x float64) {
		t := sum + x
		if math.Abs(sum) >= math.Abs(x) {
			comp += (sum - t) + x
		} else {
			comp += (x - t) + sum
		}
		sum = t
	}
	last := len(z) - 1
	var rec func(j, left int, logp, s float64)
	rec = func(j, left int, logp, s float64) {
		if j == last {
			logp += float64(left)*lw[j] - lf(left)
			s += float64(left) * z[j]
			if s > 0 {
				add(math.Exp(lf(n)+logp) * s)
			}
			return
		}
		for c := 0; c <= left; c++ {
			rec(j+1, left-c, logp+float64(c)*lw[j]-lf(c), s+float64(c)*z[j])
		}
	}
	rec(0, n, 0, 0)
	return (sum + comp) / float64(n)
}

// compoundCase is a prepared set at one n where the compound path applies.
type compoundCase struct {
	name string
	p    prepared
	n    int
}

func compoundCases(t *testing.T) []compoundCase {
	var cases []compoundCase
	add := func(name string, p prepared, n int) {
		if compoundSplit(p, n) != nil {
			cases = append(cases, compoundCase{name, p, n})
		}
	}
	for _, eps0 := range []float64{8, 12, 16, 20} {
		d := hadamardAtoms(t, 8, eps0)
		for si, s := range d.Lower {
			for _, f := range []float64{0.2, 0.45, 0.7, 0.9, 0.97} {
				p := prepare(s, f*eps0)
				for _, n := range []int{2, 3, 7, 20} {
					add(fmt.Sprintf("hadamard eps0 %v set %d eps %.3g n %d", eps0, si, f*eps0, n), p, n)
				}
			}
		}
	}
	// Two rare draws of opposite signs nearly cancel, leaving one common
	// draw (k = 1) on both sides of 0.
	for _, n := range []int{3, 4} {
		p := prepared{z: []float64{-1, 2, 0.5, 100, -99}, w: []float64{0.3, 0.3, 0.34, 0.03, 0.03}, maxZ: 100}
		for j, z := range p.z {
			if z > 0 {
				p.exactOne += p.w[j] * z
			}
		}
		add(fmt.Sprintf("cancelling rare draws n %d", n), p, n)
	}
	// Random sets: two or three common atoms of values O(1-100), one or
	// two rare ones of values 1e2-1e7 times larger, of either sign; in half
	// of them every common value is negative and the first rare one
	// positive, so that only rare draws make the sum positive.
	rng := rand.New(rand.NewPCG(28, 6))
	for i := range 120 {
		n := []int{2, 4, 9, 16}[i%4]
		var p prepared
		common := 2 + rng.IntN(2)
		scale := math.Pow(10, 2*rng.Float64())
		cw := 0.0
		negative := i%2 == 1
		for range common {
			v := scale * (2*rng.Float64() - 1.2)
			if negative {
				v = -scale * (0.2 + rng.Float64())
			}
			p.z = append(p.z, v)
			w := 0.2 + rng.Float64()
			p.w = append(p.w, w)
			cw += w
		}
		rare := 1 + rng.IntN(2)
		pi := math.Pow(10, -1-3*rng.Float64()) / float64(n)
		for j := range rare {
			sign := 1.0
			if j == 1 || (!negative && rng.IntN(3) == 0) {
				sign = -1
			}
			p.z = append(p.z, sign*scale*math.Pow(10, 2+5*rng.Float64()))
			p.w = append(p.w, pi/float64(rare))
		}
		for j := range common {
			p.w[j] *= (1 - pi) / cw
		}
		p.maxZ = math.Inf(-1)
		for j, z := range p.z {
			p.maxZ = math.Max(p.maxZ, z)
			if z > 0 {
				p.exactOne += p.w[j] * z
			}
		}
		if p.maxZ > 0 {
			add(fmt.Sprintf("random %d n %d", i, n), p, n)
		}
	}
	return cases
}

// The compound bracket contains the enumerated value, and narrows to it.
func TestCompoundBracketsEnumeration(t *testing.T) {
	cases := compoundCases(t)
	if len(cases) < 250 {
		t.Fatalf("only %d cases take the compound path", len(cases))
	}
	positive, loose := 0, 0
	for _, c := range cases {
		ex := enumerateDelta(c.p.z, c.p.w, c.n)
		for _, hRel := range []float64{0.5, 1.0 / 64} {
			b, ok := compoundEval(c.p, c.n, hRel, true)
			if !ok {
				t.Fatalf("%s: the compound path declined", c.name)
			}
			slack := 1e-10*ex + 1e-300
			if b.lo > ex+slack || b.hi < ex-slack {
				t.Errorf("%s hRel %v: bracket [%.10g, %.10g] misses the enumerated %.10g", c.name, hRel, b.lo, b.hi, ex)
			}
			if hRel < 0.1 && ex > 1e-200 {
				// Near eps0 the inner lattice of a nearly point-mass common
				// law certifies less (hadamard eps0 20, eps 19.4, n 20:
				// +-7%); the sparse path takes such small n before it.
				if w := (b.hi - b.lo) / ex; w > 0.02 {
					loose++
					if w > 0.3 {
						t.Errorf("%s hRel %v: bracket [%.6g, %.6g] is loose around %.6g", c.name, hRel, b.lo, b.hi, ex)
					}
				}
			}
		}
		if ex > 1e-200 {
			positive++
		}
	}
	if positive < 200 || loose > len(cases)/20 {
		t.Errorf("of %d cases, %d have a positive delta and %d a bracket wider than 2%%", len(cases), positive, loose)
	}
}

// Where the lattice could not bound the lower side (hadamard:k=64 at eps0
// 20, n 1e5: both lower sets gave 0 after 10 s), the compound path certifies
// a lower bound, and it sits below the upper bound of the same set, which
// the lattice computes without it.
func TestCompoundLowerBelowLatticeUpper(t *testing.T) {
	d := hadamardAtoms(t, 64, 20)
	for _, n := range []int{1000, 100_000} {
		for i, s := range d.Lower {
			lo, ok, _ := epsLower(s, n, 1e-8, 20, nil)
			up, okUp := epsUpper(s, n, 1e-8, 20)
			if !ok || !okUp {
				t.Errorf("n %d set %d: lower %v (certified %v), upper %v (certified %v)", n, i, lo, ok, up, okUp)
			}
			if !(lo > 0) || lo > up || up > lo*(1+2*Tolerance) {
				t.Errorf("n %d set %d: lower %v, upper %v", n, i, lo, up)
			}
		}
	}
}

// leafChernoff bounds E[(C_k + t)_+] from above, and with the values
// negated E[(-(C_k + t))_+], against enumeration.
func TestLeafChernoffAboveEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 1))
	checked := 0
	for i := range 300 {
		a := 2 + rng.IntN(2)
		z := make([]float64, a)
		neg := make([]float64, a)
		w := make([]float64, a)
		tot := 0.0
		for j := range z {
			z[j] = 10 * (2*rng.Float64() - 1)
			neg[j] = -z[j]
			w[j] = 0.1 + rng.Float64()
			tot += w[j]
		}
		for j := range w {
			w[j] /= tot
		}
		k := 1 + rng.IntN(30)
		var mean float64
		for j := range z {
			mean += w[j] * z[j]
		}
		// t puts the mean of C_k + t from -6 to +6 spreads of 10 sqrt(k).
		tt := -float64(k)*mean + 10*math.Sqrt(float64(k))*(12*rng.Float64()-6)
		// E[(C_k + tt)_+] = k E[(S_k)_+]/k with S_k of the shifted atoms.
		zs := make([]float64, a)
		zn := make([]float64, a)
		for j := range z {
			zs[j] = z[j] + tt/float64(k)
			zn[j] = -zs[j]
		}
		up := float64(k) * enumerateDelta(zs, w, k)
		down := float64(k) * enumerateDelta(zn, w, k)
		if up == 0 || down == 0 {
			continue // C_k + t on one side of 0: compoundLeaf's exact cases
		}
		eta := float64(a+4) * ulp
		logw := make([]float64, a)
		maxAbs := 0.0
		for j := range w {
			logw[j] = math.Log(w[j])
			maxAbs = math.Max(maxAbs, math.Abs(z[j]))
		}
		if cb := leafChernoff(z, logw, maxAbs, eta, tt, k); cb < up*(1-1e-12) {
			t.Errorf("case %d: Chernoff %v below E[(C+t)_+] = %v", i, cb, up)
		} else if !math.IsInf(cb, 1) {
			checked++
		}
		if cb := leafChernoff(neg, logw, maxAbs, eta, -tt, k); cb < down*(1-1e-12) {
			t.Errorf("case %d: Chernoff %v below E[(-(C+t))_+] = %v", i, cb, down)
		} else if !math.IsInf(cb, 1) {
			checked++
		}
	}
	if checked < 60 {
		t.Errorf("only %d finite bounds checked", checked)
	}
}

// A laplace upper set at eps0 = 20 and eps 19 has about ninety rare atoms
// (everything but the residual at 0) at n = 1e3: 10^8 count vectors at
// five rare draws. The path declines rather than enumerate them (it ran
// for minutes before compoundMaxLeaves).
func TestCompoundDeclinesManyLeaves(t *testing.T) {
	d, err := Decompose(laplace.Declaration(20, laplace.Bins))
	if err != nil {
		t.Fatal(err)
	}
	p := prepare(d.Upper[0], 19)
	if r := compoundSplit(p, 1000); len(r) < 50 {
		t.Fatalf("split of %d rare atoms; the case needs many", len(r))
	}
	if b, ok := compoundEval(p, 1000, hRelStart, true); ok {
		t.Fatalf("compound path took %d rare atoms: %+v", len(compoundSplit(p, 1000)), b)
	}
}
