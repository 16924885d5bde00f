package accountant

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// memoCall is one set of evaluate's arguments.
type memoCall struct {
	s          AtomSet
	n          int
	eps, hRel  float64
	wantLo     bool
	name, path string
}

// TestMemoReturnsTheComputation checks that evaluate, memo and all, returns
// the bracket of the computation itself (compute) bit for bit: on a first
// call, on a repeat, and on calls that differ from an earlier one in a
// single argument (n, eps, the step, wantLo, one atom's r, p or q), each of
// which changes the bracket, so a key that left that argument out would
// return the earlier call's bracket and fail. It covers both of the
// engine's paths (sparse and lattice).
func TestMemoReturnsTheComputation(t *testing.T) {
	ForgetMemo()
	set := func(k int, eps0 float64) AtomSet {
		d, err := KRR(k).Decompose(eps0)
		if err != nil {
			t.Fatal(err)
		}
		return d.Upper[0]
	}
	bases := []memoCall{
		{s: set(20, 6), n: 300, eps: 1, hRel: hRelStart, wantLo: true, name: "k-RR k=20 eps0=6", path: "sparse"},
		{s: set(4, 1), n: 100_000, eps: 0.02, hRel: hRelStart, wantLo: true, name: "k-RR k=4 eps0=1", path: "lattice"},
	}
	for _, base := range bases {
		if _, sparse := sparseExact(prepare(base.s, base.eps), base.n); sparse != (base.path == "sparse") {
			t.Fatalf("%s: sparse path %v, want the %s path", base.name, sparse, base.path)
		}
		variants := []memoCall{base}
		v := base
		v.n = 2 * base.n
		variants = append(variants, v)
		v = base
		v.eps = base.eps * 1.5
		variants = append(variants, v)
		v = base
		v.hRel = base.hRel / 4
		if base.path == "lattice" {
			variants = append(variants, v)
		}
		v = base
		v.wantLo = false
		if base.path == "lattice" {
			variants = append(variants, v)
		}
		v = base
		v.eps = base.eps * (1 + 1e-12) // beyond float32's precision
		variants = append(variants, v)
		for j, f := range []func(a *Atom){
			func(a *Atom) { a.R *= 0.9 },
			func(a *Atom) { a.P *= 0.9 },
			func(a *Atom) { a.Q *= 1.1 },
		} {
			for _, at := range []int{0, len(base.s) - 1} {
				v = base
				v.s = append(AtomSet(nil), base.s...)
				f(&v.s[at])
				v.name = fmt.Sprintf("%s, atom %d changed (%d)", base.name, at, j)
				variants = append(variants, v)
			}
		}
		first := compute(base.s, base.n, base.eps, base.hRel, base.wantLo)
		for i, c := range variants {
			want := compute(c.s, c.n, c.eps, c.hRel, c.wantLo)
			if i > 0 && want == first {
				t.Fatalf("%s variant %d: the bracket %+v does not change, so the variant checks nothing", base.name, i, want)
			}
			for rep := range 2 {
				if got := evaluate(c.s, c.n, c.eps, c.hRel, c.wantLo); got != want {
					t.Errorf("%s variant %d (n=%d eps=%g hRel=%g wantLo=%v) call %d: evaluate %+v, computation %+v", base.name, i, c.n, c.eps, c.hRel, c.wantLo, rep+1, got, want)
				}
			}
		}
	}
}

// TestForgetMemo checks that ForgetMemo empties the memo (the benchmarks
// and TestConcurrentQueries rely on it to compute again).
func TestForgetMemo(t *testing.T) {
	d, err := KRR(3).Decompose(2)
	if err != nil {
		t.Fatal(err)
	}
	key := memoKey(d.Upper[0], 500, 0.3, hRelStart, true)
	evaluate(d.Upper[0], 500, 0.3, hRelStart, true)
	if _, ok := memo.get(key); !ok {
		t.Fatal("an evaluation is not in the memo")
	}
	ForgetMemo()
	if _, ok := memo.get(key); ok {
		t.Fatal("ForgetMemo left an evaluation in the memo")
	}
}

