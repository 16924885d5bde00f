package accountant

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestMakeHugeAdvises: a large slice from makeHuge lies in a mapping that
// the kernel marks as advised for huge pages (VmFlags "hg" in
// /proc/self/smaps), and a small one is left alone.
func TestMakeHugeAdvises(t *testing.T) {
	big := makeHuge[float64](0, 3<<20) // 24 MB
	p := uintptr(unsafe.Pointer(unsafe.SliceData(big))) + 12<<20
	if flags, ok := vmFlags(t, p); !ok {
		t.Fatalf("no mapping holds %#x", p)
	} else if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("a 24 MB slice's mapping has VmFlags %q, without hg", flags)
	}
	if len(big) != 0 || cap(big) != 3<<20 {
		t.Errorf("len %d cap %d, want 0 and %d", len(big), cap(big), 3<<20)
	}
	small := makeHuge[complex128](5, 7)
	if len(small) != 5 || cap(small) != 7 {
		t.Errorf("len %d cap %d, want 5 and 7", len(small), cap(small))
	}
}

// vmFlags returns the VmFlags of the mapping of this process that holds
// address p.
func vmFlags(t *testing.T, p uintptr) (string, bool) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, hi, _ := strings.Cut(fields[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(p) >= a && uint64(p) < b
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), true
		}
	}
	return "", false
}
