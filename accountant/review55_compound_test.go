package accountant

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// Second review of the compound path (compound.go) and the pruning of
// dominated lower sets (dominated.go).

const r55Prec = 320

// r55BigDelta returns (1/n) E[(S_n)_+] for atoms (z, w), the masses
// normalised by their sum, every sum and product in 320-bit floats (the
// values and masses are taken as exact): the value compoundEval models.
func r55BigDelta(z, w []float64, n int) *big.Float {
	nb := func(x float64) *big.Float { return new(big.Float).SetPrec(r55Prec).SetFloat64(x) }
	tot := nb(0)
	for _, v := range w {
		tot.Add(tot, nb(v))
	}
	a := len(z)
	pow := make([][]*big.Float, a)
	for j := range w {
		wj := new(big.Float).SetPrec(r55Prec).Quo(nb(w[j]), tot)
		pow[j] = make([]*big.Float, n+1)
		pow[j][0] = nb(1)
		for c := 1; c <= n; c++ {
			pow[j][c] = new(big.Float).SetPrec(r55Prec).Mul(pow[j][c-1], wj)
		}
	}
	fact := make([]*big.Int, n+1)
	fact[0] = big.NewInt(1)
	for i := 1; i <= n; i++ {
		fact[i] = new(big.Int).Mul(fact[i-1], big.NewInt(int64(i)))
	}
	sum := nb(0)
	counts := make([]int, a)
	var rec func(j, left int)
	rec = func(j, left int) {
		if j == a-1 {
			counts[j] = left
			s := nb(0)
			for i, c := range counts {
				s.Add(s, new(big.Float).SetPrec(r55Prec).Mul(nb(float64(c)), nb(z[i])))
			}
			if s.Sign() <= 0 {
				return
			}
			den := big.NewInt(1)
			for _, c := range counts {
				den.Mul(den, fact[c])
			}
			coef := new(big.Float).SetPrec(r55Prec).SetInt(new(big.Int).Quo(fact[n], den))
			for i, c := range counts {
				coef.Mul(coef, pow[i][c])
			}
			sum.Add(sum, coef.Mul(coef, s))
			return
		}
		for c := 0; c <= left; c++ {
			counts[j] = c
			rec(j+1, left-c)
		}
	}
	rec(0, n)
	return sum.Quo(sum, nb(float64(n)))
}

// r55Check reports whether [lo, hi] contains the exact x (no slack).
func r55Contains(b bracket, x *big.Float) (loOK, hiOK bool) {
	if math.IsNaN(b.lo) || math.IsNaN(b.hi) || b.lo < 0 {
		return false, false
	}
	lo := new(big.Float).SetPrec(r55Prec).SetFloat64(b.lo)
	loOK = lo.Cmp(x) <= 0
	if math.IsInf(b.hi, 1) {
		return loOK, true
	}
	hi := new(big.Float).SetPrec(r55Prec).SetFloat64(b.hi)
	return loOK, hi.Cmp(x) >= 0
}

func r55Prepared(z, w []float64) prepared {
	p := prepared{z: z, w: w, maxZ: math.Inf(-1)}
	for j, v := range z {
		p.maxZ = math.Max(p.maxZ, v)
		if v > 0 {
			p.exactOne += w[j] * v
		}
	}
	return p
}

type r55Case struct {
	name string
	p    prepared
	n    int
}

