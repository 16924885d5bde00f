package accountant

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// Review 67: the binomial tables that cover a range of counts (7f9b970)
// and calibrateEps0, the calibration that keeps only eps0 (c98cbe0).

func r67Same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// r67CheckCache checks the bookkeeping of pmfCache: the count is the
// tables' entries, order names each table once, no table is empty or
// longer than pmfCacheMax, and the limits hold but for the table in use.
func r67CheckCache(t *testing.T, what string) {
	t.Helper()
	c := &pmfCache
	c.Lock()
	defer c.Unlock()
	sum := 0
	for k, tab := range c.tables {
		if len(tab.v) == 0 || len(tab.v) > pmfCacheMax {
			t.Errorf("%s: table %+v of %d entries (at most pmfCacheMax = %d, not empty)", what, k, len(tab.v), pmfCacheMax)
		}
		sum += len(tab.v)
	}
	if sum != c.entries {
		t.Errorf("%s: the tables hold %d entries, the count says %d", what, sum, c.entries)
	}
	if len(c.order) != len(c.tables) {
		t.Errorf("%s: %d keys in order, %d tables", what, len(c.order), len(c.tables))
	}
	seen := map[pmfKey]bool{}
	for _, k := range c.order {
		if seen[k] {
			t.Errorf("%s: key %+v twice in order", what, k)
		}
		seen[k] = true
		if _, ok := c.tables[k]; !ok {
			t.Errorf("%s: key %+v in order has no table", what, k)
		}
	}
	if len(c.order) > maxPMFTables {
		t.Errorf("%s: %d tables kept, more than maxPMFTables", what, len(c.order))
	}
	if len(c.order) > 1 && c.entries > pmfCacheMax {
		t.Errorf("%s: %d tables of %d entries in all, past pmfCacheMax", what, len(c.order), c.entries)
	}
}

// r67Snap is what the cache holds for one law: where its table starts,
// its length, and the runs [a, b) of the m whose entries are computed.
type r67Snap struct {
	ok      bool
	lo, len int
	runs    [][2]int
}

// computed is the number of entries computed.
func (s r67Snap) computed() int {
	k := 0
	for _, r := range s.runs {
		k += r[1] - r[0]
	}
	return k
}

// has reports whether the entry of m is computed.
func (s r67Snap) has(m int) bool {
	for _, r := range s.runs {
		if r[0] <= m && m < r[1] {
			return true
		}
	}
	return false
}

// r67Table returns the snapshot of the table of (n, p), and checks that
// every entry it computed is logBinomPMF's bits: all of them in runs up
// to 1<<16 entries, else the first and last 64 of each run and every
// 97th (a copy at a wrong offset moves every one).
func r67Table(t *testing.T, n int, p float64) r67Snap {
	t.Helper()
	pmfCache.Lock()
	defer pmfCache.Unlock()
	tab, ok := pmfCache.tables[pmfKey{n, math.Float64bits(p)}]
	if !ok {
		return r67Snap{}
	}
	s := r67Snap{ok: true, lo: tab.lo, len: len(tab.v)}
	for i := 0; i < len(tab.v); {
		if tab.v[i] != tab.v[i] {
			i++
			continue
		}
		j := i
		for j < len(tab.v) && tab.v[j] == tab.v[j] {
			j++
		}
		s.runs = append(s.runs, [2]int{tab.lo + i, tab.lo + j})
		for k := i; k < j; k++ {
			if j-i > 1<<16 && k >= i+64 && k < j-64 && k%97 != 0 {
				continue
			}
			if w := logBinomPMF(tab.lo+k, n, p); !r67Same(tab.v[k], w) {
				t.Fatalf("the table's entry for m = %d (index %d of [%d, %d)) is %v, logBinomPMF %v", tab.lo+k, k, tab.lo, tab.lo+len(tab.v), tab.v[k], w)
			}
		}
		i = j
	}
	return s
}