// TestMemoBounded fills a memo past its bound and checks that the key
// bytes held stay within it, that the latest keys are found, and that a key
// of the old generation is found and moved to the current one.
func TestMemoBounded(t *testing.T) {
	m := newEvalMemo(1 << 14)
	key := func(i int) []byte {
		return memoKey(AtomSet{{R: float64(i), P: 1, Q: 1}}, i, 1, 1, true)
	}
	total := 3 * m.limit / len(key(0)) // three times what the memo may hold
	for i := range total {
		m.put(key(i), bracket{lo: float64(i), hi: float64(i + 1)})
	}
	held := 0
	for k := range m.cur {
		held += len(k)
	}
	for k := range m.old {
		held += len(k)
	}
	if held > m.limit {
		t.Fatalf("the memo holds %d key bytes, more than its limit %d", held, m.limit)
	}
	if held < m.limit/2 {
		t.Fatalf("the memo holds %d key bytes, less than half its limit %d: it drops too much", held, m.limit)
	}
	last := total - 1
	if b, ok := m.get(key(last)); !ok || b.lo != float64(last) {
		t.Fatalf("the last key: %+v, %v", b, ok)
	}
	// The oldest key still held sits in the old generation.
	oldest := -1
	for i := range total {
		if _, ok := m.old[string(key(i))]; ok {
			oldest = i
			break
		}
	}
	if oldest <= 0 {
		t.Fatalf("the oldest key held is %d: the old generation is empty or nothing was dropped", oldest)
	}
	if b, ok := m.get(key(oldest)); !ok || b.lo != float64(oldest) {
		t.Fatalf("key %d of the old generation: %+v, %v", oldest, b, ok)
	}
	if _, moved := m.cur[string(key(oldest))]; !moved {
		t.Fatalf("key %d was found in the old generation but not copied to the current one", oldest)
	}
	if _, ok := m.get(key(0)); ok {
		t.Fatal("key 0 is still held, past the bound")
	}
}

// TestConcurrentMemo evaluates the same points from several goroutines at
// once and checks every result against the computation; make test runs the
// TestConcurrent tests under the race detector.
func TestConcurrentMemo(t *testing.T) {
	ForgetMemo()
	d, err := KRR(8).Decompose(3)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Upper[0]
	want := make([]bracket, 8)
	for i := range want {
		want[i] = compute(s, 1000+i, 0.5, hRelStart, true)
	}
	got := make([]bracket, 4*len(want))
	parallelMap(len(got), func(i int) { got[i] = evaluate(s, 1000+i%len(want), 0.5, hRelStart, true) })
	for i, g := range got {
		if w := want[i%len(want)]; g != w || math.IsNaN(g.hi) {
			t.Errorf("call %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestComputeDeterministic checks that the computation gives the same bits
// every time, the premise of the memo (and of replicas that agree to the
// last digit). The lattice's points were once taken in a map's order, which
// changes from run to run, and its sums came out different in their last
// digits nearly every call.
func TestComputeDeterministic(t *testing.T) {
	d, err := KRR(8).Decompose(3)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Upper[0]
	if _, sparse := sparseExact(prepare(s, 0.5), 1000); sparse {
		t.Fatal("the case takes the sparse path; it is meant to check the lattice")
	}
	want := compute(s, 1000, 0.5, hRelStart, true)
	for i := range 10 {
		if got := compute(s, 1000, 0.5, hRelStart, true); got != want {
			t.Fatalf("call %d: %+v, first call %+v", i+2, got, want)
		}
	}
}

// TestConcurrentMemoComputesEachKeyOnce starts 8 goroutines behind a
// barrier on the same key: one computes, the others wait for its bracket
// and get the same one, and a second round finds it recorded. A compute
// that panics releases its waiters, one of which computes instead.
func TestConcurrentMemoComputesEachKeyOnce(t *testing.T) {
	m := newEvalMemo(1 << 20)
	key := memoKey(AtomSet{{R: 0.5, P: 0.7, Q: 0.3}}, 1000, 0.25, 0.5, true)
	var mu sync.Mutex
	computed := 0
	release := make(chan struct{})
	compute := func() bracket {
		mu.Lock()
		computed++
		mu.Unlock()
		<-release // hold the key while the others arrive
		return bracket{lo: 1, hi: 2}
	}
	const workers = 8
	var start, done sync.WaitGroup
	start.Add(1)
	got := make([]bracket, workers)
	for i := range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			got[i] = m.do(key, compute)
		}()
	}
	start.Done()
	time.Sleep(50 * time.Millisecond) // not needed for correctness: lets the waiters queue
	close(release)
	done.Wait()
	if computed != 1 {
		t.Fatalf("%d goroutines on one key computed it %d times, want 1", workers, computed)
	}
	for i, b := range got {
		if b != (bracket{lo: 1, hi: 2}) {
			t.Fatalf("goroutine %d got %+v", i, b)
		}
	}
	if b := m.do(key, func() bracket { t.Fatal("a recorded key computed again"); return bracket{} }); b.hi != 2 {
		t.Fatalf("recorded bracket %+v", b)
	}

	// A panic releases the waiters.
	key2 := memoKey(AtomSet{{R: 0.5, P: 0.7, Q: 0.3}}, 1001, 0.25, 0.5, true)
	entered := make(chan struct{})
	boom := make(chan struct{})
	go func() {
		defer func() { recover() }()
		m.do(key2, func() bracket { close(entered); <-boom; panic("compute failed") })
	}()
	<-entered
	res := make(chan bracket)
	go func() { res <- m.do(key2, func() bracket { return bracket{lo: 3, hi: 4} }) }()
	close(boom)
	select {
	case b := <-res:
		if b.hi != 4 {
			t.Fatalf("after a panic the waiter got %+v, want its own bracket", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was not released by a panicking compute")
	}
}
