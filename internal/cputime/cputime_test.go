package cputime

import (
	"crypto/sha256"
	"runtime"
	"testing"
	"time"
)

// TestProcessCountsWork: hashing for 50 ms of wall time on an otherwise
// idle goroutine adds CPU time, and no more than the wall time of all
// the process's threads could hold.
func TestProcessCountsWork(t *testing.T) {
	t0, ok := Process()
	if !ok {
		t.Skip("no CPU time on this platform")
	}
	start := time.Now()
	b := make([]byte, 1<<10)
	for time.Since(start) < 50*time.Millisecond {
		sum := sha256.Sum256(b)
		b[0] = sum[0]
	}
	wall := time.Since(start)
	t1, _ := Process()
	// On a loaded machine the loop may get little of its 50 ms; any
	// positive amount shows the counter moves.
	if d := t1 - t0; d <= 0 || d > wall*time.Duration(runtime.NumCPU()+1) {
		t.Errorf("CPU time grew by %v over %v of wall time", d, wall)
	}
}
