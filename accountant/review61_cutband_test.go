package accountant

// Review of cf354c8 (the sparse path's relative cut), second engineer.
//
// These tests check sparse_cut.go's claims independently of the code's own
// derivation: exact log masses from math.Lgamma (not logFactorials), exact
// signs of the leaves' sums (math/big where the float value is near zero),
// and an E handed to cutBand with adversarial noise up to the 0.01 the
// proof allows (E_m), a d perturbed by far more than its rounding (which
// may move pairMode by one), any guess g for firstCountingNear, roots of
// the pair's sum on either side of the mode (cutBand's f > cs + 2 branch),
// left = 0, 1, 2, modes at the ends and exact ties (x an integer).

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// r61LG is log k! by math.Lgamma.
func r61LG(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }

// r61Pair is a pair sum's data with its exact (test-side) quantities.
type r61Pair struct {
	left       int
	lx, ly, lm float64
	s          dd
	zx, zy     float64
}

// exactE is the leaf's log mass from Lgamma (lx, ly taken as exact).
func (p *r61Pair) exactE(c int) float64 {
	return p.lm + float64(c)*p.lx + float64(p.left-c)*p.ly - r61LG(c) - r61LG(p.left-c)
}

// trueSum returns the sign of s + c zx + (left - c) zy, exactly, and an
// approximation of its value.
func (p *r61Pair) trueSum(c int) (sign int, v float64) {
	a := float64(c) * p.zx
	b := float64(p.left-c) * p.zy
	v = p.s.hi + p.s.lo + a + b
	mag := math.Abs(p.s.hi) + math.Abs(a) + math.Abs(b)
	if math.Abs(v) > 1e-9*mag {
		if v > 0 {
			return 1, v
		}
		return -1, v
	}
	const prec = 600
	t := new(big.Float).SetPrec(prec).SetFloat64(p.s.hi)
	t.Add(t, new(big.Float).SetPrec(prec).SetFloat64(p.s.lo))
	x := new(big.Float).SetPrec(prec).SetFloat64(p.zx)
	x.Mul(x, new(big.Float).SetPrec(prec).SetInt64(int64(c)))
	y := new(big.Float).SetPrec(prec).SetFloat64(p.zy)
	y.Mul(y, new(big.Float).SetPrec(prec).SetInt64(int64(p.left-c)))
	t.Add(t, x)
	t.Add(t, y)
	v, _ = t.Float64()
	return t.Sign(), v
}

