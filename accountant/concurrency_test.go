package accountant

// Tests of the accountant's shared state under concurrent use: the twiddle
// cache, parallelMap, and the public queries that run on both. They are
// cheap so that `make test` can run them under the race detector
// (go test -race -run Concurrent), while the rest of the package, pure
// math, runs without it.

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// concurrentGoroutines is the number of goroutines each test starts behind
// one barrier: more than the cores of a small runner, so that they
// interleave, and few enough that the queries below take seconds under the
// race detector.
const concurrentGoroutines = 4

// runConcurrently runs f(g) for g in [0, concurrentGoroutines) on that many
// goroutines released together.
func runConcurrently(f func(g int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range concurrentGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(g)
		}()
	}
	close(start)
	wg.Wait()
}

func TestConcurrentTwiddleCache(t *testing.T) {
	// More lengths than the cache keeps, so that goroutines insert and
	// evict while others read.
	lengths := []int{64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024}
	if len(lengths) <= maxTables {
		t.Fatalf("%d lengths do not exceed maxTables = %d", len(lengths), maxTables)
	}
	// Ground truth, computed here as twiddleTable does: the entries must be
	// bit-identical whichever goroutine built the table.
	want := map[int][]complex128{}
	for _, L := range lengths {
		w := make([]complex128, L/2+1)
		for m := range w {
			s, c := math.Sincos(-2 * math.Pi * float64(m) / float64(L))
			w[m] = complex(c, s)
		}
		want[L] = w
	}
	var bad atomic.Int64
	runConcurrently(func(g int) {
		for round := range 3 {
			for i := range lengths {
				L := lengths[(i+g+round)%len(lengths)]
				tab := twiddleTable(L)
				if len(tab) != L/2+1 {
					bad.Add(1)
					continue
				}
				for m, v := range tab {
					if v != want[L][m] {
						bad.Add(1)
						break
					}
				}
			}
		}
	})
	if n := bad.Load(); n > 0 {
		t.Errorf("%d tables differ from the sequential ground truth", n)
	}
	c := &twiddleCache
	c.Lock()
	defer c.Unlock()
	if len(c.tables) > maxTables || len(c.order) != len(c.tables) {
		t.Errorf("cache holds %d tables with %d in its eviction order, want at most %d and equal", len(c.tables), len(c.order), maxTables)
	}
}

func TestConcurrentParallelMap(t *testing.T) {
	const n = 1000
	// Concurrent calls, each writing only its own slots: every index must
	// run exactly once per call.
	counts := make([][]int, concurrentGoroutines)
	runConcurrently(func(g int) {
		c := make([]int, n)
		parallelMap(n, func(i int) { c[i]++ })
		counts[g] = c
	})
	for g, cs := range counts {
		for i, c := range cs {
			if c != 1 {
				t.Fatalf("call %d: index %d ran %d times", g, i, c)
			}
		}
	}
	// One call runs at most GOMAXPROCS workers at once.
	limit := int64(runtime.GOMAXPROCS(0))
	var active, peak atomic.Int64
	parallelMap(n, func(int) {
		a := active.Add(1)
		for p := peak.Load(); a > p && !peak.CompareAndSwap(p, a); p = peak.Load() {
		}
		runtime.Gosched()
		active.Add(-1)
	})
	if p := peak.Load(); p > limit {
		t.Errorf("%d workers ran at once, GOMAXPROCS = %d", p, limit)
	}
}

func TestConcurrentQueries(t *testing.T) {
	// Small queries (tens of milliseconds each without the race detector)
	// on several lattice lengths; each mechanism has more than one atom
	// set, so every query runs parallelMap inside.
	type query struct {
		name string
		run  func() ([]float64, error)
	}
	epsilon := func(m Mechanism, eps0 float64, n int, delta float64) func() ([]float64, error) {
		return func() ([]float64, error) {
			r, err := Epsilon(m, eps0, n, delta)
			return []float64{r.Upper, r.Lower, r.LocalEps}, err
		}
	}
	queries := []query{
		{"epsilon krr10", epsilon(KRR(10), 1, 1000, 1e-3)},
		{"epsilon krr3", epsilon(KRR(3), 1, 300, 1e-3)},
		{"epsilon generic", epsilon(Generic(), 1, 1000, 1e-3)},
		{"epsilon joint", epsilon(Joint(KRR(3), KRR(4)), 2, 500, 1e-3)},
		{"delta krr5", func() ([]float64, error) {
			r, err := Delta(KRR(5), 1, 3000, 0.3)
			return []float64{r.Upper, r.Lower}, err
		}},
		// eps = 2: a fifth of the CPU of eps = 1 under -race, through
		// the same calls.
		{"calibrate krr4", func() ([]float64, error) {
			r, err := Calibrate(KRR(4), Target{Eps: 2, Delta: 1e-3, N: 1000})
			return []float64{r.Eps0, r.Achieved.Upper}, err
		}},
	}
	got := make([][][]float64, concurrentGoroutines)
	errs := make([][]error, concurrentGoroutines)
	// Without the memo (memo.go), so that the goroutines run the engine's
	// shared state and the memo itself at once, and so that the ground
	// truth below is computed again.
	ForgetMemo()
	runConcurrently(func(g int) {
		got[g] = make([][]float64, len(queries))
		errs[g] = make([]error, len(queries))
		for i := range queries {
			j := (i + g) % len(queries)
			got[g][j], errs[g][j] = queries[j].run()
		}
	})
	// The sequential ground truth, bit for bit: the engine is a pure
	// function (memo.go), so a data race is the only way to differ.
	ForgetMemo()
	for j, q := range queries {
		want, err := q.run()
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for g := range got {
			if errs[g][j] != nil {
				t.Errorf("%s, goroutine %d: %v", q.name, g, errs[g][j])
				continue
			}
			for k := range want {
				if got[g][j][k] != want[k] {
					t.Errorf("%s, goroutine %d: result %v, sequential %v", q.name, g, got[g][j], want)
					break
				}
			}
		}
	}
}