// r55Cases builds adversarial sets where a split qualifies: sums that land
// exactly on 0 at a leaf (the 0 and linear shortcuts' boundaries), rare
// draws that cancel, values up to e^30 (the largest a validated set has at
// eps0 = 30) and as small as 1e-300, very unequal rare masses, one common
// atom, k = 1 leaves, and masses that do not sum to 1 in floating point.
func r55Cases(seed uint64, count int) []r55Case {
	var out []r55Case
	add := func(name string, z, w []float64, n int) {
		for _, v := range w {
			if !(v > 0) {
				return
			}
		}
		p := r55Prepared(z, w)
		if p.maxZ > 0 && compoundSplit(p, n) != nil {
			out = append(out, r55Case{name, p, n})
		}
	}
	// Exact boundaries: rare 8, common -1 (and -1, 0.5): at n = 9, m = 1
	// gives t + k max = 8 - 8 = 0; at m = 2, t + k min = 16 - 7 > 0.
	for _, n := range []int{2, 3, 8, 9, 10, 17} {
		add(fmt.Sprintf("edge8 n %d", n), []float64{-1, 8}, []float64{1 - 0.5/float64(n), 0.5 / float64(n)}, n)
		add(fmt.Sprintf("edge8b n %d", n), []float64{-1, 0.125, 8}, []float64{0.6, 0.4 - 0.9/float64(n), 0.9 / float64(n)}, n)
		add(fmt.Sprintf("edge-neg n %d", n), []float64{1, -8, 0.25}, []float64{0.3, 0.7 / float64(n), 0.7 - 0.7/float64(n)}, n)
		// Scaled by 1e-300 and e^30.
		for _, sc := range []float64{1e-300, math.Exp(30), 3e-17} {
			add(fmt.Sprintf("edge8 scale %g n %d", sc, n), []float64{-sc, 8 * sc, 0.5 * sc}, []float64{0.5, 0.3 / float64(n), 0.5 - 0.3/float64(n)}, n)
		}
		// Cancelling rare draws: t = 1e13 - (1e13 - 1) = 1.
		add(fmt.Sprintf("cancel n %d", n), []float64{-2, 1.5, 1e13, -(1e13 - 1)}, []float64{0.5, 0.5 - 0.8/float64(n), 0.4 / float64(n), 0.4 / float64(n)}, n)
		// Very unequal rare masses.
		add(fmt.Sprintf("unequal n %d", n), []float64{-1, 0.3, 50, 1e6}, []float64{0.5, 0.5 - 0.5/float64(n), 0.5 / float64(n) * (1 - 1e-12), 0.5 / float64(n) * 1e-12}, n)
		// Masses summing to more than 1 in floating point.
		add(fmt.Sprintf("heavy n %d", n), []float64{-1, 0.7, 9}, []float64{0.5, 0.5, 0.25 / float64(n)}, n)
	}
	rng := rand.New(rand.NewPCG(seed, 55))
	for i := range count {
		n := 2 + rng.IntN(9)
		common := 1 + rng.IntN(3)
		rare := 1 + rng.IntN(3)
		scale := math.Pow(10, -3+6*rng.Float64())
		if i%7 == 0 {
			scale = math.Exp(30) / 1e4
		}
		var z, w []float64
		for j := range common {
			var v float64
			switch rng.IntN(4) {
			case 0: // integers, so that leaves land on 0
				v = float64(rng.IntN(5) - 3)
			case 1:
				v = -(0.1 + rng.Float64())
			default:
				v = 2*rng.Float64() - 1.3
			}
			if j == 0 && v == 0 {
				v = -1
			}
			z = append(z, scale*v)
			w = append(w, 0.05+rng.Float64())
		}
		cw := 0.0
		for _, v := range w {
			cw += v
		}
		pi := math.Pow(10, -2*rng.Float64()) / float64(n)
		var rw []float64
		rt := 0.0
		for range rare {
			v := math.Pow(10, -8*rng.Float64()*float64(rng.IntN(2)))
			rw = append(rw, v)
			rt += v
		}
		for j := range rare {
			var v float64
			switch rng.IntN(3) {
			case 0: // integer multiples, exact cancellations
				v = float64(8*(1+rng.IntN(4))) * float64(1-2*rng.IntN(2))
			case 1:
				v = (8 + 40*rng.Float64()) * float64(1-2*rng.IntN(2))
			default:
				v = math.Pow(10, 1+4*rng.Float64()) * float64(1-2*rng.IntN(2))
			}
			z = append(z, scale*v*3)
			w = append(w, pi*rw[j]/rt)
		}
		for j := range common {
			w[j] *= (1 - pi) / cw
		}
		add(fmt.Sprintf("random %d n %d", i, n), z, w, n)
	}
	return out
}

// The compound bracket contains the exact value (320-bit enumeration), with
// no slack, on the adversarial sets.
func TestReview55CompoundContainsExact(t *testing.T) {
	cases := r55Cases(1, 300)
	if len(cases) < 150 {
		t.Fatalf("only %d cases split", len(cases))
	}
	for _, c := range cases {
		ex := r55BigDelta(c.p.z, c.p.w, c.n)
		for _, hRel := range []float64{0.5, 1.0 / 64} {
			for _, wantLo := range []bool{true, false} {
				b, ok := compoundEval(c.p, c.n, hRel, wantLo)
				if !ok {
					continue
				}
				loOK, hiOK := r55Contains(b, ex)
				if !loOK || (!hiOK && b.hi > DeltaFloor) {
					exf, _ := ex.Float64()
					t.Errorf("%s (z %v w %v) hRel %v wantLo %v: [%.17g, %.17g] misses %.17g", c.name, c.p.z, c.p.w, hRel, wantLo, b.lo, b.hi, exf)
				} else if !hiOK {
					exf, _ := ex.Float64()
					t.Errorf("%s: hi at DeltaFloor %.3g below the exact %.17g", c.name, b.hi, exf)
				}
			}
		}
	}
}

