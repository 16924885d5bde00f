package accountant

// The exact single-round profile of a longitudinal node report among its
// level-mates (proof point 4 of longitudinal.go, the tighter bound).
//
// The round. The victim's node report is randomized response on v in
// {-1, 0, +1} (NodeMatrix: the bit is +1 with probability lo = 1/(e^eps0+1),
// 1/2, hi = e^eps0/(e^eps0+1) for v = -1, 0, +1); its m-1 level-mates send
// the same on node values of their own, fixed but arbitrary (the others'
// data is fixed, their (j, h) too, proof point 1). The batch's reports of
// the victim's level are a multiset of bits: the adversary's view is the
// count C of +1 bits (the multiset is a function of C and conversely), and
// reports of other levels can be simulated (point 4). The leaking pair is
// (0, s) for s = ±1, in both orientations.
//
// Proof sketch (the bound below is an upper bound on the worst profile of
// the round over every mate configuration).
//
//  1. Vertices. C = V + S with S = sum of the mates' bits, independent
//     Bernoulli(p_i), p_i in {lo, 1/2, hi}. For fixed other mates both laws
//     of C are affine in one p_i, and the hockey-stick divergence H_a(P||Q)
//     is jointly convex, so it is convex in each p_i over [lo, hi]: its
//     maximum over the box is at a vertex, every p_i in {lo, hi} (mates at
//     -1 or +1, never 0; a mate at 0 is a mixture of the two). By symmetry
//     only the number j of mates at +1 matters: S_j = Bin(m-1-j, lo) +
//     Bin(j, hi), j in [0, m-1]. Flipping every bit maps the pair (0, -1)
//     at j to the pair (0, +1) at m-1-j in the same orientation, so s = +1
//     with all j covers s = -1.
//  2. Prefix form. With victim bit probabilities p1 < q1 (the pair (0, +1)
//     is p1 = 1/2, q1 = hi; its reverse (+1, 0), read on the reversed count
//     N - C whose mate law is S_{N-j}, is p1 = lo, q1 = 1/2), P(c) - a Q(c)
//     = alpha S(c) + beta S(c-1) with alpha = (1-p1) - a(1-q1) and beta =
//     p1 - a q1 < 0 for a >= 1. S is Poisson-binomial, hence log-concave:
//     S(c)/S(c-1) does not increase, so the positive terms form a prefix
//     c <= t*, empty of gain when alpha < 0 (then H = 0). Summing,
//     H_a = alpha S(t*) - (a-1) F(t*-1), F the CDF of S, and any other
//     prefix gives at most H_a (each is P(A) - a Q(A) for a set A).
//  3. Pmfs with certified error. Binomial pmfs are products of the exact
//     ratios (n-k)rho/(k+1) walked out from the mode (rho = e^{±eps0},
//     allowed 4 ulp of error from math.Exp), normalised by their sum plus a
//     geometric bound on the cut tails: every value carries a relative
//     error eps and an absolute excess mass tau (pi(k) >= (1-eps) x(k),
//     sum_k (pi(k) - (1+eps) x(k))_+ <= tau). Convolution of positive
//     arrays keeps relative errors (gamma_L = L u/(1-L u) for sums of L
//     products, u = 2^-53) and adds the excess masses; the ends of each
//     result below exactTrim of its maximum are cut into tau. All S_j are
//     built by divide and conquer over j (a node for j in [jl, jr] holds
//     Bin(jl, hi) * Bin(N-jr, lo) and hands each half its share of the
//     middle): O(m^1.5) work instead of O(m^2).
//  4. Per j, t* is located from the computed ratios x(c)/x(c-1), which
//     bracket the true ones within a factor mu where x >= exactCore; the
//     line alpha S_up(t) - (a-1) F_lo(t-1), an upper bound of the true
//     prefix value for alpha >= 0, is taken at every t the bracket allows;
//     if t* lies where x < exactCore, H <= alpha S(t*) <= alpha times the
//     largest such pmf bound. Every coefficient is rounded outward
//     (absolute margins 16u on alpha, 4u on the line's two terms).
//  5. Between points. The worst profile F (the maximum over j and both
//     orientations, closed under swap, so the profile of a dominating pair:
//     pld.go) is convex and non-increasing in a, so the chord through upper
//     bounds at b_i < b_{i+1} bounds it on [b_i, b_{i+1}]; a query at eps is
//     answered at a = fl(e^eps)(1-16u), below both e^eps and its rounding.
//     Lower bounds are lines P_lo(A) - a Q_up(A) of one set A, valid for
//     every a, the best at each neighbouring point.
//
// The grid of points b_i is fine (1/32 of an estimated standard deviation
// of the loss) where the profile matters and coarse beyond; any grid is
// sound. Tables are cached by (eps0, mates).

