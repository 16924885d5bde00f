// Package cputime reads the CPU time the process has used, so that a
// benchmark can report what an operation costs in CPU beside its wall
// time, which other work on a shared machine inflates:
//
//	m := cputime.Start()
//	for b.Loop() { ... }
//	m.Report(b, 1, "") // cpu-ns/op
package cputime

import "testing"

// Meter measures the CPU time of a benchmark's loop.
type Meter struct {
	t0 int64
	ok bool
}

// Start begins a measurement.
func Start() Meter {
	t0, ok := Process()
	return Meter{t0: int64(t0), ok: ok}
}

// Report reports the CPU time since Start per operation of b
// ("cpu-ns/op") and, when an operation handles n > 1 items, per item
// ("cpu-ns/<item>"). It reports nothing where Process does not work.
func (m Meter) Report(b *testing.B, n int, item string) {
	t1, ok := Process()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	perOp := float64(int64(t1)-m.t0) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	if n > 1 {
		b.ReportMetric(perOp/float64(n), "cpu-ns/"+item)
	}
}