// r61RandPair draws an adversarial pair; the root of its sum is put at
// target (a real position; <0: every leaf positive; >left: none).
func r61RandPair(r *rand.Rand, i int) (r61Pair, int) {
	var p r61Pair
	switch i % 8 {
	case 0:
		p.left = r.IntN(4) // 0, 1, 2, 3
	case 1, 2:
		p.left = r.IntN(60)
	case 3, 4, 5:
		p.left = r.IntN(600)
	default:
		p.left = r.IntN(5000)
	}
	// Log masses: complementary, extreme gaps, equal, or an exact tie of
	// two consecutive leaves (x = k an integer).
	switch r.IntN(6) {
	case 0, 1:
		px := r.Float64()
		p.lx, p.ly = math.Log(px), math.Log1p(-px)
	case 2:
		p.lx, p.ly = -r.Float64(), -760*r.Float64()
	case 3:
		p.lx = -30 * r.Float64()
		p.ly = p.lx
	default:
		if p.left >= 1 {
			k := r.IntN(p.left)
			// e^d = (k + 1)/(left - k): V(k) = V(k+1).
			p.ly = -5 * r.Float64()
			p.lx = p.ly + math.Log(float64(k+1)/float64(p.left-k))
		} else {
			p.lx, p.ly = -1, -2
		}
	}
	if r.IntN(2) == 0 {
		p.lx, p.ly = p.ly, p.lx
	}
	p.lm = -200 * r.Float64()
	// Values, zx >= zy; dyadic half the time, so that sums hit 0 exactly.
	if r.IntN(2) == 0 {
		p.zx = float64(r.IntN(64)-16) / 8
		p.zy = p.zx - float64(r.IntN(24))/8
	} else {
		p.zx = 4*r.Float64() - 1
		p.zy = p.zx - 3*r.Float64()
		if r.IntN(6) == 0 {
			p.zy = p.zx
		}
	}
	cs := pairMode(p.left, p.lx-p.ly)
	var target float64
	switch r.IntN(7) {
	case 0:
		target = -1
	case 1:
		target = float64(p.left) + 2
	case 2:
		target = float64(cs + 3 + r.IntN(40)) // right of the core
	case 3:
		target = float64(cs - 3 - r.IntN(10))
	case 4:
		target = float64(cs + r.IntN(5) - 2)
	default:
		target = float64(p.left+1) * r.Float64()
	}
	if r.IntN(3) == 0 {
		target = math.Floor(target) // exact zero at a leaf (dyadic case)
	} else {
		target += 0.5 * (r.Float64() - 0.5)
	}
	B := p.zx - p.zy
	if B == 0 {
		v := 1.0
		if r.IntN(2) == 0 {
			v = -1
		}
		p.s = dd{hi: v - float64(p.left)*p.zy}
	} else {
		p.s = dd{hi: -float64(p.left)*p.zy - target*B}
	}
	if r.IntN(3) == 0 {
		p.s.lo = math.Abs(p.s.hi) * 0x1p-54 * (2*r.Float64() - 1)
		p.s.hi, p.s.lo = twoSum(p.s.hi, p.s.lo)
	}
	return p, cs
}