import (
	"math"
	"sync"
)

const (
	// unitRound is the unit roundoff u of float64.
	unitRound = 0x1p-53
	// exactTrim is the relative level (to a pmf's maximum) below which the
	// ends of a computed pmf are cut (their mass goes to tau).
	exactTrim = 1e-50
	// exactCore is the pmf level above which computed ratios are trusted
	// to locate the best prefix; below it the line is bounded by its pmf
	// term alone.
	exactCore = 1e-36
	// NodeExactCap is the largest number of level-mates (the victim
	// included) for which the exact per-round node profile is computed;
	// above it the blanket decomposition alone bounds the round (the exact
	// bound's advantage shrinks with the mates and its cost grows as
	// mates^1.5).
	NodeExactCap = 8192
	// nodeExactCacheSize bounds the number of cached tables.
	nodeExactCacheSize = 256
)

// nodeExactTable is the exact profile's bounds at points b_i = a.
type nodeExactTable struct {
	b  []float64 // increasing, b[0] = 1
	up []float64 // up[i] >= F(b[i])
	// lp, lq: F(a) >= lp[i] - a lq[i] for every a (one set's P_lo, Q_up).
	lp, lq []float64
}

// nodeVictim is one orientation of the victim's pair: bit probabilities
// p1 < q1 under the two laws, with 1-p1 and 1-q1 (file comment, point 2).
type nodeVictim struct {
	omp, omq float64 // 1-p1, 1-q1
	rel      float64 // relative error of omp, omq as floats
}

// nodeAcc accumulates the maxima over j, with scratch space for leaf.
type nodeAcc struct {
	up, lp, lq, lv []float64
	// tail[v][i] is the largest coefficient c with H <= alpha(b_k) c for
	// every k >= i (orientation v), from leaves whose best prefix has
	// reached the left end of their core.
	tail [2][]float64
	buf  [9][]float64
}

func newNodeAcc(k int) *nodeAcc {
	a := &nodeAcc{up: make([]float64, k), lp: make([]float64, k), lq: make([]float64, k), lv: make([]float64, k)}
	for i := range a.lv {
		a.lv[i] = -1
	}
	a.tail = [2][]float64{make([]float64, k), make([]float64, k)}
	return a
}

// scratch returns buffer k with at least n entries.
func (a *nodeAcc) scratch(k, n int) []float64 {
	if cap(a.buf[k]) < n {
		a.buf[k] = make([]float64, n, 2*n)
	}
	return a.buf[k][:n]
}

func (a *nodeAcc) merge(o *nodeAcc) {
	for i := range a.up {
		a.up[i] = math.Max(a.up[i], o.up[i])
		if o.lv[i] > a.lv[i] {
			a.lv[i], a.lp[i], a.lq[i] = o.lv[i], o.lp[i], o.lq[i]
		}
		for v := range a.tail {
			a.tail[v][i] = math.Max(a.tail[v][i], o.tail[v][i])
		}
	}
}

// finish folds the tail coefficients into up.
func (a *nodeAcc) finish(pl *nodeExactPlan) {
	for v := range a.tail {
		var c float64
		for i := range a.up {
			c = math.Max(c, a.tail[v][i])
			if al := pl.aUp[v][i]; al > 0 && c > 0 {
				a.up[i] = math.Max(a.up[i], al*c*upF(0))
			}
		}
	}
}

// nodeExactPlan holds what every j shares: the points and per-orientation
// coefficients.
type nodeExactPlan struct {
	b       []float64
	victims [2]nodeVictim
	// Per orientation and point: alpha's upper bound, (b-1)'s lower bound,
	// and a bracket of the prefix threshold kappa = -beta/alpha.
	aUp, bm1, kLo, kHi [2][]float64
}

