package servertest

import (
	"context"
	"testing"
	"time"
)

// Poll polls cond every 50 ms until it holds, failing t after timeout (or
// when ctx ends) with what cond last said.
func Poll(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not after %v: %s", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitFor polls cond every 10 ms until it holds or 30 s pass.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
