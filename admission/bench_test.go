package admission

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/internal/cputime"
)

// BenchmarkClient measures an app's side per token: Blind, then
// Finalize of the issuer's answer, and ParsePending (the rebuild of a
// persisted state after a crash), for requests of n pool keys (the
// issuer's evaluation is made outside the timer). cpu-ns/token is the
// process's CPU time per token, which other work on the machine does not
// inflate.
func BenchmarkClient(b *testing.B) {
	s := newTestServer(b)
	for _, n := range []int{1, 3, 21} {
		pools := make([]string, n)
		for i := range pools {
			pools[i] = poolKey(fmt.Sprint("pool", i), 1)
		}
		_, req, err := Blind(pools)
		if err != nil {
			b.Fatal(err)
		}
		resp := s.answer(b, req)
		b.Run(fmt.Sprintf("n=%d/blind", n), func(b *testing.B) {
			m := cputime.Start()
			for b.Loop() {
				if _, _, err := Blind(pools); err != nil {
					b.Fatal(err)
				}
			}
			m.Report(b, n, "token")
		})
		b.Run(fmt.Sprintf("n=%d/finalize", n), func(b *testing.B) {
			// Finalize of a fresh pending state against an answer for
			// another one costs the same: it cannot tell.
			p, _, err := Blind(pools)
			if err != nil {
				b.Fatal(err)
			}
			m := cputime.Start()
			for b.Loop() {
				if _, err := Finalize(p, resp); err != nil {
					b.Fatal(err)
				}
			}
			m.Report(b, n, "token")
		})
		b.Run(fmt.Sprintf("n=%d/restore", n), func(b *testing.B) {
			p, _, err := Blind(pools)
			if err != nil {
				b.Fatal(err)
			}
			enc, _ := p.MarshalBinary()
			m := cputime.Start()
			for b.Loop() {
				if _, err := ParsePending(enc); err != nil {
					b.Fatal(err)
				}
			}
			m.Report(b, n, "token")
		})
	}
}