// TestReview61CutBandClaim: every leaf cutBand neither walks nor bounds
// has a true sum <= 0, and every leaf it bounds that has a positive true
// sum has exact log mass below thr + 0.01; their number is at most the
// nd it adds (the bound's count). E carries noise up to (just under)
// 0.01 in several adversarial patterns, d a perturbation up to 1e-12
// relative, g any guess.
func TestReview61CutBandClaim(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 1))
	const amp = 0.01 * (1 - 1e-6)
	var maxExcess = math.Inf(-1)
	branches := map[string]int{}
	for i := range 20000 {
		p, cs := r61RandPair(r, i)
		left := p.left
		e0 := make([]float64, left+1)
		for c := range e0 {
			e0[c] = p.exactE(c)
		}
		// True first positive leaf (sums rise with c).
		f := left + 1
		for c := 0; c <= left; c++ {
			if sg, _ := p.trueSum(c); sg > 0 {
				f = c
				break
			}
		}
		noiseMode := r.IntN(7)
		seed := r.Uint64()
		noise := func(c int) float64 {
			h := (uint64(c)+1)*0x9e3779b97f4a7c15 ^ seed
			h ^= h >> 29
			h *= 0xbf58476d1ce4e5b9
			h ^= h >> 32
			u := float64(h>>11)/(1<<53)*2 - 1
			switch noiseMode {
			case 0:
				return 0
			case 1:
				return amp * u
			case 2:
				if c >= cs-3 && c <= cs+3 {
					return -amp
				}
				return amp
			case 3:
				if c%2 == 0 {
					return amp
				}
				return -amp
			case 4:
				return -amp
			case 5:
				return amp
			}
			if c >= f-1 && c <= f+1 {
				return -amp
			}
			return amp
		}
		E := func(c int) float64 { return e0[c] + noise(c) }
		d := p.lx - p.ly
		if r.IntN(2) == 0 {
			d *= 1 + 1e-12*(2*r.Float64()-1)
		}
		// The threshold, around a chosen leaf.
		refs := []int{cs, cs - 1, cs + 1, cs - 2, cs + 2, cs - 3, cs + 3, f, f - 1, f + 1, r.IntN(left + 1)}
		ref := min(max(refs[r.IntN(len(refs))], 0), left)
		deltas := []float64{0, 0.005, -0.005, 0.0101, -0.0101, 0.02, -0.02, 0.021, -0.021, 0.03, -50 * r.Float64(), r.Float64()}
		thr := e0[ref] + deltas[r.IntN(len(deltas))]
		// A guess, good or bad.
		var g int
		switch r.IntN(4) {
		case 0:
			g = pairRoot(p.s, left, p.zx, p.zy)
		case 1:
			g = r.IntN(left+3) - 1
		case 2:
			g = f
		default:
			g = f + r.IntN(3) - 1
		}
		var b bandSum
		switch r.IntN(3) {
		case 1:
			b.eps = 1e-20 * (math.Abs(p.s.hi) + float64(left)*math.Abs(p.zx))
		case 2:
			b.eps = 1e-12 * (math.Abs(p.s.hi) + float64(left)*math.Abs(p.zx))
		}
		b.cutOn, b.cut, b.cutExp = true, 0, 1
		sc := func(c int) dd { return p.s.addProd(float64(c), p.zx).addProd(float64(left-c), p.zy) }
		cl, cr, ok := cutBand(E, sc, &b, left, g, d, thr)
		nd := int(math.Round(b.drop.sum * float64(left+1)))
		switch {
		case !ok && nd == left+1:
			branches["whole"]++
		case !ok:
			branches["none walked"]++
		case f > cs+2:
			branches["f right of core"]++
		default:
			branches["band"]++
		}
		if ok && !(0 <= cl && cl <= cr && cr <= left) {
			t.Fatalf("case %d: band [%d, %d] of left %d", i, cl, cr, left)
		}
		outPos := 0
		for c := 0; c <= left; c++ {
			if ok && c >= cl && c <= cr {
				continue
			}
			if sg, _ := p.trueSum(c); sg <= 0 {
				continue
			}
			outPos++
			ex := e0[c] - thr
			maxExcess = math.Max(maxExcess, ex)
			if !(ex < 0.01+1e-9) {
				t.Fatalf("case %d: left %d lx %v ly %v d %v s %+v zx %v zy %v thr %v (ref %d) noise %d g %d: leaf %d (cs %d, f %d) outside [%d, %d] ok %v has E* - thr = %v",
					i, left, p.lx, p.ly, d, p.s, p.zx, p.zy, thr, ref, noiseMode, g, c, cs, f, cl, cr, ok, ex)
			}
		}
		if outPos > nd {
			t.Fatalf("case %d: %d positive leaves not walked, %d bounded", i, outPos, nd)
		}
	}
	t.Logf("branches %v; largest E* - thr over bounded positive leaves %.6f", branches, maxExcess)
	if branches["f right of core"] < 300 || branches["whole"] < 300 || branches["band"] < 1000 {
		t.Fatalf("branches too thin: %v", branches)
	}
}

// TestReview61PairModeWithinOne: the exact argmax of E* (Lgamma, d exact)
// is within one leaf of pairMode at a d perturbed by 1e-12 relative, for
// ties, extreme gaps and the ends.
func TestReview61PairModeWithinOne(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 2))
	for i := range 20000 {
		p, _ := r61RandPair(r, i)
		if p.left > 1500 {
			p.left = r.IntN(1500)
		}
		best, arg := math.Inf(-1), -1
		for c := 0; c <= p.left; c++ {
			if e := p.exactE(c); e > best {
				best, arg = e, c
			}
		}
		// Ties within Lgamma's rounding: any of them is an argmax.
		d := (p.lx - p.ly) * (1 + 1e-12*(2*r.Float64()-1))
		cs := pairMode(p.left, d)
		okc := false
		for c := max(cs-1, 0); c <= min(cs+1, p.left); c++ {
			if p.exactE(c) >= best-1e-9*(1+math.Abs(best)) {
				okc = true
			}
		}
		if !okc {
			t.Fatalf("case %d: left %d lx %v ly %v: argmax %d, pairMode %d", i, p.left, p.lx, p.ly, arg, cs)
		}
	}
}

