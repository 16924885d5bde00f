package accountant

import (
	"fmt"
	"math"
	"math/cmplx"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"unsafe"
)

// Review of 8063c60 (helper-68): the window's coefficient scan in ranges
// (windowscan.go) against the same scan as one range with its skip runs
// turned off (lip = +Inf: skipRun then passes over nothing), compared on
// the scan's own output (the kept coefficients, their error bounds and the
// sums errM, absM, l2M), not on the window's bracket, which the last bits
// of errM, absM and l2M seldom reach: summing them per range and adding
// the ranges' sums passed every window-level test. The reference is the
// package's own code, so the comparison holds bit for bit on targets that
// fuse multiplies and adds (arm64, GOAMD64=v3) as well, where a copy of
// the expressions may be compiled differently. And of 321d9d2: adviseHuge
// advises exactly the whole 2 MB pages inside the range it is given.

// review68Out is a scan's output, copied off the pools.
type review68Out struct {
	coefN, coefM    []halfCoef
	errN, errMk     []float64
	errM, absM, l2M float64
}

// review68Setup is windowWith's set-up of its scan (window.go), for the
// window of length L of lattice l at n = nf, tilt theta, scale k0.
func review68Setup(l *lattice, nf, theta, k0 float64, L int, wantLo bool) (*coefScan, int) {
	t := twiddleTable(L)
	pts := make([]scanPoint, len(l.idx))
	ws := make([]float64, len(l.idx))
	var werr float64
	for i, ix := range l.idx {
		pos := int(((ix % int64(L)) + int64(L)) % int64(L))
		w, e := tiltedWeight(l.logw[i], theta*l.h*float64(ix), k0)
		pts[i], ws[i] = scanPoint{w, pos}, w
		werr += e
	}
	phiErr := werr*(1+float64(len(pts)+4)*ulp) + float64(12+2*len(pts)+4)*ulp
	skipBelow := math.Exp(-745/nf) * (1 - 1e-9)
	lip := lipschitzPhi(ws, l.idx, L)
	band := bandEnd(ws, l.idx, L, t, phiErr, skipBelow)
	return &coefScan{pts: pts, t: t, L: L, nf: nf, phiErr: phiErr, skipBelow: skipBelow, lip: lip, wantLo: wantLo}, band
}

// review68Run is c's scan of band coefficients in r ranges, copied.
func review68Run(c *coefScan, band, r int) review68Out {
	var o review68Out
	withScanRanges(r, func() { o = review68Copy(c.scan(band)) })
	return o
}

// review68Copy copies a scan's output off the pools and releases them.
func review68Copy(s scanned) review68Out {
	o := review68Out{
		coefN: append([]halfCoef(nil), s.coefN...), coefM: append([]halfCoef(nil), s.coefM...),
		errN: append([]float64(nil), s.errN...), errMk: append([]float64(nil), s.errMk...),
		errM: s.errM, absM: s.absM, l2M: s.l2M,
	}
	s.release()
	return o
}

// review68NoSkip is c's scan as one range with no skip runs: each
// coefficient below band computed and kept or not by the window's test
// alone.
func review68NoSkip(c *coefScan, band int) review68Out {
	c1 := *c
	c1.lip = math.Inf(1)
	if skipRun(0, c1.phiErr, c1.lip, c1.skipBelow) != 0 {
		panic("skipRun passes over coefficients at lip = +Inf")
	}
	return review68Run(&c1, band, 1)
}

