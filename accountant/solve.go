package accountant

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

const (
	// Tolerance is the relative accuracy in eps to which both bounds are
	// certified: the reported upper bound is at most (1+Tolerance) times the
	// exact value of docs/accounting.md §3, the reported lower bound at least
	// 1/(1+Tolerance) times the exact value of §4.
	Tolerance = 0.005
	// certTol is the tolerance used for certification; the rest of
	// Tolerance absorbs the root finder's final interval.
	certTol = 0.0045
	// rootTol is the relative width at which root finding stops.
	rootTol = 2e-4
	// hRelStart is the initial lattice step in tilted standard deviations
	// of Z; each refinement halves it.
	hRelStart = 0.5
	// maxRefine bounds the number of halvings.
	maxRefine = 12
)

// setSolver evaluates one atom set at one n with lattice refinement.
type setSolver struct {
	set  AtomSet
	n    int
	hRel float64
	// latticeOnly skips the sparse exact path (floor.go: sets without a
	// residual, where it would enumerate every multinomial term).
	latticeOnly bool
	// twoPoint sums a two-point set exactly where the sparse path cannot
	// (twopoint.go); only the lower side's eps search sets it.
	twoPoint bool
	// compound takes the compound path where it applies (compound.go);
	// only the lower side's eps search sets it.
	compound bool
}

func (s *setSolver) eval(eps float64, wantLo bool) bracket {
	if s.twoPoint && s.n > 1 {
		p := prepare(s.set, eps)
		if p.maxZ <= 0 {
			return bracket{}
		}
		if b, ok := twoPointExact(p, s.n); ok {
			return b
		}
	}
	if s.latticeOnly && s.n > 1 {
		p := prepare(s.set, eps)
		if p.maxZ <= 0 {
			return bracket{}
		}
		return latticeEval(p, s.n, s.hRel, wantLo)
	}
	if s.compound {
		return evaluateCompound(s.set, s.n, eps, s.hRel, wantLo)
	}
	return evaluate(s.set, s.n, eps, s.hRel, wantLo)
}

// SetDelta returns lower and upper bounds on (1/n) E[(Z_1+...+Z_n)_+] for the
// atom set s at eps (docs/accounting.md §3), refined until the upper bound at eps is
// no larger than the lower bound at eps/(1+Tolerance): in eps, the bracket is
// within Tolerance.
func SetDelta(s AtomSet, n int, eps float64) (lo, hi float64, err error) {
	if err := checkN(n); err != nil {
		return 0, 0, err
	}
	if err := checkEps("eps", eps); err != nil {
		return 0, 0, err
	}
	for i, a := range s {
		if a.R < 0 || a.P < 0 || a.Q < 0 || math.IsNaN(a.R+a.P+a.Q) || math.IsInf(a.R+a.P+a.Q, 0) {
			return 0, 0, fmt.Errorf("%w: atom %d = %+v: entries must be finite and >= 0", ErrInvalidArgument, i, a)
		}
	}
	b, _ := deltaBracket(s.Merge(), n, eps)
	return b.lo, b.hi, nil
}

// deltaBracket refines the lattice until the bracket at eps is certified.
func deltaBracket(s AtomSet, n int, eps float64) (bracket, bool) {
	return deltaBracketOf(&setSolver{set: s, n: n, hRel: hRelStart}, eps)
}

// deltaBracketOf is deltaBracket with a prepared solver.
func deltaBracketOf(sv *setSolver, eps float64) (bracket, bool) {
	// Every bracket is valid: keep their intersection, and stop refining
	// when a finer lattice no longer narrows it.
	best := bracket{lo: 0, hi: math.Inf(1)}
	for range maxRefine {
		b := sv.eval(eps, true)
		prevWidth := best.hi - best.lo
		best.lo, best.hi = math.Max(best.lo, b.lo), math.Min(best.hi, b.hi)
		best.capped = b.capped
		if best.hi <= DeltaFloor || best.hi <= best.lo*(1+1e-3) {
			return best, true
		}
		// Certified if the exact value at eps(1-certTol) is above hi.
		if eps > 0 {
			if c := sv.eval(eps/(1+certTol), true); c.lo >= best.hi {
				return best, true
			}
		}
		if b.capped || best.hi-best.lo > 0.9*prevWidth {
			return best, false
		}
		sv.hRel /= 2
	}
	return best, false
}

// steerUpper lets epsUpper's search steer by the compound path's lower
// end (tests compare with it off).
var steerUpper = true