// TestReview67PMFTableGrowth: one law's table through a script of
// requests that meet its ends exactly, grow it down and up (doubling),
// and leave it for ranges far away (starting afresh), then a range of
// pmfCacheMax+1 entries (not cached). After each: the window is
// logBinomPMF's bits with capacity its length; the table covers the
// request, holds at most pmfCacheMax entries, and every entry it computed
// is logBinomPMF's bits; where the union of the table and the request
// fits in pmfCacheMax the table kept every entry it had (and grew
// upwards to at least twice its length or the cap), else it started
// afresh at the request; the entries computed are those before (when
// kept) and the request's, no others; and the windows returned earlier
// still hold the same bits.
func TestReview67PMFTableGrowth(t *testing.T) {
	forgetSparseTables()
	defer forgetSparseTables()
	n, p := 1_234_567_891, 0.00042 // mean about 518519
	type held struct {
		w    pmfWindow
		bits []float64
	}
	var windows []held
	C := pmfCacheMax
	script := [][2]int{
		{500_000, 500_099},         // a table
		{500_100, 500_100},         // m0 = hi: up, doubling
		{499_999, 499_999},         // m1 = lo-1: down
		{499_000, 501_000},         // both ends
		{500_500, 500_600},         // inside
		{0, 10},                    // down to 0, far
		{560_000, 560_000},         // up, doubling to 2x
		{1_050_000, 1_050_000},     // up: more than half the cap
		{2_004_004, 2_004_004},     // m0 = hi, 2x past the cap, the union within it
		{C - 1, C - 1},             // the last entry the cap allows from 0
		{C, C},                     // one past: afresh
		{C + 5, C + 3*C/4},         // inside
		{C - 10, C - 10},           // down, the union 10 too many: afresh
		{C - 20, C - 11},           // down by 10, the union within the cap
		{5_000_000, 5_000_000 + 9}, // far
		{-5, 3},                    // m0 below 0
		{40, 39},                   // empty
	}
	for i, r := range script {
		m0, m1 := r[0], r[1]
		before := r67Table(t, n, p)
		w := logBinomPMFsFrom(n, p, m0, m1)
		a := max(m0, 0)
		if w.lo != a || len(w.v) != max(m1-a+1, 0) || cap(w.v) != len(w.v) {
			t.Fatalf("request %d [%d, %d]: window from %d of %d entries (capacity %d)", i, m0, m1, w.lo, len(w.v), cap(w.v))
		}
		for m := a; m <= m1; m++ {
			if x, y := w.at(m), logBinomPMF(m, n, p); !r67Same(x, y) {
				t.Fatalf("request %d [%d, %d]: entry %d = %v, logBinomPMF %v", i, m0, m1, m, x, y)
			}
		}
		windows = append(windows, held{w, append([]float64(nil), w.v...)})
		after := r67Table(t, n, p)
		if m1 < a {
			if after.ok != before.ok || after.lo != before.lo || after.len != before.len || after.computed() != before.computed() {
				t.Fatalf("request %d [%d, %d] (empty) changed the table: %+v -> %+v", i, m0, m1, before, after)
			}
			continue
		}
		lo, hi := after.lo, after.lo+after.len
		if !after.ok || lo > a || hi <= m1 || after.len > C {
			t.Fatalf("request %d [%d, %d]: table [%d, %d) (%d entries, cap %d)", i, m0, m1, lo, hi, after.len, C)
		}
		if before.ok {
			lo0, hi0 := before.lo, before.lo+before.len
			if min(lo0, a)+C >= max(hi0, m1+1) {
				// The union fits: every entry kept, at the same m.
				if lo > lo0 || hi < hi0 {
					t.Fatalf("request %d [%d, %d]: the union with [%d, %d) fits in the cap, but the table is [%d, %d)", i, m0, m1, lo0, hi0, lo, hi)
				}
				for _, r := range before.runs {
					for _, m := range []int{r[0], (r[0] + r[1]) / 2, r[1] - 1} {
						if !after.has(m) {
							t.Fatalf("request %d [%d, %d]: the entry of m = %d, computed before, is gone", i, m0, m1, m)
						}
					}
				}
				if m1 >= hi0 && after.len < min(2*before.len, C) {
					t.Errorf("request %d [%d, %d]: grew [%d, %d) upwards to %d entries, not min(2x, cap) = %d", i, m0, m1, lo0, hi0, after.len, min(2*before.len, C))
				}
				fresh := 0
				for m := a; m <= m1; m++ {
					if !before.has(m) {
						fresh++
					}
				}
				if got, want := after.computed(), before.computed()+fresh; got != want {
					t.Errorf("request %d [%d, %d]: %d entries computed, want %d (those before and the request's)", i, m0, m1, got, want)
				}
			} else {
				if lo != a {
					t.Errorf("request %d [%d, %d]: the union with [%d, %d) passes the cap, yet the table is [%d, %d), not afresh at %d", i, m0, m1, lo0, hi0, lo, hi, a)
				}
				if got := after.computed(); got != m1-a+1 {
					t.Errorf("request %d [%d, %d]: afresh, %d entries computed, want the request's %d", i, m0, m1, got, m1-a+1)
				}
			}
		}
		r67CheckCache(t, "after request")
		if t.Failed() {
			t.FailNow()
		}
	}
	// A small table, then a request far away longer than twice it: the
	// table afresh takes in the whole request.
	n2 := n + 1
	logBinomPMFsFrom(n2, p, 10, 12)
	w2 := logBinomPMFsFrom(n2, p, 3_000_000, 3_000_100)
	if s := r67Table(t, n2, p); !s.ok || s.lo != 3_000_000 || s.len < 101 || s.computed() != 101 {
		t.Errorf("afresh for a request longer than twice the table: %+v", s)
	}
	if !r67Same(w2.at(3_000_100), logBinomPMF(3_000_100, n2, p)) {
		t.Errorf("afresh: the last entry differs")
	}
	// A range longer than the cap is not cached: the table is untouched.
	before := r67Table(t, n, p)
	pmfCache.Lock()
	e0 := pmfCache.entries
	pmfCache.Unlock()
	big := logBinomPMFsFrom(n, p, 10, 10+C)
	if big.lo != 10 || len(big.v) != C+1 || !r67Same(big.at(10), logBinomPMF(10, n, p)) || !r67Same(big.at(10+C), logBinomPMF(10+C, n, p)) {
		t.Fatalf("uncached range [10, %d]: window from %d of %d entries", 10+C, big.lo, len(big.v))
	}
	after := r67Table(t, n, p)
	pmfCache.Lock()
	e1 := pmfCache.entries
	pmfCache.Unlock()
	if after.lo != before.lo || after.len != before.len || after.computed() != before.computed() || e1 != e0 {
		t.Errorf("a range of pmfCacheMax+1 entries changed the cache: %+v -> %+v, %d -> %d entries", before, after, e0, e1)
	}
	for i, h := range windows {
		for j, x := range h.w.v {
			if !r67Same(x, h.bits[j]) {
				t.Fatalf("window %d changed after later requests: entry %d was %v, is %v", i, h.w.lo+j, h.bits[j], x)
			}
		}
	}
}

