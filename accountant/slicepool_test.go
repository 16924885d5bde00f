package accountant

import (
	"sync"
	"testing"
)

// TestSlicePoolKeepsWithinBudget: get hands out the smallest kept slice
// that is large enough (or a new one), never one too small, and the pool
// keeps at most poolSlots slices and its budget in bytes, dropping the
// smallest first.
func TestSlicePoolKeepsWithinBudget(t *testing.T) {
	sp := slicePool[float64]{budget: 1000 * 8}
	for _, n := range []int{10, 900, 50, 400, 30, 20, 5, 60, 70, 80, 2000} {
		sp.put(make([]float64, 3, n))
	}
	if len(sp.free) > poolSlots || sp.held > sp.budget {
		t.Fatalf("%d slices, %d bytes kept: at most %d and %d", len(sp.free), sp.held, poolSlots, sp.budget)
	}
	var held int
	for _, s := range sp.free {
		held += 8 * cap(s)
		if cap(s) == 2000 {
			t.Errorf("a slice over the whole budget was kept")
		}
	}
	if held != sp.held {
		t.Errorf("held %d, the slices kept hold %d", sp.held, held)
	}
	// The largest are kept: 900 was put before slices that pushed the
	// total over the budget.
	kept := map[int]bool{}
	for _, s := range sp.free {
		kept[cap(s)] = true
	}
	if !kept[900] {
		t.Fatalf("the largest slice within the budget was dropped: %v", kept)
	}
	for _, n := range []int{61, 1, 901} {
		want := -1
		for c := range kept {
			if c >= n && (want < 0 || c < want) {
				want = c
			}
		}
		s := sp.get(n)
		if len(s) != 0 || cap(s) < n || (want >= 0 && cap(s) != want) {
			t.Errorf("get(%d): len %d cap %d, want the smallest kept that fits (%d)", n, len(s), cap(s), want)
		}
		delete(kept, want)
	}
	sp.forget()
	if len(sp.free) != 0 || sp.held != 0 {
		t.Errorf("forget kept %d slices, %d bytes", len(sp.free), sp.held)
	}
}

// TestConcurrentSlicePool: goroutines get, fill and put back slices of
// the shared pool; no slice is handed to two at once (each checks its
// own marks after the others had time to write). Run it with -race.
func TestConcurrentSlicePool(t *testing.T) {
	sp := slicePool[int]{budget: 1 << 20}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				n := 1 + (i*37+g*11)%500
				s := sp.get(n)[:n]
				for j := range s {
					s[j] = g*1000 + i
				}
				for j := range s {
					if s[j] != g*1000+i {
						t.Errorf("goroutine %d: a slice in use was written by another", g)
						return
					}
				}
				sp.put(s)
			}
		}()
	}
	wg.Wait()
}