// review68Ref computes every coefficient k < band one at a time, with no
// skips, no blocks and the table index as the product k pos mod L, keeps
// those the window's test keeps, and sums errM, absM and l2M as they are
// kept, in the expressions of 8e40fb7's windowWith (before the scan had
// its own file). It returns the computed moduli |phi(k)| too.
func review68Ref(c *coefScan, band int) (review68Out, []float64) {
	var o review68Out
	L, t, nf, phiErr := c.L, c.t, c.nf, c.phiErr
	as := make([]float64, band)
	for k := range band {
		var re, im float64
		for _, q := range c.pts {
			m := int(int64(k) * int64(q.pos) % int64(L))
			if m <= L/2 {
				re += q.w * real(t[m])
				im += q.w * imag(t[m])
			} else {
				re += q.w * real(t[L-m])
				im -= q.w * imag(t[L-m])
			}
		}
		phi := complex(re, im)
		a := cmplx.Abs(phi)
		as[k] = a
		mult := 2.0
		if k == 0 || (L%2 == 0 && k == L/2) {
			mult = 1
		}
		if a == 0 || a+phiErr < c.skipBelow {
			continue
		}
		la := math.Log(a)
		lae := math.Log(a + phiErr)
		if nf*lae < -745 {
			continue
		}
		arg := cmplx.Phase(phi)
		rn := math.Exp(nf * la)
		yn := cmplx.Rect(rn, nf*arg)
		rel := nf*phiErr/a + (math.Abs(nf*la)+math.Abs(nf*arg))*2*ulp + 8*ulp
		en := math.Exp(nf*lae) - rn + cmplx.Abs(yn)*rel
		o.coefN = append(o.coefN, halfCoef{k: k, y: yn, mult: mult})
		o.errN = append(o.errN, en)
		if c.wantLo {
			m1 := nf - 1
			rm := math.Exp(m1 * la)
			ym := cmplx.Rect(rm, m1*arg)
			aym := cmplx.Abs(ym)
			relm := m1*phiErr/a + (math.Abs(m1*la)+math.Abs(m1*arg))*2*ulp + 8*ulp
			em := math.Exp(m1*lae) - rm + aym*relm
			o.coefM = append(o.coefM, halfCoef{k: k, y: ym, mult: mult})
			o.errMk = append(o.errMk, em)
			o.errM += mult * em
			o.absM += mult * aym
			o.l2M += mult * real(ym*cmplx.Conj(ym))
		}
	}
	return o, as
}

// review68Unfused reports whether this test binary's floating-point
// arithmetic rounds every product and sum (amd64 at GOAMD64=v1), so that
// review68Ref's copies of the scan's expressions give its bits: where Go
// fuses multiplies and adds (arm64, GOAMD64=v3 and others) it may fuse
// the copy and the original differently (8e40fb7's and 8063c60's l2M terms
// on arm64, their errMk terms at GOAMD64=v3).
func review68Unfused() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "GOAMD64" {
			return s.Value == "v1"
		}
	}
	return true // v1 is the default
}

// review68Diff describes the first difference between two scans' outputs,
// bit for bit ("" when there is none).
func review68Diff(got, want review68Out) string {
	same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	sameC := func(x, y halfCoef) bool {
		return x.k == y.k && same(real(x.y), real(y.y)) && same(imag(x.y), imag(y.y)) && same(x.mult, y.mult)
	}
	cmpC := func(name string, g, w []halfCoef) string { return review68FirstDiff(name, g, w, sameC) }
	cmpF := func(name string, g, w []float64) string { return review68FirstDiff(name, g, w, same) }
	for _, d := range []string{
		cmpC("coefN", got.coefN, want.coefN), cmpF("errN", got.errN, want.errN),
		cmpC("coefM", got.coefM, want.coefM), cmpF("errMk", got.errMk, want.errMk),
	} {
		if d != "" {
			return d
		}
	}
	if !same(got.errM, want.errM) || !same(got.absM, want.absM) || !same(got.l2M, want.l2M) {
		return fmt.Sprintf("sums errM %v absM %v l2M %v, want %v %v %v", got.errM, got.absM, got.l2M, want.errM, want.absM, want.l2M)
	}
	return ""
}

// review68FirstDiff describes the first entry of g that differs from w's
// (by eq), or a difference in length ("" when there is none).
func review68FirstDiff[T any](name string, g, w []T, eq func(x, y T) bool) string {
	if len(g) != len(w) {
		return fmt.Sprintf("%d %s, want %d", len(g), name, len(w))
	}
	for j := range g {
		if !eq(g[j], w[j]) {
			return fmt.Sprintf("%s[%d] %+v, want %+v", name, j, g[j], w[j])
		}
	}
	return ""
}

