package accountant

// The window's coefficient scan: the tilted lattice law's characteristic
// function phi(k) at each k below the window's band, and the n-th (and,
// for the lower end, (n-1)-th) powers of those that survive, with their
// error bounds (window.go's windowWith says why each bound holds).
//
// The scan may be split into ranges of k, scanned at once on several
// cores and joined in order: the same bits as one scan. Why:
//
//   - each coefficient's sums see the same terms in the same order: the
//     points in their order, each at the table index k pos mod L, an exact
//     integer however it is reached (advanced step by step, or k0 pos mod L
//     at a range's start);
//   - a coefficient kept is kept by a test on its own values alone, and its
//     n-th powers and error bounds are its own;
//   - a skipped run (skipRun) that would have crossed into the next range
//     stops at the range's end; the next range computes those coefficients
//     and its test skips them, as skipRun's argument says it would (that
//     is why the run could pass over them): nothing kept changes;
//   - the kept coefficients are joined in the order of k, and the sums over
//     them (errM, absM, l2M) are taken after the join, in that order, each
//     the same sequence of additions as when the scan accumulated them.

import (
	"math"
	"math/cmplx"
	"runtime"
	"sync"
)

// scanPoint is a lattice point's tilted weight and its position modulo L.
type scanPoint struct {
	w   float64
	pos int
}

// coefScan is what every range of a window's scan reads.
type coefScan struct {
	pts []scanPoint
	t   []complex128 // twiddleTable(L)
	L   int
	// nf is n; phiErr bounds each computed |phi|'s error; below skipBelow
	// a coefficient's n-th power underflows for certain; lip is
	// lipschitzPhi's bound (skipRun).
	nf, phiErr, skipBelow, lip float64
	wantLo                     bool
}

// scanned is what a window's scan keeps, in the order of k: the n-fold
// law's coefficients coefN with error bounds errN; with wantLo, the
// (n-1)-fold law's coefM with error bounds errMk and moduli absMk, and the
// sums windowWith uses, errM = sum mult errMk, absM = sum mult absMk and
// l2M = sum mult |y|^2 over coefM.
type scanned struct {
	coefN           []halfCoef
	errN            []float64
	coefM           []halfCoef
	errMk, absMk    []float64
	errM, absM, l2M float64
}

// release returns the scan's slices to their pools (nothing may read them
// after).
func (s *scanned) release() {
	coefPool.put(s.coefN)
	coefPool.put(s.coefM)
	floatPool.put(s.errN)
	floatPool.put(s.errMk)
	floatPool.put(s.absMk)
}

// scanBlock is the number of coefficients the window's scan computes
// together.
const scanBlock = 8

// scanRangeMin is the fewest coefficients a range of a split scan takes:
// below it a second goroutine costs more than it saves.
const scanRangeMin = 1 << 14

// scanRanges returns how many ranges a scan of band coefficients is split
// into (tests set other counts: every count gives the same bits).
var scanRanges = func(band int) int {
	return max(1, min(runtime.GOMAXPROCS(0), band/scanRangeMin))
}

// scan computes the coefficients k < band.
func (c *coefScan) scan(band int) scanned {
	// At most band coefficients are kept (k < band): room for them at
	// once, written by index, each range from its own start (growing by
	// doublings, their copies and the pools' slices that Go's garbage
	// collector drops were a fifth of an eps command at n = 1e8). The slices come from a pool
	// and go back to it when the window is done (release): near eps0
	// every window keeps all L/2 coefficients, and allocating (zeroing)
	// them afresh for each window was a seventh of a calibration
	// (slicepool.go).
	var s scanned
	s.coefN, s.errN = coefPool.get(band)[:band], floatPool.get(band)[:band]
	if c.wantLo {
		s.coefM, s.errMk, s.absMk = coefPool.get(band)[:band], floatPool.get(band)[:band], floatPool.get(band)[:band]
	}
	r := scanRanges(band)
	kept := make([]int, r)
	start := func(i int) int { return int(int64(band) * int64(i) / int64(r)) }
	if r == 1 {
		kept[0] = c.scanRange(0, band, &s)
	} else {
		var wg sync.WaitGroup
		for i := range r {
			wg.Go(func() { kept[i] = c.scanRange(start(i), start(i+1), &s) })
		}
		wg.Wait()
	}
	// Join the ranges' kept coefficients in order (each range wrote from
	// its own start; the copies move entries down, never over one not yet
	// moved).
	n := 0
	for i := range r {
		k0 := start(i)
		if n != k0 {
			copy(s.coefN[n:], s.coefN[k0:k0+kept[i]])
			copy(s.errN[n:], s.errN[k0:k0+kept[i]])
			if c.wantLo {
				copy(s.coefM[n:], s.coefM[k0:k0+kept[i]])
				copy(s.errMk[n:], s.errMk[k0:k0+kept[i]])
				copy(s.absMk[n:], s.absMk[k0:k0+kept[i]])
			}
		}
		n += kept[i]
	}
	s.coefN, s.errN = s.coefN[:n], s.errN[:n]
	if c.wantLo {
		s.coefM, s.errMk, s.absMk = s.coefM[:n], s.errMk[:n], s.absMk[:n]
		for j, h := range s.coefM {
			s.errM += h.mult * s.errMk[j]
			s.absM += h.mult * s.absMk[j]
			s.l2M += h.mult * real(h.y*cmplx.Conj(h.y))
		}
	}
	return s
}