// TestReview67PMFEviction: past maxPMFTables laws the oldest tables go;
// past pmfCacheMax entries in all the others go, never the one in use
// (even when it alone is a full table); the count of entries follows.
func TestReview67PMFEviction(t *testing.T) {
	forgetSparseTables()
	laws := maxPMFTables + 40
	for i := range laws {
		n, p := 10_000+i, 0.25
		w := logBinomPMFsFrom(n, p, 3, 12)
		if !r67Same(w.at(12), logBinomPMF(12, n, p)) {
			t.Fatalf("law %d: entry differs", i)
		}
	}
	r67CheckCache(t, "after many laws")
	for i := range laws {
		ok := r67Table(t, 10_000+i, 0.25).ok
		if want := i >= laws-maxPMFTables; ok != want {
			t.Fatalf("law %d of %d: kept %v, want %v", i, laws, ok, want)
		}
	}
	// Two large tables (few entries computed): the second pushes out the
	// first and every small one.
	a, b := 777_777, 888_888
	logBinomPMFsFrom(a, 0.5, 0, 0)
	logBinomPMFsFrom(a, 0.5, 1_199_999, 1_199_999) // grows to 1.2e6 entries
	r67CheckCache(t, "after the first large table")
	logBinomPMFsFrom(b, 0.5, 0, 0)
	logBinomPMFsFrom(b, 0.5, 1_199_999, 1_199_999)
	r67CheckCache(t, "after the second large table")
	if r67Table(t, a, 0.5).ok {
		t.Errorf("the first large table is still kept past the cap")
	}
	if s := r67Table(t, b, 0.5); !s.ok || s.len < 1_200_000 {
		t.Fatalf("the table in use was evicted or shrunk")
	}
	// The oldest table is the one in use when it grows past the cap with
	// the others: they go, it stays.
	forgetSparseTables()
	logBinomPMFsFrom(a, 0.5, 0, 0) // a first in order
	logBinomPMFsFrom(b, 0.5, 0, 0)
	logBinomPMFsFrom(b, 0.5, 1_199_999, 1_199_999)
	wa := logBinomPMFsFrom(a, 0.5, 1_199_990, 1_199_999)
	r67CheckCache(t, "after the oldest grew")
	if s := r67Table(t, a, 0.5); !s.ok || s.len < 1_200_000 || r67Table(t, b, 0.5).ok {
		t.Fatalf("the oldest table, in use, grew past the cap: kept %v (%d entries), the other kept %v", s.ok, s.len, r67Table(t, b, 0.5).ok)
	}
	if !r67Same(wa.at(1_199_999), logBinomPMF(1_199_999, a, 0.5)) {
		t.Fatalf("the oldest table, in use: entry differs")
	}
	// Another small table, then one of exactly pmfCacheMax entries in
	// use: the small one goes.
	logBinomPMFsFrom(b, 0.5, 0, 0)
	logBinomPMFsFrom(a, 0.5, 5, 5)
	w := logBinomPMFsFrom(a, 0.5, 5, 5+pmfCacheMax-1)
	r67CheckCache(t, "after a full table")
	if s := r67Table(t, a, 0.5); !s.ok || s.len != pmfCacheMax || s.computed() != pmfCacheMax {
		t.Fatalf("the full table in use: %v, %d entries, %d computed", s.ok, s.len, s.computed())
	}
	if r67Table(t, b, 0.5).ok {
		t.Errorf("another table kept beside a full one")
	}
	for _, m := range []int{5, 6, 1000, 5 + pmfCacheMax - 1} {
		if !r67Same(w.at(m), logBinomPMF(m, a, 0.5)) {
			t.Fatalf("full table: entry %d differs", m)
		}
	}
	forgetSparseTables()
}

