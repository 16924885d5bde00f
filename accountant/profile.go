package accountant

import (
	"math"
	"sync"
)

// This file samples the single-report privacy profile of a mechanism at one
// batch size n on a lattice of eps values, with the engine's certified
// brackets, and builds the part's three PLDs (pld.go): pessimistic
// (dominates the shuffled mechanism), optimistic for the blanket pair itself
// (certifies how tight the pessimistic one is) and optimistic for the
// lower-bound datasets (a true lower bound).
//
// The grid. Every sample sits at a lattice loss j*step, so the PLDs need
// no rounding. A part's lattice spacing (fine) is chosen from its total
// variation bound U(1): for a Gaussian-like loss with standard deviation
// sigma, U(1) ~ sigma/sqrt(2 pi), and the connect-the-dots PLD spreads the
// loss by at most (fine/2)^2 in variance, so fine = sigma/gridPerSigma keeps
// that below (1/2 gridPerSigma)^2 of the variance. The fine grid runs until
// the upper profile falls below tauFine (the part of the profile that can
// matter at the caller's delta), then the step doubles until it falls below
// tauTail; the rest of the support is cut (moved to +inf on the upper side,
// dropped on the lower). Any grid is sound; the grid only decides how tight.
//
// Exact profiles. A mechanism that implements exactProfiler supplies its
// own bounds on the worst single-report profile at n (node_exact.go): F is
// then the profile of the exact worst pair, which the blanket pair
// dominates, so at each point the upper bound is the smaller of the
// engine's and the exact one (both are >= F) and the lower bracket, which
// only feeds the tightness certificate (pairLower), is the exact one.

const (
	// gridPerSigma is the number of grid steps per estimated standard
	// deviation of the single-report loss.
	gridPerSigma = 12
	// minGridPoints is the least number of steps between loss 0 and the
	// local eps.
	minGridPoints = 16
	// pointRel is the relative bracket width at which a profile point is
	// accepted; the lattice is refined up to pointRefine times to reach it.
	// pointRel is the relative bracket width at which a profile point is
	// accepted at grid level 0; the engine's lattice is refined up to
	// pointRefine times to reach it. Each grid refinement (level) divides
	// pointRel by 4 and allows one more lattice refinement. Measured: at
	// k-RR, n = 1e6, the composed bracket is dominated by the grid, not by
	// the points (3e-2 and 3e-3 give the same gap within 0.1%).
	pointRel    = 3e-2
	pointRefine = 1
	// hRelProfile is the engine's initial lattice step for profile points.
	hRelProfile = 0.25
	// batchPoints is the number of fine-grid points evaluated at once.
	batchPoints = 16
)

// profileKey identifies one engine evaluation.
type profileKey struct {
	set   int
	eps   float64
	level int
}

// partSampler evaluates one part's candidate sets at one n, memoised.
type partSampler struct {
	n        int
	localEps float64
	// sets are the distinct atom sets evaluated; ups indexes the upper
	// candidates (closed under swap), lows the lower-bound triples and
	// lowSwaps their reversed sets.
	sets     []AtomSet
	ups      []int
	lows     []int
	lowSwaps []int
	mu       sync.Mutex
	cache    map[profileKey]bracket
	// exact, when set, brackets the exact worst profile at eps values.
	exact func(eps []float64) (lo, hi []float64)
	// floors, when set, bound the upper candidates (by set index) under a
	// shuffler floor (newPartSampler).
	floors []*floorSolver
}

// exactProfiler is implemented by a mechanism that can bound its worst
// single-report profile at batch size n directly: exactProfile returns a
// function giving lower and upper bounds on it at eps values (>= 0), or
// nil when it has none at n.
type exactProfiler interface {
	exactProfile(n int) func(eps []float64) (lo, hi []float64)
}

// newMechSampler is newPartSampler with m's exact profile, if it has one.
func newMechSampler(m Mechanism, d *Decomposition, n, floor int) *partSampler {
	s := newPartSampler(d, n, floor)
	// An exact profile is of the mechanism without draws: its lower end
	// is no lower bound with a floor (its upper end would still be one).
	if e, ok := m.(exactProfiler); ok && floor == 0 {
		s.exact = e.exactProfile(n)
	}
	return s
}

