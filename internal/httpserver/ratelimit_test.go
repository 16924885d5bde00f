package httpserver

import (
	"testing"
	"time"
)

// TestBucket checks the token bucket against hand-computed waits.
func TestBucket(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBucket(2, 10, func() time.Time { return now })
	if d := b.Take(10); d != 0 {
		t.Fatalf("full bucket refused 10: %v", d)
	}
	if d := b.Take(4); d != 2*time.Second {
		t.Fatalf("empty bucket: wait %v for 4 at 2/s, want 2s", d)
	}
	now = now.Add(2 * time.Second)
	if d := b.Take(4); d != 0 {
		t.Fatalf("after 2 s: wait %v", d)
	}
	now = now.Add(time.Hour)
	if d := b.Take(11); d == 0 {
		t.Fatal("took more than the burst")
	}
}