// review68Crossings counts the skip runs of a one-range scan (from the
// moduli as) that pass over a start of one of r ranges of band: the runs
// the split scan clips, whose rest the next range computes and tests.
func review68Crossings(c *coefScan, as []float64, band, r int) int {
	n := 0
	for k := 0; k < band; k++ {
		a := as[k]
		if !(a == 0 || a+c.phiErr < c.skipBelow) {
			continue
		}
		d := min(skipRun(a, c.phiErr, c.lip, c.skipBelow), band-1-k)
		for i := 1; i < r; i++ {
			if s := int(int64(band) * int64(i) / int64(r)); s > k && s <= k+d {
				n++
			}
		}
		k += d
	}
	return n
}

// review68Win is a window of a lattice, at n = nf.
type review68Win struct {
	l             *lattice
	nf, theta, k0 float64
	L             int
	wantLo        bool
}

// review68LongWindows returns windows of length 2^16 whose bands hold
// 2 x scanRangeMin coefficients or more, where scanRanges' own rule splits
// the scan on two cores, and of which only some survive the n-th power:
// near eps0 = 6 (windowSkipSets), n from 1e4 to 1e6.
func review68LongWindows(t *testing.T) []review68Win {
	var ws []review68Win
	for _, tl := range nearEps0Lattices(t, []float64{6}) {
		for j, nf := range []float64{1e4, 1e5, 1e6} {
			if _, band := review68Setup(tl.l, nf, tl.theta, tl.k0, 1<<16, false); band >= 2*scanRangeMin {
				ws = append(ws, review68Win{tl.l, nf, tl.theta, tl.k0, 1 << 16, (tl.set+j)%2 == 0})
			}
		}
	}
	if len(ws) == 0 {
		t.Fatal("no window with a band of 2 x scanRangeMin or more")
	}
	return ws
}

// TestReview68ScanRangesOutputBits: on random windows (review53's cases,
// and near-eps0 windows of long lattices whose bands hold 32768
// coefficients or more and keep only some of them), the scan in 1, 2, 3,
// 7 and band + 2 ranges (empty ones included) gives the kept coefficients,
// error bounds and sums of one range without skip runs, bit for bit. That
// the reference never skips checks skipRun's argument on the windows' own
// weights: a run that passed over a coefficient the test keeps, in one
// range or clipped at a range's end, would lose it. Runs that cross a
// range's start must occur, and ranges must drop coefficients (or the
// join's copies are never exercised). On amd64 at GOAMD64=v1 the one
// range's output is also 8e40fb7's, the expressions of the scan before it
// had its own file (review68Ref), bit for bit.
func TestReview68ScanRangesOutputBits(t *testing.T) {
	var ws []review68Win
	for _, c := range review53WindowCases(t, 68, 80) {
		ws = append(ws, review68Win{c.l, c.nf, c.theta, c.k0, c.L, c.wantLo})
	}
	long := review68LongWindows(t)
	ws = append(ws, long...)
	unfused := review68Unfused()
	if !unfused {
		t.Log("fused multiply-adds possible: the one-range scan not compared with 8e40fb7's expressions")
	}
	var crossings, compacted, longPartial int
	for wi, w := range ws {
		c, band := review68Setup(w.l, w.nf, w.theta, w.k0, w.L, w.wantLo)
		want := review68NoSkip(c, band)
		ref, as := review68Ref(c, band)
		if unfused {
			if d := review68Diff(want, ref); d != "" {
				t.Errorf("window %d (n %g L %d band %d wantLo %v), one range: %s in 8e40fb7's expressions", wi, w.nf, w.L, band, w.wantLo, d)
			}
		}
		if band >= 2*scanRangeMin && len(want.coefN) > 0 && len(want.coefN) < band/2 {
			longPartial++
		}
		for _, r := range []int{1, 2, 3, 7, band + 2} {
			got := review68Run(c, band, r)
			if d := review68Diff(got, want); d != "" {
				t.Errorf("window %d (n %g L %d band %d wantLo %v), %d ranges: %s", wi, w.nf, w.L, band, w.wantLo, r, d)
				continue
			}
			if r > 1 && r <= band {
				crossings += review68Crossings(c, as, band, r)
				// A range after one that dropped coefficients has its
				// kept ones moved down by the join.
				for i := 1; i < r; i++ {
					s := int(int64(band) * int64(i) / int64(r))
					kept := 0
					for _, h := range want.coefN {
						if h.k < s {
							kept++
						}
					}
					if kept < s && kept < len(want.coefN) {
						compacted++
					}
				}
			}
		}
	}
	t.Logf("%d windows (%d long, %d long and partly kept): %d skip runs across a range's start, %d ranges moved by the join", len(ws), len(long), longPartial, crossings, compacted)
	if crossings < 50 || compacted < 50 || longPartial < 4 {
		t.Errorf("the windows exercise too little: %d crossing runs, %d ranges moved, %d long partly kept bands", crossings, compacted, longPartial)
	}
}