// TestConcurrentReview67PMFWindows: goroutines ask for windows of one law
// in phases: near 0 (the table grows both ways), far above (it starts
// afresh, then grows), near 0 again (afresh), while each goroutine reads
// again the windows it was given in the phase before, arrays the table
// has left, as the others fill the new one. Every entry read is
// logBinomPMF's bits, and stays so. (Phases, not a random mix: a table
// that starts afresh takes twice the old one's length, so alternating
// far requests make each a 16 MB table, too slow under -race.) Run it
// with -race.
func TestConcurrentReview67PMFWindows(t *testing.T) {
	forgetSparseTables()
	defer forgetSparseTables()
	n, p := 800_000_000, 0.0009
	type held struct {
		w    pmfWindow
		bits []float64
	}
	const G = 4
	kept := make([][]held, G)
	for phase, region := range []int{0, 3_000_000, 0, 3_000_000} {
		var wg sync.WaitGroup
		errs := make(chan string, G)
		for g := range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(67, uint64(10*phase+g)))
				old := kept[g]
				kept[g] = nil
				for i := range 40 {
					if i < len(old) {
						h := old[i]
						for j, x := range h.w.v {
							if !r67Same(x, h.bits[j]) {
								errs <- "a window changed after it was returned"
								return
							}
						}
					}
					m0 := region + rng.IntN(30_000)
					m1 := m0 + rng.IntN(1200)
					w := logBinomPMFsFrom(n, p, m0, m1)
					if w.lo != m0 || len(w.v) != m1-m0+1 || cap(w.v) != len(w.v) {
						errs <- "window, length or capacity"
						return
					}
					for m := m0; m <= m1; m += 1 + rng.IntN(4) {
						if !r67Same(w.at(m), logBinomPMF(m, n, p)) {
							errs <- "entry differs from logBinomPMF"
							return
						}
					}
					if i%4 == 0 {
						kept[g] = append(kept[g], held{w, append([]float64(nil), w.v...)})
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("phase %d: %s", phase, e)
		}
		r67CheckCache(t, "after a phase")
		if s := r67Table(t, n, p); !s.ok || s.lo < region || s.lo >= region+30_000 {
			t.Fatalf("phase %d: the table starts at %d, not afresh in [%d, %d)", phase, s.lo, region, region+30_000)
		}
	}
}

