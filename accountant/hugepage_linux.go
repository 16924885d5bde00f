package accountant

import (
	"syscall"
	"unsafe"
)

// adviseHuge asks the kernel (madvise MADV_HUGEPAGE) to back the 2 MB
// pages that lie wholly inside [p, p+n) with transparent huge pages. Pages
// already touched keep their 4 KB pages until the kernel's khugepaged
// collapses them; the error, if any (a kernel without THP), is ignored:
// the memory is then used as it is.
func adviseHuge(p unsafe.Pointer, n uintptr) {
	const huge = 2 << 20
	start := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + n) &^ (huge - 1)
	if end <= start {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start), syscall.MADV_HUGEPAGE)
}