// TestConcurrentReview68ScanRanges: the split scan's ranges write into
// shared slices from their own goroutines, and make test runs only the
// TestConcurrent tests under the race detector, none of which reached a
// split scan (no window of theirs has a band of 2 x scanRangeMin). Here
// long windows are scanned in 2 and 7 ranges on two goroutines at once
// (the pools shared), against one range, bit for bit.
func TestConcurrentReview68ScanRanges(t *testing.T) {
	ws := review68LongWindows(t)
	ws = ws[:min(len(ws), 6)]
	type job struct {
		c    *coefScan
		band int
		want review68Out
	}
	var jobs []job
	for _, w := range ws {
		c, band := review68Setup(w.l, w.nf, w.theta, w.k0, w.L, w.wantLo)
		jobs = append(jobs, job{c, band, review68Run(c, band, 1)})
	}
	for _, r := range []int{2, 7} {
		withScanRanges(r, func() {
			var wg sync.WaitGroup
			for g := range 2 {
				wg.Go(func() {
					for j := range jobs {
						jb := jobs[(j+g)%len(jobs)]
						got := review68Copy(jb.c.scan(jb.band))
						if d := review68Diff(got, jb.want); d != "" {
							t.Errorf("goroutine %d, window %d, %d ranges: %s", g, (j+g)%len(jobs), r, d)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestReview68AdviseHugeBounds: adviseHuge advises the whole 2 MB pages
// inside the range it is given and nothing around them. A range of a
// fresh 16 MB heap slice from 4 KB before a 2 MB boundary to 4 KB past
// the second boundary after: the two pages between are advised (VmFlags
// hg in /proc/self/smaps), the 4 KB on either side are not (where no
// earlier advice covers them already). Skipped where smaps or the
// kernel's transparent huge pages are not available (TestMakeHugeAdvises
// checks the middle of a slice from makeHuge; it passes with a start
// rounded down or an end rounded up).
func TestReview68AdviseHugeBounds(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	const huge = 2 << 20
	buf := make([]byte, 16<<20)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	a := (p+huge-1)&^(huge-1) + huge // a 2 MB boundary, 2 MB or more inside buf
	before, first, last, after := a-4096, a, a+2*huge-1, a+2*huge
	pre := map[uintptr]bool{}
	for _, x := range []uintptr{before, first, last, after} {
		pre[x] = hugeAdvised(t, x)
	}
	adviseHuge(unsafe.Pointer(&buf[before-p]), 2*huge+8192)
	if !hugeAdvised(t, first) {
		if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
			t.Skip("the kernel did not mark the range advised, and has no transparent huge pages")
		}
		t.Fatalf("the first whole 2 MB page (%#x) is not advised", first)
	}
	if !hugeAdvised(t, last) {
		t.Errorf("the second whole 2 MB page (%#x) is not advised", last)
	}
	checked := 0
	for _, x := range []uintptr{before, after} {
		if pre[x] {
			continue // advised already: nothing to tell
		}
		checked++
		if hugeAdvised(t, x) {
			t.Errorf("%#x, outside the whole 2 MB pages of [%#x, %#x), is advised", x, before, after+4096)
		}
	}
	if checked == 0 {
		t.Logf("both sides advised before the call: only the pages inside checked")
	}
	if buf[0] != 0 || buf[len(buf)-1] != 0 {
		t.Error("the slice's contents changed")
	}
}
