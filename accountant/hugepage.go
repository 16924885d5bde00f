package accountant

import "unsafe"

// Large scratch on huge pages. A window that keeps every coefficient of a
// long lattice (hadamard:k=64 at eps0 = 20 and n = 1e8: L = 1,458,000)
// touches some 100 MB of fresh slices: its coefficients, their error
// bounds, the inverse FFT's input and output and the twiddle table. On
// 4 KB pages that was about 50,000 page faults, a third of the command's
// time, and the scan's table lookups, spread over the whole table, missed
// the TLB. Where the kernel offers transparent huge pages on request
// (Linux: "madvise", the common default, or "always"), makeHuge asks for
// them on the 2 MB pages that lie wholly inside a large slice.
//
// Nothing here can change a result: the advice changes only how the
// kernel backs the memory, which stays the Go heap's (the collector frees
// it as any slice), and the kernel may decline it.

// hugeMin is the smallest slice, in bytes, that makeHuge advises: one
// with at least one whole 2 MB page inside.
const hugeMin = 4 << 20

// makeHuge is make([]T, n, c), with the kernel asked to back the slice
// with huge pages where it is large.
func makeHuge[T any](n, c int) []T {
	s := make([]T, n, c)
	var z T
	if b := uintptr(c) * unsafe.Sizeof(z); b >= hugeMin {
		adviseHuge(unsafe.Pointer(unsafe.SliceData(s)), b)
	}
	return s
}