// Each leaf bracket of F(k, t) = E[(C_k + t)_+] contains its exact value,
// including t far beyond the common values (1e17 and more) and t exactly
// at the 0 and linear boundaries.
func TestReview55CompoundLeaf(t *testing.T) {
	nb := func(x float64) *big.Float { return new(big.Float).SetPrec(r55Prec).SetFloat64(x) }
	laws := [][2][]float64{
		{{-1, 0.5, 2}, {0.5, 0.3, 0.2}},
		{{-1, 1}, {0.5, 0.5}},
		{{-3, -1}, {0.25, 0.75}},
		{{-1}, {1}},
		{{1e-300, -2e-300}, {0.4, 0.6}},
	}
	for li, l := range laws {
		var law compoundLaw
		z, w := l[0], l[1]
		law.maxZ, law.minZ = math.Inf(-1), math.Inf(1)
		var absMean float64
		a := len(z) + 1
		law.eta = float64(a+4) * ulp
		for j := range z {
			law.z = append(law.z, z[j])
			law.neg = append(law.neg, -z[j])
			law.w = append(law.w, w[j])
			law.maxZ = math.Max(law.maxZ, z[j])
			law.minZ = math.Min(law.minZ, z[j])
			law.mean += w[j] * z[j]
			absMean += w[j] * math.Abs(z[j])
			if z[j] > 0 {
				law.plus += w[j] * z[j]
			}
		}
		law.meanErr = 1.01 * (law.eta + float64(a+2)*ulp) * absMean
		for _, k := range []int{0, 1, 2, 3, 5, 8} {
			for _, t0 := range []float64{-1e17, -3e16, -8, -5, -3, -2.5, -1, -1e-300, 0, 1e-300, 0.5, 1, 3, 8, 1e17, 1e300} {
				inner, capped := 0, false
				b, ok := compoundLeaf(&law, []float64{t0}, []int{1}, k, 0.5, true, &inner, &capped)
				if !ok {
					continue
				}
				// Exact by enumeration of the k draws.
				ex := nb(0)
				counts := make([]int, len(z))
				fact := func(m int) *big.Int { return new(big.Int).MulRange(1, int64(max(m, 1))) }
				var rec func(j, left int)
				rec = func(j, left int) {
					if j == len(z)-1 {
						counts[j] = left
						s := nb(t0)
						for i, c := range counts {
							s.Add(s, new(big.Float).SetPrec(r55Prec).Mul(nb(float64(c)), nb(z[i])))
						}
						if s.Sign() <= 0 {
							return
						}
						den := big.NewInt(1)
						for _, c := range counts {
							den.Mul(den, fact(c))
						}
						coef := new(big.Float).SetPrec(r55Prec).SetInt(new(big.Int).Quo(fact(k), den))
						for i, c := range counts {
							for range c {
								coef.Mul(coef, nb(w[i]))
							}
						}
						ex.Add(ex, coef.Mul(coef, s))
						return
					}
					for c := 0; c <= left; c++ {
						counts[j] = c
						rec(j+1, left-c)
					}
				}
				rec(0, k)
				loOK, hiOK := r55Contains(b, ex)
				if !loOK || !hiOK {
					exf, _ := ex.Float64()
					t.Errorf("law %d k %d t %g: [%.17g, %.17g] misses %.17g", li, k, t0, b.lo, b.hi, exf)
				}
			}
		}
	}
}

