package httpserver

import (
	"context"
	"math"
	"net"
	"sync"
	"time"
)

// Bucket is a token bucket: rate tokens per second up to burst. It lives
// only in memory, in the context of one connection, and is garbage when
// the connection closes.
type Bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

// NewBucket returns a full bucket of burst tokens refilled at rate per
// second on the clock now.
func NewBucket(rate float64, burst int, now func() time.Time) *Bucket {
	t := now()
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: t, now: now}
}

// Take removes n tokens if there are that many and returns 0, or returns
// how long to wait until there will be.
func (b *Bucket) Take(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	if el := t.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el*b.rate)
	}
	b.last = t
	need := float64(n)
	if b.tokens >= need {
		b.tokens -= need
		return 0
	}
	return time.Duration(math.Ceil((need - b.tokens) / b.rate * float64(time.Second)))
}

type connKey struct{}

// connState is what the shuffler keeps about a connection while it is
// open: its rate limiter, nothing else (no address, no time).
type connState struct {
	once sync.Once
	b    *Bucket
}

// ConnContext is an http.Server ConnContext hook that gives every
// connection its own rate-limit state; the shuffler's POST /v1/reports
// limits each connection separately when it is installed (New installs it), and not at all
// otherwise. The state holds no address and dies with the connection.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connState{})
}

// ConnBucket returns the connection's bucket, creating it with the given
// parameters on first use, or nil without ConnContext.
func ConnBucket(ctx context.Context, rate float64, burst int, now func() time.Time) *Bucket {
	cs, _ := ctx.Value(connKey{}).(*connState)
	if cs == nil {
		return nil
	}
	cs.once.Do(func() { cs.b = NewBucket(rate, burst, now) })
	return cs.b
}