func newNodeExactPlan(eps0 float64, others int) *nodeExactPlan {
	e := math.Exp(eps0)
	lo := 1 / (1 + e)
	hi := 1 / (1 + math.Exp(-eps0))
	// lo and hi: exp within 4 ulp (8u), then two roundings: within 12u.
	const rel = 12 * unitRound
	pl := &nodeExactPlan{victims: [2]nodeVictim{{omp: 0.5, omq: lo, rel: rel}, {omp: hi, omq: 0.5, rel: rel}}}
	// Points: fine (sigma/32) up to 32 sigma, 256 more to the end, and a
	// last one past (e+1)/2 where the profile is 0.
	E := math.Log((e + 1) / 2)
	sigma := (hi - 0.5) / math.Sqrt(math.Max(1, float64(others))*lo*hi)
	h := math.Min(sigma/32, E/1024)
	E1 := math.Min(E, 32*sigma)
	var epsPts []float64
	for i := 0; float64(i)*h < E1; i++ {
		epsPts = append(epsPts, float64(i)*h)
	}
	if E1 < E {
		for i := 0; i < 256; i++ {
			epsPts = append(epsPts, E1+(E-E1)*float64(i)/256)
		}
	}
	for _, x := range epsPts {
		pl.b = append(pl.b, math.Exp(x))
	}
	pl.b[0] = 1
	last := (e + 1) / 2 * (1 + 1e-9)
	if pl.b[len(pl.b)-1] >= last {
		pl.b = pl.b[:len(pl.b)-1]
	}
	pl.b = append(pl.b, last)
	K := len(pl.b)
	for v, vic := range pl.victims {
		pl.aUp[v], pl.bm1[v], pl.kLo[v], pl.kHi[v] = make([]float64, K), make([]float64, K), make([]float64, K), make([]float64, K)
		p1, q1 := 1-vic.omp, 1-vic.omq // exact in float for 1/2; lo, hi otherwise
		if v == 0 {
			q1 = hi
		} else {
			p1 = lo
		}
		for i, b := range pl.b {
			// alpha = (1-p1) - b(1-q1); beta = p1 - b q1.
			al := vic.omp - b*vic.omq
			ea := 16 * unitRound * (vic.omp + b*vic.omq)
			pl.aUp[v][i] = al + ea
			pl.bm1[v][i] = (b - 1) * dnF(0)
			nb := b*q1 - p1 // -beta > 0
			eb := 16 * unitRound * (b*q1 + p1)
			if al+ea > 0 {
				pl.kLo[v][i] = math.Max(0, (nb-eb)/(al+ea)*dnF(0))
			} else {
				pl.kLo[v][i] = math.Inf(1) // alpha < 0: leaf stops before here
			}
			if al-ea > 0 {
				pl.kHi[v][i] = (nb + eb) / (al - ea) * upF(0)
			} else {
				pl.kHi[v][i] = math.Inf(1)
			}
		}
		// The pointers of leaf need kLo and kHi non-decreasing: take the
		// suffix minimum of kLo and the prefix maximum of kHi (each only
		// widens the bracket).
		for i := K - 2; i >= 0; i-- {
			pl.kLo[v][i] = math.Min(pl.kLo[v][i], pl.kLo[v][i+1])
		}
		for i := 1; i < K; i++ {
			pl.kHi[v][i] = math.Max(pl.kHi[v][i], pl.kHi[v][i-1])
		}
	}
	return pl
}

