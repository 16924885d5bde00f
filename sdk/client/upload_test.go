package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestRetryAfter checks that a 429 with Retry-After delays the next upload
// by at least the server's delay, although the configured backoff is
// 100 times shorter, and that the reports then go through once.
func TestRetryAfter(t *testing.T) {
	f := newFakeServer(t, nil)
	var mu sync.Mutex
	var at []time.Time
	f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if n == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, false
		}
		return 0, nil, true
	}, nil)
	cfg, clk := clockConfig(f, t.TempDir())
	cfg.RetryMin, cfg.RetryMax = 10*time.Millisecond, 10*time.Millisecond
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 {
		t.Fatalf("%d POSTs, want 2", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Errorf("retried after %v, before Retry-After: 1", gap)
	}
	if st := p.Stats(); st.Retries != 1 || st.Uploaded != 1 {
		t.Errorf("stats = %+v, want 1 retry, 1 uploaded", st)
	}
}

// TestRetryStatuses checks that every answer but a 202 with the shuffler's
// JSON leaves the reports in the outbox to be sent again, and that 400 and
// 413 isolate the refused report and drop it alone.
func TestRetryStatuses(t *testing.T) {
	cases := map[string]struct {
		status int
		body   bool // answer 202 with a non-JSON body
	}{
		"500":              {status: http.StatusInternalServerError},
		"503":              {status: http.StatusServiceUnavailable},
		"200 (not 202)":    {status: http.StatusOK},
		"202 without JSON": {status: http.StatusAccepted, body: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
				if n <= 2 {
					return c.status, nil, false
				}
				return 0, nil, true
			}, nil)
			cfg, clk := clockConfig(f, t.TempDir())
			p := newProvider(t, cfg)
			recordPeriods(t, clk, 5, func(int) error {
				return p.Meter("app").Categorical("screen").Record(context.Background(), "home")
			})
			flush(t, p)
			if distinct, raw, _ := f.counts(); distinct != 5 || raw != 5 {
				t.Errorf("server: %d distinct, %d stored deliveries; want 5 and 5", distinct, raw)
			}
			if st := p.Stats(); st.Retries < 2 || st.Uploaded != 5 {
				t.Errorf("stats = %+v, want >= 2 retries and 5 uploaded", st)
			}
		})
	}
	for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			f := newFakeServer(t, nil)
			var poison report.ID
			var mu sync.Mutex
			f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
				mu.Lock()
				defer mu.Unlock()
				if n == 1 {
					poison = envs[3].ID
				}
				for _, e := range envs {
					if e.ID == poison {
						return status, nil, false
					}
				}
				return 0, nil, true
			}, nil)
			cfg, clk := clockConfig(f, t.TempDir())
			cfg.UploadDelay = time.Hour // only Flush uploads, all 10 at once
			p := newProvider(t, cfg)
			recordPeriods(t, clk, 10, func(int) error {
				return p.Meter("app").Categorical("screen").Record(context.Background(), "home")
			})
			flush(t, p)
			if distinct, _, _ := f.counts(); distinct != 9 {
				t.Errorf("server holds %d reports, want the 9 unrefused", distinct)
			}
			if st := p.Stats(); st.Dropped != 1 || st.Uploaded != 9 {
				t.Errorf("stats = %+v, want 1 dropped, 9 uploaded", st)
			}
		})
	}
}

// TestFlushContext checks that Flush against a dead server returns when
// its context is done, with the last upload error, and that the reports
// stay for later.
func TestFlushContext(t *testing.T) {
	f := newFakeServer(t, nil)
	down := true
	var mu sync.Mutex
	f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusBadGateway, nil, false
		}
		return 0, nil, true
	}, nil)
	cfg, clk := clockConfig(f, t.TempDir())
	p := newProvider(t, cfg)
	if err := p.Meter("app").Sum("bytes").Record(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := p.Flush(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush: %v, want DeadlineExceeded", err)
	}
	t.Logf("Flush: %v", err)
	mu.Lock()
	down = false
	mu.Unlock()
	flush(t, p)
	if distinct, _, _ := f.counts(); distinct != 1 {
		t.Errorf("server holds %d reports, want 1", distinct)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		"99999999":                      client.MaxRetryAfter,
		"Fri, 01 May 2026 12:00:30 GMT": 30 * time.Second,
		"Fri, 01 May 2026 11:00:00 GMT": 0,
		"Sat, 02 May 2026 12:00:00 GMT": client.MaxRetryAfter,
	}
	for v, want := range cases {
		if got := client.ParseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// TestBackoff checks the jittered exponential backoff: the k-th wait is in
// [b/2, b] with b = min(lo·2^(k-1), hi), and the draws are spread over it.
func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 5*time.Second
	for k := 1; k <= 70; k++ {
		b := hi
		if k < 10 && lo<<(k-1) < hi {
			b = lo << (k - 1)
		}
		var minSeen, maxSeen time.Duration = b, 0
		for range 200 {
			d := client.Backoff(lo, hi, k)
			if d < b/2 || d > b {
				t.Fatalf("failure %d: wait %v outside [%v, %v]", k, d, b/2, b)
			}
			minSeen, maxSeen = min(minSeen, d), max(maxSeen, d)
		}
		// 200 uniform draws all within the lowest or highest 20% of the
		// range has probability 2·0.8^200 ≈ 8e-20: the jitter is there.
		if span := b - b/2; minSeen > b/2+span/5 || maxSeen < b-span/5 {
			t.Errorf("failure %d: draws in [%v, %v], not spread over [%v, %v]", k, minSeen, maxSeen, b/2, b)
		}
	}
}