// epsUpper returns the smallest eps (to rootTol) with hi(eps) <= delta, in
// [0, cap], refined until certified within Tolerance.
func epsUpper(s AtomSet, n int, delta, cap float64) (float64, bool) {
	sv := &setSolver{set: s, n: n, hRel: hRelStart}
	lo, hi := 0.0, cap
	var prev bracket
	prevE := math.NaN()
	for range maxRefine {
		f := func(e float64) float64 {
			if steerUpper {
				// Only steering: where D provably exceeds delta, so
				// does the lattice's upper end (compound.go).
				if l := compoundLower(s, n, e, sv.hRel); l > delta {
					return l
				}
			}
			return sv.eval(e, false).hi
		}
		var e float64
		var ok bool
		if x := cap * (1 - rootTol); prevE >= x && f(x) > delta {
			// The previous root is within the search's tolerance of
			// cap, where the figure is cap (not amplified), and the
			// finer lattice's upper end is still above delta just below
			// it: the search on [x, prevE] would return prevE without a
			// step (its bracket is already that narrow), and only the
			// certificate is left to refine. (laplace at eps0 = 20,
			// n = 1e5: 15 evaluations per refinement, 0.5 s, for the
			// same root.)
			e, ok = prevE, true
		} else {
			e, ok = solveDecreasing(f, delta, lo, hi)
		}
		if !ok && hi < cap {
			// The finer lattice did not confirm the previous root (its
			// margins differ): the previous root stays a valid answer.
			return hi, false
		}
		if !ok {
			return cap, false
		}
		if e == 0 {
			return 0, true
		}
		// Certify: the exact delta at e/(1+certTol) exceeds delta.
		c := sv.eval(e/(1+certTol), true)
		if c.lo > delta {
			return e, true
		}
		if c.capped {
			return e, false
		}
		if e == prevE && c.hi >= 0.9*prev.hi && c.lo <= prev.lo {
			// The root did not move, and the finer lattice brackets the
			// same certification point no higher at its lower end (the
			// one the certificate needs) and less than 10% lower at its
			// upper end: its margins grow as fast as its resolution
			// helps (a set whose far atoms the window cannot reach,
			// near eps0: laplace at eps0 16, n 1e3 refined 12 times for
			// minutes, every bracket wider than the last, for the root
			// eps0; at eps0 20 the upper end fell by 1% a step, from 75,
			// with the lower end at 0). Stop, uncertified, with the same
			// root: any stop keeps a proven root.
			return e, false
		}
		prev, prevE = c, e
		// A finer lattice only lowers hi: the root moves left, and stays
		// above the certified-exact region.
		hi = e
		sv.hRel /= 2
	}
	return hi, false
}

// epsLower returns the largest eps (to rootTol) with lo(eps) >= delta
// (so that the exact lower-bound eps exceeds it), certified within
// Tolerance. With dominated non-nil, before each refinement it asks for the
// largest bound L of the lower sets before this one that have finished,
// and stops with pruned set when the set's upper end of delta at L is at
// most delta: its bound is then below L (dominated.go).
func epsLower(s AtomSet, n int, delta, cap float64, dominated func() float64) (e float64, ok, pruned bool) {
	sv := &setSolver{set: s, n: n, hRel: hRelStart, twoPoint: true, compound: true}
	tested := 0.0
	prevE, prevHi := math.NaN(), 0.0
	for range maxRefine {
		if dominated != nil {
			if L := dominated(); L > tested {
				tested = L
				if sv.eval(L, false).hi <= delta {
					return 0, true, true
				}
			}
		}
		f := func(x float64) float64 { return sv.eval(x, true).lo }
		// Largest e with f(e) >= delta: solveDecreasing returns the smallest
		// point b with f(b) <= delta and keeps a with f(a) > delta; use a.
		a := solveDecreasingLow(f, delta, 0, cap)
		if a == 0 && e == 0 && sv.eval(0, false).hi > delta {
			a = scanLower(f, delta, cap)
		}
		e = math.Max(e, a)
		c := sv.eval(e*(1+certTol), false)
		if c.hi <= delta {
			return e, true, false
		}
		if c.capped {
			return e, false, false
		}
		if e > 0 && e == prevE && c.hi >= prevHi {
			// As in epsUpper: the bound did not move and the finer
			// lattice's upper end at the certification point is no
			// lower; stop, uncertified, with the same bound.
			return e, false, false
		}
		prevE, prevHi = e, c.hi
		sv.hRel /= 2
	}
	return e, false, false
}

// lowerScanPoints is the number of points scanLower tries.
const lowerScanPoints = 8