// TestReview67CalibrateEps0Errors: calibrateEps0 refuses what Calibrate
// refuses, with the same error (text and kind) and eps0 0, whether it
// goes through Calibrate (rounds, floor) or checks the target itself.
func TestReview67CalibrateEps0Errors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ok := Target{Eps: 1, Delta: 1e-6, N: 100}
	with := func(f func(*Target)) Target { t := ok; f(&t); return t }
	cases := []struct {
		m  Mechanism
		tg Target
	}{
		{KRR(3), with(func(t *Target) { t.Eps = nan })},
		{KRR(3), with(func(t *Target) { t.Eps = 0 })},
		{KRR(3), with(func(t *Target) { t.Eps = -1 })},
		{KRR(3), with(func(t *Target) { t.Eps = inf })},
		{KRR(3), with(func(t *Target) { t.Delta = 0 })},
		{KRR(3), with(func(t *Target) { t.Delta = 1 })},
		{KRR(3), with(func(t *Target) { t.Delta = nan })},
		{KRR(3), with(func(t *Target) { t.N = 0 })},
		{KRR(3), with(func(t *Target) { t.N = -3 })},
		{KRRMech{K: 3, Eps0: 1}, ok},
		{KRRMech{K: 3, Eps0: 1}, with(func(t *Target) { t.Rounds = 2 })},
		{KRR(3), with(func(t *Target) { t.Rounds = -1 })},
		{KRR(3), with(func(t *Target) { t.Rounds = MaxRounds + 1 })},
		{KRR(3), with(func(t *Target) { t.Floor = -1 })},
		{KRR(3), with(func(t *Target) { t.Floor = MaxN + 1 })},
		{Generic(), with(func(t *Target) { t.Floor = 10 })},
		{Joint(KRR(3), KRR(4)), with(func(t *Target) { t.Floor = 10 })},
		{KRR(3), with(func(t *Target) { t.Eps = 0; t.Rounds = 3 })},
		{KRR(3), with(func(t *Target) { t.Eps = 0; t.Floor = 5 })},
		{Joint(KRRMech{K: 2, Eps0: 5}, KRR(3)), Target{Eps: 0.1, Delta: 1e-6, N: 2}}, // unreachable
	}
	for _, c := range cases {
		got, err := calibrateEps0(c.m, c.tg)
		want, werr := Calibrate(c.m, c.tg)
		if werr == nil {
			t.Fatalf("%s %+v: Calibrate accepts it (eps0 %v): not an error case", c.m, c.tg, want.Eps0)
		}
		if err == nil || err.Error() != werr.Error() || got != 0 {
			t.Errorf("%s %+v: calibrateEps0 = %v, %v; Calibrate: %v", c.m, c.tg, got, err, werr)
			continue
		}
		for _, kind := range []error{ErrInvalidArgument, ErrNotCalibratable, ErrUnreachable} {
			if errors.Is(err, kind) != errors.Is(werr, kind) {
				t.Errorf("%s %+v: errors.Is(%v) %v, Calibrate's %v", c.m, c.tg, kind, errors.Is(err, kind), errors.Is(werr, kind))
			}
		}
	}
}