// leaf adds the contribution of one mate law S (file comment, point 4).
func (pl *nodeExactPlan) leaf(S ndist, acc *nodeAcc) {
	x := S.x
	W := len(x)
	eps, tau := S.eps, S.tau
	gW := gammaU(W)
	// cum[t] = sum_{c < t} x[c] (array indices), cum[0] = 0.
	cum := acc.scratch(0, W+1)
	cum[0] = 0
	for i, v := range x {
		cum[i+1] = cum[i] + v
	}
	su := acc.scratch(1, W) // pi(t) <= su
	sl := acc.scratch(2, W) // pi(t) >= sl
	fl := acc.scratch(3, W) // F(t-1) >= fl
	fu := acc.scratch(4, W) // F(t-1) <= fu
	fE := upF(eps + gW)
	for t := range x {
		su[t] = (x[t] + tau) * upF(eps)
		sl[t] = x[t] * dnF(eps)
		fl[t] = cum[t] * dnF(eps+gW)
		fu[t] = (cum[t]*fE + tau) * upF(0)
	}
	// Core [cL, cR]: x >= exactCore.
	cL, cR := -1, -1
	for i, v := range x {
		if v >= exactCore {
			if cL < 0 {
				cL = i
			}
			cR = i
		}
	}
	var maxOut float64
	for i, v := range x {
		if cL < 0 || i < cL || i > cR {
			maxOut = math.Max(maxOut, v)
		}
	}
	sOut := (maxOut + tau) * upF(eps)
	var V, Wp []float64
	if cL >= 0 {
		minCore := math.Inf(1)
		for _, v := range x[cL : cR+1] {
			minCore = math.Min(minCore, v)
		}
		var mu float64
		if minCore > 0 {
			mu = 1 + 2.1*(eps+tau/minCore+eps) + 16*unitRound
		} else {
			mu = math.Inf(1)
		}
		// V[c] = max_{c' >= c} v(c'), c in (cL, cR]; Wp[c] = min_{cL <= c'
		// <= c} w(c'+1), c in [cL, cR).
		V = acc.scratch(5, W)
		Wp = acc.scratch(6, W)
		cur := 0.0
		for c := cR; c > cL; c-- {
			r := x[c] / x[c-1]
			if w := r * mu * upF(0); w > cur {
				cur = w
			}
			V[c] = cur
		}
		cur = math.Inf(1)
		for c := cL; c < cR; c++ {
			r := x[c+1] / x[c]
			w := 0.0
			if !math.IsInf(mu, 1) {
				w = r / mu * dnF(0)
			}
			if w < cur {
				cur = w
			}
			Wp[c] = cur
		}
	}
	K := len(pl.b)
	for v, vic := range pl.victims {
		aUp, bm1, kLo, kHi := pl.aUp[v], pl.bm1[v], pl.kLo[v], pl.kHi[v]
		ph := cR  // c_hi pointer
		pLo := -1 // c_lo pointer, found at the first point
		for i := 0; i < K; i++ {
			al := aUp[i]
			if al < 0 {
				break // alpha only falls with a: H = 0 from here on
			}
			best := al * sOut * upF(0)
			bestT := -1
			if cL >= 0 {
				for ph > cL && !(V[ph] > kLo[i]) {
					ph--
				}
				if ph == cL {
					// Every later range is within {cL}, whose line is at
					// most alpha su[cL]: H <= alpha max(sOut, su[cL]).
					c := su[cL]
					if sOut > c {
						c = sOut
					}
					if c > acc.tail[v][i] {
						acc.tail[v][i] = c
					}
					// The set c <= cL is a lower-bound line for the rest.
					lp := (vic.omp*sl[cL] + fl[cL]) * dnF(vic.rel)
					lq := (vic.omq*su[cL] + fu[cL]) * upF(vic.rel)
					for k := i; k < K; k++ {
						val := lp - pl.b[k]*lq
						if val <= 0 {
							break
						}
						if val > acc.lv[k] {
							acc.lv[k], acc.lp[k], acc.lq[k] = val, lp, lq
						}
					}
					break
				}
				if pLo < 0 {
					pLo = cR
					for c := cL; c < cR; c++ {
						if Wp[c] <= kHi[i] {
							pLo = c
							break
						}
					}
				} else {
					for pLo > cL && Wp[pLo-1] <= kHi[i] {
						pLo--
					}
				}
				for t := pLo; t <= ph; t++ {
					p := al * su[t]
					q := bm1[i] * fl[t]
					g := p - q + 4*unitRound*(p+q)
					if g > best {
						best, bestT = g, t
					}
				}
			}
			if best > acc.up[i] {
				acc.up[i] = best
			}
			if bestT >= 0 {
				// The set c <= bestT: P = (1-p1) S(t) + F(t-1), Q likewise.
				lp := (vic.omp*sl[bestT] + fl[bestT]) * dnF(vic.rel)
				lq := (vic.omq*su[bestT] + fu[bestT]) * upF(vic.rel)
				if val := lp - pl.b[i]*lq; val > acc.lv[i] {
					acc.lv[i], acc.lp[i], acc.lq[i] = val, lp, lq
				}
			}
		}
	}
}