// scanLower returns a point x in (0, cap] with f(x) > target, the largest
// it finds, or 0. It serves the lower side's search when f(0) <= target is
// not certified: f is the lower end of a lattice's bracket, a valid lower
// bound of D at each point on its own but not monotone in eps where the
// lattice cannot span the set (laplace at eps0 = 20, n = 1e3: lo = 0 at
// eps 0 to 5, where the atoms span 17 decades, and lo = 0.75 at eps 10).
// Every x with f(x) > target is a lower bound on the exact eps, whatever f
// does elsewhere, so any such point is sound; the scan walks down from cap
// in steps of cap/lowerScanPoints, and the root search then narrows the
// step above the first point found.
func scanLower(f func(float64) float64, target, cap float64) float64 {
	step := cap / lowerScanPoints
	for k := lowerScanPoints; k >= 1; k-- {
		x := step * float64(k)
		if f(x) > target {
			if k == lowerScanPoints {
				return x
			}
			return solveDecreasingLow(f, target, x, math.Min(x+step, cap))
		}
	}
	return 0
}

// solveDecreasing returns the smallest b in [lo, hi] (to relative width
// rootTol) with f(b) <= target, for non-increasing f with f(hi) <= target
// assumed; it returns lo when f(lo) <= target. The second result says
// whether f(b) <= target (false when not even f(hi) meets it).
func solveDecreasing(f func(float64) float64, target, lo, hi float64) (float64, bool) {
	_, b := rootBracketLog(logDistance(f, target), lo, hi)
	return b.x, b.f <= 0
}

// solveDecreasingLow returns the largest a with f(a) > target found by the
// same search (0 when f(lo) <= target).
func solveDecreasingLow(f func(float64) float64, target, lo, hi float64) float64 {
	a, _ := rootBracketLog(logDistance(f, target), lo, hi)
	if a.f <= 0 {
		return 0
	}
	return a.x
}

type point struct{ x, f float64 }

// logDistance returns g = log(f/target) (-Inf where f <= 0): g <= 0
// exactly where f meets the target, since for f > target the quotient
// rounds to at least 1 + 2^-52, whose log is positive (log f - log
// target can round to 0 for an f a few ulps above the target).
func logDistance(f func(float64) float64, target float64) func(float64) float64 {
	return func(x float64) float64 {
		v := f(x)
		if v <= 0 {
			return math.Inf(-1)
		}
		return math.Log(v / target)
	}
}

// rootBracketLog finds a <= b with g(a) > 0 >= g(b), b - a <= rootTol b,
// for non-increasing g, by a safeguarded regula falsi (Illinois) step,
// falling back to bisection when g is infinite or the step stalls. The
// points carry g. When g(lo) <= 0 both are lo (a with g = -Inf); when
// g(hi) > 0 both are hi (not bracketed).
func rootBracketLog(g func(float64) float64, lo, hi float64) (point, point) {
	a := point{lo, g(lo)}
	if a.f <= 0 {
		return point{lo, math.Inf(-1)}, point{lo, a.f}
	}
	b := point{hi, g(hi)}
	if b.f > 0 {
		// Not bracketed: the target is not met even at hi.
		return b, b
	}
	side := 0
	for i := 0; i < 200 && b.x-a.x > rootTol*b.x; i++ {
		var x float64
		if math.IsInf(b.f, -1) || math.IsInf(a.f, 1) {
			x = 0.5 * (a.x + b.x)
		} else {
			fa, fb := a.f, b.f
			if side == -1 {
				fb /= 2
			} else if side == 1 {
				fa /= 2
			}
			x = a.x + (b.x-a.x)*fa/(fa-fb)
			// Keep the step inside the middle 98% so the bracket shrinks.
			w := b.x - a.x
			x = math.Min(math.Max(x, a.x+0.01*w), b.x-0.01*w)
			if i%4 == 3 {
				x = 0.5 * (a.x + b.x)
			}
		}
		fx := g(x)
		if fx > 0 {
			a = point{x, fx}
			if side == 1 {
				side = 0
			} else {
				side = 1
			}
		} else {
			b = point{x, fx}
			if side == -1 {
				side = 0
			} else {
				side = -1
			}
		}
	}
	return a, b
}

