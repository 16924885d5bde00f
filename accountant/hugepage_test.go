package accountant

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestMakeHugeAdvises: with UseHugePages on, a large slice from makeHuge
// lies in a mapping that the kernel marks as advised for huge pages
// (VmFlags "hg" in /proc/self/smaps); lengths and capacities are make's.
// Skipped where the kernel has no transparent huge pages.
func TestMakeHugeAdvises(t *testing.T) {
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(b), "[never]") || thpDisabled {
		t.Skip("no transparent huge pages to ask for")
	}
	UseHugePages(true)
	defer UseHugePages(false)
	big := makeHuge[float64](0, 3<<20) // 24 MB
	if !hugeAdvised(t, uintptr(unsafe.Pointer(unsafe.SliceData(big)))+12<<20) {
		t.Error("the middle of a 24 MB slice is not in an advised mapping")
	}
	if len(big) != 0 || cap(big) != 3<<20 {
		t.Errorf("len %d cap %d, want 0 and %d", len(big), cap(big), 3<<20)
	}
	small := makeHuge[complex128](5, 7)
	if len(small) != 5 || cap(small) != 7 {
		t.Errorf("len %d cap %d, want 5 and 7", len(small), cap(small))
	}
}

// TestGodebugDisablesTHP: disablethp=1 in GODEBUG, its last setting
// winning, turns the advice off.
func TestGodebugDisablesTHP(t *testing.T) {
	for in, want := range map[string]bool{
		"":                          false,
		"disablethp=1":              true,
		"gctrace=1, disablethp=1":   true,
		"disablethp=0":              false,
		"disablethp=1,disablethp=0": false,
		"disablethp=0,disablethp=1": true,
		"xdisablethp=1":             false,
		"disablethp=10":             false,
	} {
		if got := godebugDisablesTHP(in); got != want {
			t.Errorf("GODEBUG %q: %v, want %v", in, got, want)
		}
	}
}

// hugeAdvised reports whether the mapping of this process that holds
// address x has VmFlags hg (madvise MADV_HUGEPAGE); it skips the test
// where /proc/self/smaps is missing.
func hugeAdvised(t *testing.T, x uintptr) bool {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fs := strings.Fields(line); len(fs) > 0 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":") {
			lo, hi, _ := strings.Cut(fs[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(x) >= a && uint64(x) < b
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(" "+strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))+" ", " hg ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping holds %#x", x)
	return false
}