// walk calls leaf for S_j = C * Bin(j-jl, hi) * Bin(jr-j, lo), j in [jl, jr]
// (file comment, point 3).
func (pl *nodeExactPlan) walk(jl, jr int, C ndist, rhoLo, rhoHi float64, acc *nodeAcc) {
	if jl == jr {
		pl.leaf(C, acc)
		return
	}
	mid := (jl + jr) / 2
	pl.walk(jl, mid, C.conv(binomDist(jr-mid, rhoLo)), rhoLo, rhoHi, acc)
	pl.walk(mid+1, jr, C.conv(binomDist(mid+1-jl, rhoHi)), rhoLo, rhoHi, acc)
}

// newNodeExactTable computes the bounds for randomized response at eps0
// with mates level-mates (the victim included).
func newNodeExactTable(eps0 float64, mates int) *nodeExactTable {
	N := mates - 1
	pl := newNodeExactPlan(eps0, N)
	rhoLo, rhoHi := math.Exp(-eps0), math.Exp(eps0)
	K := len(pl.b)
	acc := newNodeAcc(K)
	if N == 0 {
		pl.leaf(ndist{x: []float64{1}}, acc)
	} else {
		// The two halves in parallel.
		mid := N / 2
		accR := newNodeAcc(K)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl.walk(mid+1, N, binomDist(mid+1, rhoHi), rhoLo, rhoHi, accR)
		}()
		pl.walk(0, mid, binomDist(N-mid, rhoLo), rhoLo, rhoHi, acc)
		wg.Wait()
		acc.merge(accR)
	}
	acc.finish(pl)
	t := &nodeExactTable{b: pl.b, up: acc.up, lp: acc.lp, lq: acc.lq}
	t.up[K-1] = 0 // alpha < 0 there for both orientations
	for i := range t.lp {
		if acc.lv[i] < 0 {
			t.lp[i], t.lq[i] = 0, 0
		}
	}
	return t
}

// bounds returns lower and upper bounds on the worst profile F(e^eps) at
// each eps >= 0 (file comment, point 5).
func (t *nodeExactTable) bounds(eps []float64) (lo, hi []float64) {
	lo, hi = make([]float64, len(eps)), make([]float64, len(eps))
	K := len(t.b)
	for n, e := range eps {
		if e == 0 {
			hi[n] = t.up[0]
			lo[n] = math.Max(0, (t.lp[0]-t.lq[0])*dnF(0)-4*unitRound*(t.lp[0]+t.lq[0]))
			lo[n] = math.Min(lo[n], hi[n])
			continue
		}
		if !(e > 0) {
			hi[n] = 1
			continue
		}
		ex := math.Exp(e)
		a := ex * (1 - 16*unitRound)   // below e^e and fl(e^e) (exp within 4 ulp)
		aUp := ex * (1 + 16*unitRound) // above both
		// i: the last point with b[i] <= a.
		i := searchLE(t.b, a)
		if i < 0 {
			hi[n] = 1
			continue
		}
		if i == K-1 {
			hi[n] = t.up[K-1]
		} else {
			u0, u1 := t.up[i], t.up[i+1]
			lam := (a - t.b[i]) / (t.b[i+1] - t.b[i])
			c := (1-lam)*u0 + lam*u1
			c += 4*unitRound*math.Max(u0, u1) + 4*unitRound*c
			hi[n] = math.Min(c, u0)
		}
		var l float64
		for _, k := range []int{i, min(i+1, K-1)} {
			v := t.lp[k] - aUp*t.lq[k]
			v -= 4 * unitRound * (t.lp[k] + aUp*t.lq[k])
			l = math.Max(l, v)
		}
		lo[n] = math.Min(l, hi[n])
	}
	return lo, hi
}