// newPartSampler samples d's profile at batches of n reports; with floor
// > 0, of n honest reports (the victim's included) and floor blanket draws
// added by the shuffler (floor.go): the upper candidates are then bounded
// by their floor solvers, and the lower-bound triples, which do not
// describe the draws, give way to the candidate pairs themselves when n
// = 1 and they are exact pairs (the victim alone among the draws, whose
// floor value is then exact; Decomposition.ExactPairs) and to nothing
// otherwise.
func newPartSampler(d *Decomposition, n, floor int) *partSampler {
	s := &partSampler{n: n, localEps: d.LocalEps, cache: map[profileKey]bracket{}}
	index := map[string]int{}
	add := func(set AtomSet) int {
		m := set.Merge()
		k := m.key()
		if i, ok := index[k]; ok {
			return i
		}
		index[k] = len(s.sets)
		s.sets = append(s.sets, m)
		return len(s.sets) - 1
	}
	seen := map[int]bool{}
	var pairs [][2]int // each upper candidate and its swap
	for _, u := range d.Upper {
		iu, is := add(u), add(u.swap())
		pairs = append(pairs, [2]int{iu, is})
		for _, i := range []int{iu, is} {
			if !seen[i] {
				seen[i] = true
				s.ups = append(s.ups, i)
			}
		}
	}
	if floor > 0 {
		s.floors = make([]*floorSolver, len(s.sets))
		for _, i := range s.ups {
			s.floors[i] = newFloorSolver(s.sets[i], floor, n)
		}
		if n == 1 && d.ExactPairs {
			for _, p := range pairs {
				s.lows = append(s.lows, p[0])
				s.lowSwaps = append(s.lowSwaps, p[1])
			}
		}
		return s
	}
	for _, l := range d.Lower {
		s.lows = append(s.lows, add(l))
		s.lowSwaps = append(s.lowSwaps, add(l.swap()))
	}
	return s
}

// evalPoint brackets one set at one eps, refining the lattice until the
// bracket is within the level's tolerance (or below abs).
func (s *partSampler) evalPoint(set int, eps, abs float64, level int) bracket {
	k := profileKey{set, eps, level}
	s.mu.Lock()
	b, ok := s.cache[k]
	s.mu.Unlock()
	if ok {
		return b
	}
	if eps >= lossCeiling(s.localEps) {
		b = bracket{}
	} else if s.floors != nil && s.floors[set] != nil {
		rel := pointRel / math.Pow(4, float64(level))
		b = s.floors[set].bracket(eps, rel, rel/2, abs)
		b.lo = math.Min(b.lo, b.hi)
	} else {
		h := hRelProfile
		b = bracket{lo: 0, hi: math.Inf(1)}
		rel := pointRel / math.Pow(4, float64(level))
		for r := 0; r <= pointRefine+level; r++ {
			c := evaluate(s.sets[set], s.n, eps, h, true)
			b.lo, b.hi = math.Max(b.lo, c.lo), math.Min(b.hi, c.hi)
			if b.hi-b.lo <= rel*b.hi || b.hi <= abs || c.capped {
				break
			}
			h /= 2
		}
		b.hi = math.Min(b.hi, 1)
		b.lo = math.Min(b.lo, b.hi)
	}
	s.mu.Lock()
	s.cache[k] = b
	s.mu.Unlock()
	return b
}

// evalAll evaluates the given sets at the given eps values in parallel.
func (s *partSampler) evalAll(sets []int, eps []float64, abs float64, level int) [][]bracket {
	out := make([][]bracket, len(sets))
	for i := range out {
		out[i] = make([]bracket, len(eps))
	}
	parallelMap(len(sets)*len(eps), func(k int) {
		i, j := k/len(eps), k%len(eps)
		out[i][j] = s.evalPoint(sets[i], eps[j], abs, level)
	})
	return out
}

// upperAt returns max over upper candidates of the brackets at eps values.
func (s *partSampler) upperAt(eps []float64, abs float64, level int) (lo, hi []float64) {
	b := s.evalAll(s.ups, eps, abs, level)
	lo, hi = make([]float64, len(eps)), make([]float64, len(eps))
	for _, row := range b {
		for j, x := range row {
			lo[j], hi[j] = math.Max(lo[j], x.lo), math.Max(hi[j], x.hi)
		}
	}
	if s.exact != nil {
		elo, ehi := s.exact(eps)
		for j := range eps {
			hi[j] = math.Min(hi[j], ehi[j])
			lo[j] = math.Min(elo[j], hi[j])
		}
	}
	return lo, hi
}

// tv returns the upper bound on the total variation U(1) (eps = 0).
func (s *partSampler) tv() float64 {
	_, hi := s.upperAt([]float64{0}, 0, 0)
	return hi[0]
}