// TestReview67CalibrateEps0Bits: calibrateEps0 is Calibrate's eps0, bit
// for bit, for compositions (with lower sets of their own, and WorstOf,
// which has none), a batch too small to amplify, and a horizon (through
// Calibrate); each on an empty memo, and again with both memos warm in
// either order.
func TestReview67CalibrateEps0Bits(t *testing.T) {
	cases := []struct {
		m  Mechanism
		tg Target
	}{
		{Joint(KRR(3), KRR(4)), Target{Eps: 0.2, Delta: 1e-6, N: 300}},
		{WorstOf(KRR(3), Generic()), Target{Eps: 0.5, Delta: 1e-6, N: 1000}},
		{Subsample(0.5, KRR(4)), Target{Eps: 0.5, Delta: 1e-6, N: 1000}},
		{KRR(3), Target{Eps: 1, Delta: 1e-6, N: 3}},
		{Joint(KRR(3), KRR(4)), Target{Eps: 1, Delta: 1e-5, N: 1}},
		{Generic(), Target{Eps: 1, Delta: 1e-6, N: 1000, Rounds: 5}},
		// The certificate in eps0 stops the search here: without it
		// (calibrateOne(..., false)) eps0 is 2 ulp higher.
		{KRR(2), Target{Eps: 4, Delta: 1e-10, N: 100_000}},
	}
	for i, c := range cases {
		ForgetMemo()
		got, err := calibrateEps0(c.m, c.tg)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.m, c.tg, err)
		}
		ForgetMemo()
		want, err := Calibrate(c.m, c.tg)
		if err != nil {
			t.Fatalf("%s %+v: Calibrate: %v", c.m, c.tg, err)
		}
		if !r67Same(got, want.Eps0) {
			t.Errorf("%s %+v: calibrateEps0 %v, Calibrate %v", c.m, c.tg, got, want.Eps0)
		}
		if i == 0 {
			// Warm: calibrateEps0 after Calibrate, and Calibrate after it.
			again, _ := calibrateEps0(c.m, c.tg)
			full, _ := Calibrate(c.m, c.tg)
			if !r67Same(again, want.Eps0) || !r67Same(full.Eps0, want.Eps0) || !r67Same(full.Achieved.Upper, want.Achieved.Upper) ||
				!r67Same(full.Achieved.Lower, want.Achieved.Lower) || full.Achieved.Tight != want.Achieved.Tight {
				t.Errorf("%s %+v: on warm memos calibrateEps0 %v and Calibrate %+v, on empty ones %+v", c.m, c.tg, again, full, want)
			}
		}
	}
}

