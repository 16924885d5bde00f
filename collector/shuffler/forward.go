package shuffler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// outgoingBatch is a released batch waiting for the collector's
// acknowledgement.
type outgoingBatch struct {
	id     report.ID
	metric string
	n      int
}

// retryState is the in-memory backoff of one outgoing batch.
type retryState struct {
	attempts int
	next     time.Time
}

// backoff returns the wait before attempt number attempts+1: exponential
// from RetryMin, capped at RetryMax, with jitter in [50%, 100%] so that
// retries of several batches spread out.
func (s *Shuffler) backoff(attempts int) time.Duration {
	d := s.o.RetryMax
	if attempts < 30 {
		d = min(s.o.RetryMax, s.o.RetryMin<<(attempts-1))
	}
	return d/2 + rand.N(d/2+1)
}

// leaseSeconds is how long a replica holds an outgoing batch it sends
// (PostgreSQL store) without renewing, and leaseRenew how often it renews
// while the send lasts.
const (
	leaseSeconds = 60
	leaseRenew   = 20 * time.Second
)

// leasedError reports an outgoing batch another replica is sending,
// under a lease until until (zero: the batch is gone, acknowledged).
type leasedError struct{ until time.Time }

func (e *leasedError) Error() string { return "another replica is sending the batch" }

// forwardLoop delivers outgoing batches until ctx is done: each batch is
// retried with exponential backoff until the collector acknowledges it,
// then deleted. Batches left by a previous run are sent first.
func (s *Shuffler) forwardLoop(ctx context.Context) {
	state := map[report.ID]*retryState{}
	for {
		wait := time.Duration(-1)
		batches, err := s.st.outgoing(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("forwarding", "error", err)
			wait = s.o.RetryMax
		}
		live := map[report.ID]bool{}
		for _, b := range batches {
			if ctx.Err() != nil {
				return
			}
			live[b.id] = true
			st := state[b.id]
			if st == nil {
				st = &retryState{}
				state[b.id] = st
			}
			if now := time.Now(); st.next.After(now) {
				if d := st.next.Sub(now); wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			status, err := s.send(ctx, b)
			if err == nil {
				delete(state, b.id)
				delete(live, b.id)
				continue
			}
			if le := (*leasedError)(nil); errors.As(err, &le) {
				// Another replica sends it (or it is gone): look again
				// when its lease ends, in case that replica died.
				d := min(max(time.Until(le.until), 0)+time.Second, s.o.RetryMax)
				st.next = time.Now().Add(d)
				if wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			if ctx.Err() != nil {
				return
			}
			s.c.forwardFailures.Add(1)
			st.attempts++
			d := s.backoff(st.attempts)
			st.next = time.Now().Add(d)
			if wait < 0 || d < wait {
				wait = d
			}
			level := s.log.Warn
			if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
				// The collector refuses the batch (plan or token
				// mismatch): keep it and keep trying, so that fixing the
				// configuration delivers it.
				level = s.log.Error
			}
			level("batch not acknowledged; will retry", "batch", b.id.String(), "metric", b.metric, "reports", b.n, "attempt", st.attempts, "retry_in", d.Round(time.Millisecond), "error", err)
		}
		for id := range state {
			if !live[id] {
				delete(state, id)
			}
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-s.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// send delivers one batch; it returns nil once the collector acknowledged
// it and the batch was deleted, else the HTTP status (0 without one) and
// the error.
func (s *Shuffler) send(ctx context.Context, b outgoingBatch) (int, error) {
	body, busyUntil, err := s.st.claim(ctx, b.id, leaseSeconds)
	if err != nil {
		return 0, fmt.Errorf("reading batch: %w", err)
	}
	if body == nil {
		return 0, &leasedError{until: busyUntil}
	}
	actx, cancel := context.WithTimeout(ctx, s.o.ForwardTimeout)
	defer cancel()
	// The lease is renewed while the collector works on the batch, so
	// that a replica that dies leaves it to the others within a lease.
	var renewing sync.WaitGroup
	defer renewing.Wait()
	defer cancel()
	renewing.Go(func() {
		t := time.NewTicker(leaseRenew)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
				if err := s.st.renew(actx, b.id, leaseSeconds); err != nil && actx.Err() == nil {
					s.log.Warn("renewing the lease of a batch being sent", "batch", b.id.String(), "error", err)
				}
			}
		}
	})
	if status, err := s.post(actx, b, body); err != nil {
		return status, err
	}
	if err := s.st.acknowledged(ctx, b.id); err != nil {
		// Acknowledged but not deleted: the next attempt is a duplicate,
		// which the collector acknowledges without counting.
		return http.StatusOK, fmt.Errorf("deleting acknowledged batch: %w", err)
	}
	s.c.batchesForwarded.Add(1)
	s.log.Info("batch forwarded", "batch", b.id.String(), "metric", b.metric, "reports", b.n)
	return http.StatusOK, nil
}

// post delivers a batch's body to one collector URL after another
// (collectors.go) until one acknowledges it (200), and returns the last
// status and error otherwise.
func (s *Shuffler) post(ctx context.Context, b outgoingBatch, body []byte) (int, error) {
	var (
		status int
		err    error
	)
	for _, i := range s.col.order() {
		status, err = s.postTo(ctx, s.col.urls[i], body)
		if err == nil {
			s.col.mark(i, true)
			return status, nil
		}
		if ctx.Err() != nil || !failover(status) {
			return status, err
		}
		s.col.mark(i, false)
		if len(s.col.urls) > 1 {
			s.log.Warn("a collector did not take the batch; trying the next", "collector", s.col.urls[i], "batch", b.id.String(), "error", err)
		}
	}
	return status, err
}

// postTo sends a batch's body to the collector at base URL u.
func (s *Shuffler) postTo(ctx context.Context, u string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+"/v1/batches", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if s.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.o.Token)
	}
	s.c.sends.Add(1)
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("collector %s answered %s: %s", u, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp.StatusCode, nil
}
