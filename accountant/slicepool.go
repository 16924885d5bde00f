package accountant

import (
	"sync"
	"unsafe"
)

// slicePool keeps the windows' scratch slices (window.go, windowfft.go)
// for reuse. Their contents are never read before they are written, so
// where a slice comes from changes no result.
//
// Near a large eps0 a window keeps every one of its L/2 coefficients
// (L ~ 6e5 for Laplace at eps0 = 20): some 35 MB of scratch per window.
// With a sync.Pool, which drops what it holds at garbage collections,
// those allocations themselves set off the collections that emptied the
// pool: allocating, zeroing and copying them, and the collections, were
// about 40% of `account delta --mech laplace --eps0 20 --n 1e6`. This
// pool keeps its slices across collections, at most poolSlots of them and
// budget bytes in all (the smallest go first), and hands out the smallest
// that is large enough. A slice it makes afresh is on huge pages where it
// is large (hugepage.go).
type slicePool[T any] struct {
	mu     sync.Mutex
	free   [][]T
	held   int // bytes in free
	budget int
}

// poolSlots is the most slices a pool keeps: two per window for each of
// a few windows at once.
const poolSlots = 8

// get returns an empty slice with capacity at least n.
func (sp *slicePool[T]) get(n int) []T {
	sp.mu.Lock()
	best := -1
	for i, s := range sp.free {
		if cap(s) >= n && (best < 0 || cap(s) < cap(sp.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		s := sp.free[best]
		sp.free = append(sp.free[:best], sp.free[best+1:]...)
		sp.held -= sp.bytes(s)
		sp.mu.Unlock()
		return s[:0]
	}
	sp.mu.Unlock()
	return makeHuge[T](0, n)
}

// put gives s back for reuse; its contents are not read again. A slice
// larger than the whole budget is left to the garbage collector.
func (sp *slicePool[T]) put(s []T) {
	b := sp.bytes(s)
	if b == 0 || b > sp.budget {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.free = append(sp.free, s)
	sp.held += b
	for len(sp.free) > poolSlots || sp.held > sp.budget {
		small := 0
		for i, f := range sp.free {
			if cap(f) < cap(sp.free[small]) {
				small = i
			}
		}
		sp.held -= sp.bytes(sp.free[small])
		sp.free = append(sp.free[:small], sp.free[small+1:]...)
	}
}

// forget drops every slice kept (ForgetMemo).
func (sp *slicePool[T]) forget() {
	sp.mu.Lock()
	sp.free, sp.held = nil, 0
	sp.mu.Unlock()
}

// bytes is the memory s's capacity holds.
func (sp *slicePool[T]) bytes(s []T) int {
	var z T
	return cap(s) * int(unsafe.Sizeof(z))
}

// The windows' pools: at most 64 + 32 + 32 MB kept after a large
// calibration (two windows at once at L ~ 6e5 need about 47, 23 and
// 9 MB), which ForgetMemo releases.
var (
	coefPool    = slicePool[halfCoef]{budget: 64 << 20}
	floatPool   = slicePool[float64]{budget: 32 << 20}
	complexPool = slicePool[complex128]{budget: 32 << 20}
)

// forgetSlicePools drops the windows' pooled scratch slices.
func forgetSlicePools() {
	coefPool.forget()
	floatPool.forget()
	complexPool.forget()
}
