//go:build audit

package accountant

import "testing"

// TestSparseExactSkipsKeepBitsDeep: TestSparseExactSkipsKeepBits on
// 6000 laws (about 15 s).
func TestSparseExactSkipsKeepBitsDeep(t *testing.T) {
	r51SparseCompare(t, 7, 6000)
}

// TestWindowSkipsKeepBitsDeep: r51WindowCompare on 300 sets, n up to
// 1e7 (about a minute).
func TestWindowSkipsKeepBitsDeep(t *testing.T) {
	r51WindowCompare(t, 7, 300, 1e7)
}
