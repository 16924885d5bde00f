//go:build !linux

package accountant

import "unsafe"

// adviseHuge does nothing where the kernel has no madvise MADV_HUGEPAGE.
func adviseHuge(p unsafe.Pointer, n uintptr) {}
