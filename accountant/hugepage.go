package accountant

import (
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Large scratch on huge pages, for short-lived processes. A window that
// keeps every coefficient of a long lattice (hadamard:k=64 at eps0 = 20
// and n = 1e8: L = 1,458,000) touches some 100 MB of fresh slices: its
// coefficients, their error bounds, the inverse FFT's input and output
// and the twiddle table. On 4 KB pages that was about 50,000 page faults,
// a third of the command's time, and the scan's table lookups, spread over
// the whole table, missed the TLB. Where the kernel offers transparent
// huge pages on request (Linux: "madvise", the common default, or
// "always"), makeHuge asks for them on the 2 MB pages that lie wholly
// inside a large slice.
//
// Only when UseHugePages turned it on: the command line's one-shot
// commands do (blanket account, blanket plan), servers do not. The advice
// stays on the heap's addresses after the garbage collector frees the
// slice, so other allocations come to live on advised memory too, and Go's
// runtime stopped advising its heap for what that did to long-running
// processes: page faults stalled on the kernel's compaction
// (golang/go#61718) and memory the runtime had returned came back when the
// kernel merged pages (golang/go#64332). A process started with
// GODEBUG=disablethp=1, which asks the runtime to keep the heap off huge
// pages, is never advised.
//
// Nothing here can change a result: the advice changes only how the
// kernel backs the memory, which stays the Go heap's (the collector frees
// it as any slice), and the kernel may decline it.

// hugeMin is the smallest slice, in bytes, that makeHuge advises: one
// with at least one whole 2 MB page inside.
const hugeMin = 4 << 20

// huge is whether makeHuge advises (UseHugePages). A mutex, not
// sync/atomic: the Makefile's race run compiles the accountant
// uninstrumented, where the detector cannot see atomics (make test checks
// that the package uses none).
var huge struct {
	sync.Mutex
	on bool
}

// thpDisabled is whether GODEBUG asks for no huge pages (disablethp=1).
var thpDisabled = godebugDisablesTHP(os.Getenv("GODEBUG"))

// UseHugePages lets the accountant ask the kernel for transparent huge
// pages for its large scratch slices (on Linux; a no-op elsewhere, and
// under GODEBUG=disablethp=1). It is off by default; turn it on only in a
// short-lived process (accountant/hugepage.go says why). No result
// depends on it.
func UseHugePages(on bool) {
	huge.Lock()
	huge.on = on && !thpDisabled
	huge.Unlock()
}

// hugeOn reports whether makeHuge advises.
func hugeOn() bool {
	huge.Lock()
	defer huge.Unlock()
	return huge.on
}

// godebugDisablesTHP reports whether a GODEBUG value sets disablethp=1
// (its last setting wins, as in the runtime).
func godebugDisablesTHP(godebug string) bool {
	off := false
	for _, kv := range strings.Split(godebug, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k == "disablethp" {
			off = v == "1"
		}
	}
	return off
}

// makeHuge is make([]T, n, c), with the kernel asked to back the slice
// with huge pages where it is large and UseHugePages is on.
func makeHuge[T any](n, c int) []T {
	s := make([]T, n, c)
	var z T
	if b := uintptr(c) * unsafe.Sizeof(z); b >= hugeMin && hugeOn() {
		adviseHuge(unsafe.Pointer(unsafe.SliceData(s)), b)
	}
	return s
}