// TestReview67EpsilonBoundsUpperOnly: epsilonBounds without the lower
// sets has epsilonOf's Upper (bits), Amplified and LocalEps, with Lower
// 0 and Tight false, whether amplified or not (n 1 and 5), for
// decompositions with several upper and lower sets and one with none
// (WorstOf), and whichever of the two runs first on an empty memo.
func TestReview67EpsilonBoundsUpperOnly(t *testing.T) {
	mechs := []Mechanism{KRR(3), Joint(KRR(3), KRR(4)), Parallel([]float64{0.3, 0.7}, KRR(3), Generic()), WorstOf(KRR(3), Generic()), Subsample(0.25, KRR(5))}
	k := 0
	for _, m := range mechs {
		for _, e0 := range []float64{0.5, 2, 8} {
			for _, n := range []int{1, 5, 1000} {
				if n == 1000 && e0 != 2 {
					continue
				}
				d, err := m.Decompose(e0)
				if err != nil {
					t.Fatal(err)
				}
				ForgetMemo()
				var full, up EpsilonResult
				if k++; k%2 == 0 {
					full, up = epsilonOf(d, n, 1e-6), epsilonBounds(d, n, 1e-6, false)
				} else {
					up = epsilonBounds(d, n, 1e-6, false)
					full = epsilonOf(d, n, 1e-6)
				}
				if !r67Same(up.Upper, full.Upper) || up.Amplified != full.Amplified || !r67Same(up.LocalEps, full.LocalEps) || up.Lower != 0 || up.Tight {
					t.Errorf("%s eps0 %v n %d: upper only %+v, epsilonOf %+v", m, e0, n, up, full)
				}
				if e, err := Epsilon(m, e0, n, 1e-6); err != nil || e != full {
					t.Errorf("%s eps0 %v n %d: Epsilon %+v (%v), epsilonOf %+v", m, e0, n, e, err, full)
				}
			}
		}
	}
}

// TestReview67CalibrateEps0Callers: the callers that keep only eps0 give
// the figures they gave when they called Calibrate (pinned from 8ba5efa,
// the commit before c98cbe0, to relative 1e-9, as
// calibration_pinned_test.go does): the horizon search, whose start is 1.25
// times one report's eps0, the basic_composition and kov15 baselines; and
// basic_composition and the single-report clone are Calibrate's eps0 of
// their targets, bit for bit.
func TestReview67CalibrateEps0Callers(t *testing.T) {
	ForgetMemo()
	for _, c := range []struct {
		m                   Mechanism
		tg                  Target
		horizon, kov, basic float64
	}{
		{KRR(3), Target{Eps: 2, Delta: 1e-5, N: 100, Rounds: 2}, 2.1425464120807387, 1.7595569366000472, 1.7595567767713125},
	} {
		h, _, err := searchRounds(c.m, c.tg)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.m, c.tg, err)
		}
		bs := calibrateBaselinesRounds(c.m, c.tg)
		k, b := bs[BaselineKOV15], bs[BaselineBasicComposition]
		if k == nil || b == nil {
			t.Fatalf("%s %+v: kov15 %v, basic %v", c.m, c.tg, k, b)
		}
		pinnedFigures(t, c.m.String(), []float64{h, *k, *b}, []float64{c.horizon, c.kov, c.basic})
		T := float64(c.tg.Rounds)
		one := Target{Eps: c.tg.Eps / T, Delta: c.tg.Delta / T, N: c.tg.N}
		if w, err := Calibrate(c.m, one); err != nil || !r67Same(w.Eps0, *b) {
			t.Errorf("%s %+v: basic_composition %v, Calibrate %v (%v)", c.m, one, *b, w.Eps0, err)
		}
	}
	tg := Target{Eps: 0.1, Delta: 1e-8, N: 5000}
	bs, err := CalibrateBaselines(KRR(20), tg)
	if err != nil || bs[BaselineClone] == nil {
		t.Fatalf("CalibrateBaselines: %v, %v", bs, err)
	}
	pinnedFigures(t, "clone", []float64{*bs[BaselineClone]}, []float64{1.006848914681892})
	if w, err := Calibrate(Generic(), tg); err != nil || !r67Same(w.Eps0, *bs[BaselineClone]) {
		t.Errorf("clone baseline %v, Calibrate(Generic()) %v (%v)", *bs[BaselineClone], w.Eps0, err)
	}
	// A floor the clone cannot carry: no clone baseline, as before.
	bs, err = CalibrateBaselines(KRR(3), Target{Eps: 0.5, Delta: 1e-6, N: 1000, Floor: 100})
	if err != nil || bs[BaselineClone] != nil {
		t.Errorf("CalibrateBaselines with a floor: clone %v, %v", bs[BaselineClone], err)
	}
}