// parallelMap runs f on each index with at most GOMAXPROCS workers.
func parallelMap(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

func checkQuery(eps0 float64, n int) error {
	if err := checkFinite("eps0", eps0); err != nil {
		return err
	}
	if !(eps0 > 0) {
		return argError("eps0", eps0, "> 0")
	}
	return checkN(n)
}

// Delta returns the privacy profile point of m at total local budget eps0,
// n users and central eps: Upper is the maximum over candidate pairs of the
// certified upper bound, Lower the maximum over candidate triples of the
// certified lower bound.
func Delta(m Mechanism, eps0 float64, n int, eps float64) (DeltaResult, error) {
	if err := checkQuery(eps0, n); err != nil {
		return DeltaResult{}, err
	}
	if err := checkEps("eps", eps); err != nil {
		return DeltaResult{}, err
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return DeltaResult{}, err
	}
	ups := make([]float64, len(d.Upper))
	lows := make([]float64, len(d.Lower))
	parallelMap(len(d.Upper)+len(d.Lower), func(i int) {
		if i < len(d.Upper) {
			b, _ := deltaBracket(d.Upper[i], n, eps)
			ups[i] = b.hi
		} else {
			b, _ := deltaBracket(d.Lower[i-len(d.Upper)], n, eps)
			lows[i-len(d.Upper)] = b.lo
		}
	})
	var r DeltaResult
	for _, v := range ups {
		r.Upper = math.Max(r.Upper, v)
	}
	for _, v := range lows {
		r.Lower = math.Max(r.Lower, v)
	}
	r.Upper = math.Min(r.Upper, 1)
	return r, nil
}

// Epsilon returns the central eps of m at total local budget eps0, n users
// and central delta. When shuffling cannot improve on the local guarantee at
// this n, Amplified is false and Upper is the local eps.
func Epsilon(m Mechanism, eps0 float64, n int, delta float64) (EpsilonResult, error) {
	if err := checkQuery(eps0, n); err != nil {
		return EpsilonResult{}, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return EpsilonResult{}, err
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return EpsilonResult{}, err
	}
	return epsilonOf(d, n, delta), nil
}

// epsilonOf is Epsilon on a decomposition: the upper bound over d.Upper,
// the lower bound over d.Lower, and the certificate that ties them.
func epsilonOf(d *Decomposition, n int, delta float64) EpsilonResult {
	return epsilonBounds(d, n, delta, true)
}

// epsilonBounds is epsilonOf, with the lower bound only when withLower.
// Without it the Upper and Amplified bits are the same (each set's
// epsUpper does not depend on the lower sets), with Lower 0 and Tight
// false: a search that keeps only the eps0 it proves (calibrateEps0)
// needs no more, and the lower bound was three quarters of a kov15
// baseline's CPU.
func epsilonBounds(d *Decomposition, n int, delta float64, withLower bool) EpsilonResult {
	cap := d.LocalEps
	lower := d.Lower
	if !withLower {
		lower = nil
	}
	ups := make([]float64, len(d.Upper))
	lows := make([]float64, len(lower))
	okUp := make([]bool, len(d.Upper))
	okLow := make([]bool, len(lower))
	pruned := make([]bool, len(lower))
	board := newLowerBoard(len(lower))
	parallelMap(len(d.Upper)+len(lower), func(i int) {
		if i < len(d.Upper) {
			ups[i], okUp[i] = epsUpper(d.Upper[i], n, delta, cap)
		} else {
			j := i - len(d.Upper)
			var dominated func() float64
			if pruneLowerSets {
				dominated = func() float64 { return board.before(j) }
			}
			lows[j], okLow[j], pruned[j] = epsLower(lower[j], n, delta, cap, dominated)
			board.finish(j, lows[j])
		}
	})
	r := EpsilonResult{LocalEps: cap, Tight: true}
	for i, v := range ups {
		if v >= r.Upper {
			r.Upper = v
			r.Tight = r.Tight && okUp[i]
		}
	}
	taken := -1
	for i, v := range lows {
		if pruned[i] {
			continue // a set before it has a larger bound (dominated.go)
		}
		if v >= r.Lower {
			r.Lower, taken = v, i
		}
	}
	if taken >= 0 {
		r.Tight = r.Tight && okLow[taken] && othersBelow(lower, taken, n, delta, r.Lower)
	}
	r.Tight = r.Tight && withLower
	r.Upper = math.Min(r.Upper, cap)
	r.Amplified = r.Upper < cap*(1-rootTol)
	if !r.Amplified {
		r.Upper = cap
	}
	r.Lower = math.Min(r.Lower, r.Upper)
	return r
}

// othersBelow reports whether every lower set but the taken one has an
// exact bound of at most lower (1 + certTol), so that the lower figure is
// within Tolerance of the exact value of docs/accounting.md §4, the
// largest over the sets. The taken set's own certificate is its solver's;
// the others are checked here, each by the upper end of its delta at
// lower (1 + certTol): D is non-increasing in eps, so hi <= delta there
// puts the set's exact bound below that point. The check is the same
// whichever sets were pruned and whichever certified themselves (both
// depend on the order in which the sets finished), so Tight does not
// depend on scheduling. It refines as the solvers do, and gives up
// (false) where a lattice is capped or stops narrowing.
func othersBelow(sets []AtomSet, taken, n int, delta, lower float64) bool {
	at := lower * (1 + certTol)
	for j, s := range sets {
		if j == taken {
			continue
		}
		sv := &setSolver{set: s, n: n, hRel: hRelStart, twoPoint: true, compound: true}
		prev := math.Inf(1)
		for k := 0; ; k++ {
			b := sv.eval(at, false)
			if b.hi <= delta {
				break
			}
			if b.capped || k == maxRefine-1 || b.hi >= prev {
				return false
			}
			prev = b.hi
			sv.hRel /= 2
		}
	}
	return true
}