// The compound bracket and the lattice's overlap (both contain the exact
// value) at large n on real decompositions, and the lower side's eps
// search stays below the upper side's.
func TestReview55CompoundAgainstLattice(t *testing.T) {
	type cse struct {
		d   *Decomposition
		tag string
	}
	var cs []cse
	for _, e0 := range []float64{12, 20} {
		cs = append(cs, cse{hadamardAtoms(t, 8, e0), fmt.Sprint("hadamard8 ", e0)})
	}
	checked := 0
	for _, c := range cs {
		for si, s := range c.d.Lower {
			for _, n := range []int{1000, 100_000} {
				for _, f := range []float64{0.3, 0.6} {
					eps := f * c.d.LocalEps
					p := prepare(s, eps)
					if p.maxZ <= 0 || compoundSplit(p, n) == nil {
						continue
					}
					b, ok := compoundEval(p, n, 0.25, true)
					if !ok {
						continue
					}
					l := evaluate(s, n, eps, 0.25, true)
					checked++
					if b.lo > l.hi || l.lo > b.hi || b.lo > b.hi {
						t.Errorf("%s set %d n %d eps %v: compound [%.10g, %.10g], lattice [%.10g, %.10g]", c.tag, si, n, eps, b.lo, b.hi, l.lo, l.hi)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no set took the compound path")
	}
}

// evaluate's and evaluateCompound's memo keys cannot collide: a key of
// evaluate has 25 + 24 a bytes, one of evaluateCompound 26 + 24 b, and
// 25 + 24 a = 26 + 24 b has no integer solution.
func TestReview55MemoKeysApart(t *testing.T) {
	for a := range 40 {
		s := make(AtomSet, a)
		for i := range s {
			s[i] = Atom{R: 0.01, P: 0.01, Q: 0.01}
		}
		k := memoKey(s, 7, 1, 0.5, true)
		if len(k) != 25+24*a {
			t.Fatalf("memoKey of %d atoms has %d bytes", a, len(k))
		}
		if (len(k)+1-25)%24 == 0 {
			t.Fatalf("a compound key of %d atoms has the length of an evaluate key", a)
		}
	}
}

// r55IntegerOracle returns (1/n) E[(S_n)_+] for integer-valued atoms by
// conditioning on the rare draws (as compound.go does) and computing the
// k-fold law of the common atoms by direct convolution (float64, every
// term non-negative: relative error about k a u).
func r55IntegerOracle(z, w []float64, rare []int, n, mTop int) float64 {
	isRare := make([]bool, len(z))
	for _, j := range rare {
		isRare[j] = true
	}
	var cz, cw, rz, rw []float64
	var cs, ps float64
	for j := range z {
		if isRare[j] {
			rz, rw = append(rz, z[j]), append(rw, w[j])
			ps += w[j]
		} else {
			cz, cw = append(cz, z[j]), append(cw, w[j])
			cs += w[j]
		}
	}
	for j := range cw {
		cw[j] /= cs
	}
	for j := range rw {
		rw[j] /= ps
	}
	pi := ps / (ps + cs)
	lo, hi := 0, 0
	for _, v := range cz {
		lo, hi = min(lo, int(v)), max(hi, int(v))
	}
	// pmf[k] over [k lo, k hi].
	keep := map[int][]float64{}
	cur := []float64{1}
	for k := 0; k <= n; k++ {
		if k >= n-mTop {
			keep[k] = cur
		}
		if k == n {
			break
		}
		next := make([]float64, len(cur)+hi-lo)
		for i, p := range cur {
			if p == 0 {
				continue
			}
			for j, v := range cz {
				next[i+int(v)-lo] += p * cw[j]
			}
		}
		cur = next
	}
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	total := 0.0
	counts := make([]int, len(rz))
	for m := 0; m <= min(n, mTop); m++ {
		k := n - m
		lpm := lg(n) - lg(m) - lg(k) + float64(m)*math.Log(pi) + float64(k)*math.Log1p(-pi)
		pmf := keep[k]
		var rec func(i, left int)
		rec = func(i, left int) {
			if i == len(rz)-1 {
				counts[i] = left
				lp := lg(m)
				t := 0.0
				for j, c := range counts {
					lp += float64(c)*math.Log(rw[j]) - lg(c)
					t += float64(c) * rz[j]
				}
				f := 0.0
				for s, p := range pmf {
					if x := float64(s+k*lo) + t; x > 0 {
						f += p * x
					}
				}
				total += math.Exp(lpm+lp) * f
				return
			}
			for c := 0; c <= left; c++ {
				counts[i] = c
				rec(i+1, left-c)
			}
		}
		rec(0, m)
	}
	return total / float64(n)
}

// The light version of TestReview55AuditCompoundIntegerOracle: moderate
// n, five common atoms (the inner evaluations go to the lattice).
func TestReview55CompoundIntegerOracle(t *testing.T) {
	z := []float64{-3, -1, 0, 1, 2, 40}
	base := []float64{0.2, 0.25, 0.15, 0.25, 0.15}
	checked := 0
	for _, n := range []int{40, 300} {
		for _, mean := range []float64{0.05, 0.9} {
			pi := mean / float64(n)
			w := []float64{}
			for _, v := range base {
				w = append(w, v*(1-pi))
			}
			w = append(w, pi)
			p := r55Prepared(z, w)
			rare := compoundSplit(p, n)
			if rare == nil {
				t.Fatalf("n %d: no split", n)
			}
			ex := r55IntegerOracle(z, w, rare, n, 40)
			b, ok := compoundEval(p, n, 0.25, true)
			if !ok {
				continue
			}
			checked++
			if b.lo > ex*(1+1e-10) || b.hi < ex*(1-1e-10) {
				t.Errorf("n %d mean %v: [%.15g, %.15g] misses %.15g", n, mean, b.lo, b.hi, ex)
			}
		}
	}
	if checked == 0 {
		t.Fatal("the compound path declined every case")
	}
}