// TestReview61PairWalkCut runs the whole pair sum (cutThreshold, cutBand,
// the walk) at budgets that put thr anywhere from far below the peak to
// above it, and checks against Lgamma masses and exact signs: the upper
// sum plus the bound covers the pair's exact sum, the lower sum stays
// below it, and X bounds the largest true sum (thr + 0.01 + log((left+1)
// max s) <= cut - 0.01 up to rounding).
func TestReview61PairWalkCut(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 3))
	var w pairWalk
	lf := logFactorials(10_000)
	dropped, heavy := 0, 0
	for i := range 15000 {
		p, _ := r61RandPair(r, i)
		left := p.left
		// Exact pair sum in the log domain, and the largest true sum.
		var acc r61LogAcc
		maxS := 0.0
		peak := math.Inf(-1)
		for c := 0; c <= left; c++ {
			peak = math.Max(peak, p.exactE(c))
			if sg, v := p.trueSum(c); sg > 0 {
				acc.add(p.exactE(c) + math.Log(v))
				maxS = math.Max(maxS, v)
			}
		}
		want := acc.value()
		var b bandSum
		b.eps = 1e-25 * (math.Abs(p.s.hi) + float64(left)*math.Abs(p.zx))
		b.rel = 0
		b.cutOn = true
		// thr = cut - log((left+1) X) - 0.02 lands near peak + delta.
		xs := math.Max(maxS, 1e-300)
		b.cut = peak + (60*r.Float64() - 50) + math.Log(float64(left+1)*xs)
		if r.IntN(4) == 0 {
			b.cut = peak + (0.1*r.Float64() - 0.05) + math.Log(float64(left+1)*xs)
		}
		b.cutExp = math.Exp(b.cut)
		if b.cut < -650 {
			continue
		}
		thr, on := b.cutThreshold(p.s, left, p.zx)
		if on && maxS > 0 {
			if gap := b.cut - (thr + 0.01 + math.Log(float64(left+1)*maxS)); !(gap >= 0.01-1e-9) {
				t.Fatalf("case %d: X does not bound the largest true sum: gap %v", i, gap)
			}
		}
		w.sum(p.lm, 0, left, p.s, p.zx, p.zy, p.lx, p.ly, lf, &b)
		if b.drop.sum > 0 {
			dropped++
			if b.drop.sum > 1e-3*b.hi.sum {
				heavy++
			}
		}
		tol := 3e-10*want + 1e-300
		if !(b.hi.sum+b.drop.sum >= want-tol) || !(b.lo.sum <= want+tol) {
			t.Fatalf("case %d: left %d lx %v ly %v lm %v s %+v zx %v zy %v cut %v thr %v: hi %.17g + drop %.6g, lo %.17g, exact %.17g",
				i, left, p.lx, p.ly, p.lm, p.s, p.zx, p.zy, b.cut, thr, b.hi.sum, b.drop.sum, b.lo.sum, want)
		}
	}
	t.Logf("%d pairs dropped leaves, %d with a bound over 1e-3 of the upper sum", dropped, heavy)
	if dropped < 1000 || heavy < 300 {
		t.Fatalf("too few cuts: %d, %d", dropped, heavy)
	}
}

// r61LogAcc accumulates exp of log terms with a running scale.
type r61LogAcc struct{ max, sum float64 }

func (a *r61LogAcc) add(l float64) {
	switch {
	case a.sum == 0:
		a.max, a.sum = l, 1
	case l > a.max:
		a.sum = a.sum*math.Exp(a.max-l) + 1
		a.max = l
	default:
		a.sum += math.Exp(l - a.max)
	}
}

func (a *r61LogAcc) log() float64 {
	if a.sum == 0 {
		return math.Inf(-1)
	}
	return a.max + math.Log(a.sum)
}

func (a *r61LogAcc) value() float64 { return math.Exp(a.log()) }