// searchLE returns the last index with b[i] <= a (b increasing), -1 if none.
func searchLE(b []float64, a float64) int {
	lo, hi := 0, len(b) // answer in [lo-1, hi-1]
	for lo < hi {
		mid := (lo + hi) / 2
		if b[mid] <= a {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

type nodeExactKey struct {
	eps0  float64
	mates int
}

type nodeExactEntry struct {
	once sync.Once
	t    *nodeExactTable
}

var nodeExactCache = struct {
	mu sync.Mutex
	m  map[nodeExactKey]*nodeExactEntry
}{m: map[nodeExactKey]*nodeExactEntry{}}

// nodeExactBounds returns the exact per-round node table at (eps0, mates),
// computed once and cached.
func nodeExactBounds(eps0 float64, mates int) *nodeExactTable {
	k := nodeExactKey{eps0, mates}
	nodeExactCache.mu.Lock()
	en, ok := nodeExactCache.m[k]
	if !ok {
		if len(nodeExactCache.m) >= nodeExactCacheSize {
			clear(nodeExactCache.m)
		}
		en = &nodeExactEntry{}
		nodeExactCache.m[k] = en
	}
	nodeExactCache.mu.Unlock()
	en.once.Do(func() { en.t = newNodeExactTable(eps0, mates) })
	return en.t
}

// nodeExactMech is the longitudinal node pair of nodeStep (randomized
// response) with the exact per-round profile as an extra upper bound
// (exactProfiler). Its decomposition is that of the declaration.
type nodeExactMech struct {
	DeclaredMech
	eps0 float64
	// dev bounds the relative deviation of every entry of the node law
	// from randomized response at eps0 (0 for NodeMatrix itself).
	dev float64
}

// nodeRRDeviation returns a bound on the relative deviation of a node law
// (rows -1, 0, +1, two outputs in either order) from randomized response
// at eps0, and false when it is not within nodeRRTol of it. A nil law is
// randomized response.
func nodeRRDeviation(eps0 float64, node [][]float64) (float64, bool) {
	if node == nil {
		return 0, true
	}
	rr := NodeMatrix(eps0)
	if len(node) != 3 {
		return 0, false
	}
	best := math.Inf(1)
	for _, swap := range []bool{false, true} {
		var d float64
		for x := range node {
			if len(node[x]) != 2 {
				return 0, false
			}
			for y := range 2 {
				ry := y
				if swap {
					ry = 1 - y
				}
				d = math.Max(d, math.Abs(node[x][y]-rr[x][ry])/rr[x][ry])
			}
		}
		best = math.Min(best, d)
	}
	// The reference entries are within 12u of the real ones (newNodeExactPlan).
	best += 16 * unitRound
	return best, best <= nodeRRTol
}

// nodeRRTol is the largest relative deviation from randomized response a
// node law may have for the exact bound to apply (declared laws are
// randomized response up to the rounding of their entries).
const nodeRRTol = 1e-9

// exactProfile implements exactProfiler: the bounds at n level-mates (the
// victim included), nil above NodeExactCap.
//
// A node law within relative dev of randomized response (every entry, so
// every bit probability and its complement) changes each probability of
// the count by a factor within [(1-dev)^n, (1+dev)^n] = [1-eta, 1+eta]:
// P' - a Q' <= (1+eta)(P - a' Q) with a' = a(1-eta)/(1+eta), so
// H'(a) <= (1+eta) H(a'), and likewise H'(a) >= (1-eta) H(a(1+eta)/(1-eta)).
func (m nodeExactMech) exactProfile(n int) func(eps []float64) (lo, hi []float64) {
	if n < 1 || n > NodeExactCap {
		return nil
	}
	eta := math.Expm1(float64(n)*math.Log1p(m.dev)) * 1.01
	if !(eta < 1e-6) {
		return nil
	}
	if eta == 0 {
		return func(eps []float64) (lo, hi []float64) {
			return nodeExactBounds(m.eps0, n).bounds(eps)
		}
	}
	shift := math.Log1p(2*eta/(1-eta)) * 1.01 // >= log((1+eta)/(1-eta))
	return func(eps []float64) (lo, hi []float64) {
		t := nodeExactBounds(m.eps0, n)
		down, up := make([]float64, len(eps)), make([]float64, len(eps))
		for i, e := range eps {
			down[i], up[i] = math.Max(0, e-shift), e+shift
		}
		_, hi = t.bounds(down)
		lo, _ = t.bounds(up)
		for i, e := range eps {
			if e < shift {
				// a' < 1: H(a') <= H(1) + (1 - a') (pld.go's symmetric
				// extension), 1 - a' <= shift - e.
				hi[i] += shift - e
			}
			hi[i] = math.Min(1, hi[i]*(1+eta)*upF(0))
			lo[i] = math.Min(lo[i]*(1-eta)*dnF(0), hi[i])
		}
		return lo, hi
	}
}