// scanRange computes the coefficients k in [k0, k1), writing the kept ones
// to s's slices from index k0 on, and returns how many it kept.
func (c *coefScan) scanRange(k0, k1 int, s *scanned) int {
	pts, t, L, nf, phiErr, skipBelow := c.pts, c.t, c.L, c.nf, c.phiErr, c.skipBelow
	// rot[i] is k·pos_i mod L for the current k, advanced by pos_i at each
	// step (the same table index as the product taken modulo L).
	rot := make([]int, len(pts))
	for i, q := range pts {
		rot[i] = int(int64(k0) * int64(q.pos) % int64(L))
	}
	kept := 0
	// The coefficients are taken scanBlock at a time, each point's
	// weight added to every coefficient of the block in turn: each
	// coefficient's sums see the same terms in the same order as one at a
	// time (the same bits), while the block's sums do not wait on each
	// other (a chain of dependent additions per coefficient was the scan's
	// bound, with 73 points for Laplace). Coefficients computed past a
	// skipped run within a block are not read.
	var reB, imB [scanBlock]float64
	for kb := k0; kb < k1; {
		nb := min(scanBlock, k1-kb)
		reB, imB = [scanBlock]float64{}, [scanBlock]float64{}
		for i, q := range pts {
			m, w := rot[i], q.w
			for b := range nb {
				if m <= L/2 {
					reB[b] += w * real(t[m])
					imB[b] += w * imag(t[m])
				} else {
					reB[b] += w * real(t[L-m])
					imB[b] -= w * imag(t[L-m])
				}
				if m += q.pos; m >= L {
					m -= L
				}
			}
			rot[i] = m
		}
		// rot is now at next, the first coefficient after the block.
		next := kb + nb
		for b := 0; b < nb; b++ {
			k := kb + b
			phi := complex(reB[b], imB[b])
			a := cmplx.Abs(phi)
			mult := 2.0
			if k == 0 || (L%2 == 0 && k == L/2) {
				mult = 1
			}
			if a == 0 || a+phiErr < skipBelow {
				if d := skipRun(a, phiErr, c.lip, skipBelow); d > 0 {
					d = min(d, k1-1-k)
					if adv := k + d + 1 - next; adv > 0 {
						// The run goes past the block: the next block
						// starts after it.
						for i, q := range pts {
							rot[i] = int((int64(rot[i]) + int64(adv)*int64(q.pos)) % int64(L))
						}
						next += adv
					}
					b += d
				}
				continue
			}
			yn, en, ym, em, aym, ok := coefPowers(phi, a, phiErr, nf, c.wantLo)
			if !ok {
				continue
			}
			j := k0 + kept
			s.coefN[j], s.errN[j] = halfCoef{k: k, y: yn, mult: mult}, en
			if c.wantLo {
				s.coefM[j], s.errMk[j], s.absMk[j] = halfCoef{k: k, y: ym, mult: mult}, em, aym
			}
			kept++
		}
		kb = next
	}
	return kept
}

// coefPowers returns phi^n and, with lo, phi^(n-1), each with its error
// bound (powerOf), and |phi^(n-1)|, for a computed coefficient phi of
// modulus a; ok is
// false where |phi^n| and its error underflow (n log(a + phiErr) < -745)
// and the coefficient is not kept.
func coefPowers(phi complex128, a, phiErr, nf float64, lo bool) (yn complex128, en float64, ym complex128, em, aym float64, ok bool) {
	la := math.Log(a)
	lae := math.Log(a + phiErr)
	if nf*lae < -745 {
		return 0, 0, 0, 0, 0, false
	}
	arg := cmplx.Phase(phi)
	yn, en, _ = powerOf(a, la, lae, arg, nf, phiErr)
	if lo {
		ym, em, aym = powerOf(a, la, lae, arg, nf-1, phiErr)
	}
	return yn, en, ym, em, aym, true
}

// powerOf returns y = phi^m (m = n, or n - 1 for the convexity
// correction) of a computed phi with modulus a, la = log a, lae =
// log(a + phiErr) and argument arg, a bound on |y - phi_exact^m| and |y|:
// the bound is the modulus's error, exp(m lae) - |y|, plus |y| times the
// relative error of the rest, m phiErr/a from phi's argument and the
// roundings of m log|phi| and m arg(phi) in exp and rect.
func powerOf(a, la, lae, arg, m, phiErr float64) (y complex128, err, abs float64) {
	r := math.Exp(m * la)
	y = cmplx.Rect(r, m*arg)
	abs = cmplx.Abs(y)
	rel := m*phiErr/a + (math.Abs(m*la)+math.Abs(m*arg))*2*ulp + 8*ulp
	return y, math.Exp(m*lae) - r + abs*rel, abs
}