// desiredStep returns the loss spacing this part wants (see the file
// comment).
func (s *partSampler) desiredStep() float64 {
	sigma := math.Sqrt(2*math.Pi) * s.tv()
	st := sigma / gridPerSigma
	if lim := s.localEps / minGridPoints; !(st <= lim) {
		st = lim
	}
	return math.Max(st, 1e-12*s.localEps)
}

// builtPart is a part's PLDs at one lattice step.
type builtPart struct {
	upper     *pld
	pairLower *pld
	lower     *pld // nil when the mechanism has no lower-bound triple
	// eps and u are the sampled upper profile (for the KOV15 baseline).
	eps, u []float64
}

// build samples the profile on lattice step with spacing fine (a multiple
// of step, in lattice units) at accuracy level and returns the PLDs (only
// the pessimistic one with upperOnly).
func (s *partSampler) build(step float64, fine int64, tauFine, tauTail float64, level int, upperOnly bool) builtPart {
	jmax := int64(math.Ceil(lossCeiling(s.localEps) / step))
	if float64(jmax)*step < lossCeiling(s.localEps) {
		jmax++
	}
	fine = max(fine, 1)
	js := []int64{0}
	var lo, hi []float64
	l0, h0 := s.upperAt([]float64{0}, tauTail, level)
	lo, hi = append(lo, l0[0]), append(hi, h0[0])
	// Fine region, evaluated in batches of batchPoints, then single points
	// at doubling steps.
	last, stride, tail := int64(0), fine, false
	for last < jmax && hi[len(hi)-1] > tauTail {
		var batchJ []int64
		var batchE []float64
		n := batchPoints
		if tail {
			n = 1
		}
		for j := last + stride; j < jmax && len(batchJ) < n; j += stride {
			batchJ = append(batchJ, j)
			batchE = append(batchE, float64(j)*step)
		}
		if len(batchJ) == 0 {
			break
		}
		bl, bh := s.upperAt(batchE, tauTail, level)
		for k := range batchJ {
			js = append(js, batchJ[k])
			lo, hi = append(lo, bl[k]), append(hi, bh[k])
			last = batchJ[k]
			if bh[k] <= tauTail {
				break
			}
		}
		if tail {
			stride *= 2
		} else if hi[len(hi)-1] <= tauFine {
			tail, stride = true, 2*stride
		}
	}
	cut := js[len(js)-1]
	if cut < jmax {
		js = append(js, jmax)
		lo, hi = append(lo, 0), append(hi, 0)
	}
	bp := builtPart{}
	for i, j := range js {
		bp.eps = append(bp.eps, float64(j)*step)
		bp.u = append(bp.u, hi[i])
	}
	bp.upper = upperPLD(step, js, hi).cutUpper(cut)
	if upperOnly {
		return bp
	}
	bp.pairLower = lowerPLD(step, js, lo, hi, lo, hi).cutLower(cut)
	if len(s.lows) > 0 {
		evalE := make([]float64, len(js))
		for i, j := range js {
			evalE[i] = float64(j) * step
		}
		// The lower-bound triple with the largest total variation.
		best, bestTV := -1, -1.0
		var bestP, bestN [][]bracket
		for t := range s.lows {
			rows := s.evalAll([]int{s.lows[t], s.lowSwaps[t]}, evalE, tauTail, level)
			if rows[0][0].lo > bestTV {
				best, bestTV = t, rows[0][0].lo
				bestP, bestN = rows[:1], rows[1:]
			}
		}
		if best >= 0 {
			n := len(js)
			lp, up, ln, un := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
			for i := range js {
				lp[i], up[i] = bestP[0][i].lo, bestP[0][i].hi
				ln[i], un[i] = bestN[0][i].lo, bestN[0][i].hi
			}
			lp[n-1], up[n-1], ln[n-1], un[n-1] = 0, 0, 0, 0
			bp.lower = lowerPLD(step, js, lp, up, ln, un).cutLower(cut)
		}
	}
	return bp
}

// lossCeiling returns a loss no privacy loss of a declaration with local
// eps localEps reaches, with margin: declarations are validated to a
// likelihood ratio of e^{eps0}(1 + 1e-12) per part, so a joint mechanism of
// k parts may exceed its local eps by k 1e-12 in loss; the absolute 1e-9
// covers a million parts, the relative 1e-9 the rounding of localEps.
// The profile is 0 from here on (pld.go: F(a_m) = 0).
func lossCeiling(localEps float64) float64 { return localEps*(1+1e-9) + 1e-9 }
