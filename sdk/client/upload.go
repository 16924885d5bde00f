package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// maxRetryAfter caps a server's Retry-After, so that a bogus header cannot
// stop uploads for days.
const maxRetryAfter = time.Hour

// uploader sends pending envelopes to the shuffler. One batch is in flight
// at a time (sendMu), whether the background loop or Flush sends it; the
// retry state is shared, so Flush honours a Retry-After the loop received.
type uploader struct {
	p   *Provider
	url string

	kick chan struct{} // capacity 1: "there is something to send"

	sendMu sync.Mutex // held across Pending, POST and Ack

	mu        sync.Mutex // guards the fields below
	notBefore time.Time  // no POST before this time (backoff, Retry-After)
	failures  int        // consecutive failed attempts
	batch     int        // current batch size: halves on 413, grows back
	lastErr   error
}

// uploadError is a failed POST.
type uploadError struct {
	status     int           // HTTP status, 0 for a transport error
	retryAfter time.Duration // from a 429 or 503
	err        error
}

func (e *uploadError) Error() string { return e.err.Error() }
func (e *uploadError) Unwrap() error { return e.err }

// ackBody is the shuffler's 202 answer.
type ackBody struct {
	Accepted   *int64 `json:"accepted"`
	Duplicates *int64 `json:"duplicates"`
	Rejected   *int64 `json:"rejected"`
}

func newUploader(p *Provider) (*uploader, error) {
	u, err := url.JoinPath(p.cfg.Endpoint, ReportsPath)
	if err != nil {
		return nil, fmt.Errorf("%w: endpoint %q: %v", ErrBadConfig, p.cfg.Endpoint, err)
	}
	return &uploader{p: p, url: u, kick: make(chan struct{}, 1), batch: p.cfg.BatchSize}, nil
}

// notify tells the loop that a report is waiting.
func (u *uploader) notify() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// run is the background loop: it uploads UploadDelay after a closing
// committed a report (so that the reports of a burst of closings go in one
// request), and every UploadInterval closes the periods that ended and
// uploads (also reports left from an earlier run), until ctx is
// cancelled.
func (u *uploader) run(ctx context.Context) {
	tick := time.NewTicker(u.p.cfg.UploadInterval)
	defer tick.Stop()
	if u.p.cfg.PlanRefresh > 0 && u.p.cfg.Plan == nil {
		// The plan is refreshed apart, so that a slow collector never
		// holds uploads back; run returns once it has stopped.
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			t := time.NewTicker(u.p.cfg.PlanRefresh)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if _, err := u.p.RefreshPlan(ctx); err != nil && ctx.Err() == nil {
					u.p.log.Warn("blanket plan refresh; reporting by the plan in use", "error", err)
				}
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// The tick also closes the periods that ended since the last
			// Record, so that an app that stops recording still reports.
			if err := u.p.closePeriods(ctx); err != nil && ctx.Err() == nil {
				u.p.log.Warn("blanket closing periods", "error", err)
			}
		case <-u.kick:
			if !sleep(ctx, u.p.cfg.UploadDelay) {
				return
			}
		}
		if err := u.drain(ctx); err != nil && ctx.Err() == nil {
			u.p.log.Warn("blanket upload", "error", err)
		}
	}
}

// drain uploads until the outbox has nothing pending, retrying failures
// with backoff, until ctx is done.
func (u *uploader) drain(ctx context.Context) error {
	for {
		if err := u.waitTurn(ctx); err != nil {
			return err
		}
		done, err := u.step(ctx)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w (last upload error: %v)", ctx.Err(), err)
		}
		if done {
			return nil
		}
	}
}

// waitTurn sleeps until the backoff allows the next attempt.
func (u *uploader) waitTurn(ctx context.Context) error {
	u.mu.Lock()
	d := time.Until(u.notBefore)
	last := u.lastErr
	u.mu.Unlock()
	if d <= 0 {
		return ctx.Err()
	}
	if !sleep(ctx, d) {
		if last != nil {
			return fmt.Errorf("%w (last upload error: %v)", ctx.Err(), last)
		}
		return ctx.Err()
	}
	return nil
}

// step sends one batch. It returns done when nothing was pending.
func (u *uploader) step(ctx context.Context) (done bool, err error) {
	u.sendMu.Lock()
	defer u.sendMu.Unlock()
	u.mu.Lock()
	n, wait := u.batch, time.Until(u.notBefore)
	u.mu.Unlock()
	if wait > 0 {
		// Another drain failed while this one waited for sendMu.
		return false, nil
	}
	envs, err := u.p.outbox.Pending(ctx, n)
	if err != nil {
		u.failed(err, 0)
		return false, err
	}
	if len(envs) == 0 {
		return true, nil
	}
	ack, err := u.post(ctx, envs)
	if err == nil {
		ids := make([]report.ID, len(envs))
		for i := range envs {
			ids[i] = envs[i].ID
		}
		// After the 202 the shuffler holds the reports; if Ack fails or we
		// crash before it, they are sent again and dropped as duplicates.
		if err := u.p.outbox.Ack(ctx, ids); err != nil {
			u.failed(err, 0)
			return false, err
		}
		u.p.stats.uploaded.Add(int64(len(envs)))
		u.p.stats.accepted.Add(*ack.Accepted)
		u.p.stats.duplicates.Add(*ack.Duplicates)
		u.p.stats.rejected.Add(*ack.Rejected)
		u.mu.Lock()
		u.failures, u.lastErr = 0, nil
		u.batch = min(2*u.batch, u.p.cfg.BatchSize)
		u.mu.Unlock()
		return false, nil
	}
	var ue *uploadError
	if errors.As(err, &ue) && (ue.status == http.StatusBadRequest || ue.status == http.StatusRequestEntityTooLarge) {
		// The body was refused as a whole. Halve the batch until the
		// offending envelope is alone, then drop it: retrying it would
		// block the queue forever.
		if len(envs) > 1 {
			u.mu.Lock()
			u.batch = max(1, len(envs)/2)
			u.mu.Unlock()
			return false, nil
		}
		if aerr := u.p.outbox.Ack(ctx, []report.ID{envs[0].ID}); aerr != nil {
			u.failed(aerr, 0)
			return false, aerr
		}
		u.p.stats.dropped.Add(1)
		u.p.log.Warn("blanket upload: report refused, dropped", "metric", envs[0].Metric, "id", envs[0].ID, "error", err)
		return false, nil
	}
	var ra time.Duration
	if ue != nil {
		ra = ue.retryAfter
	}
	u.failed(err, ra)
	return false, err
}

// failed records a failed attempt and schedules the next one: after
// retryAfter (with up to 10% jitter) when the server asked, else after an
// exponential backoff with jitter.
func (u *uploader) failed(err error, retryAfter time.Duration) {
	u.p.stats.retries.Add(1)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failures++
	u.lastErr = err
	var d time.Duration
	if retryAfter > 0 {
		d = retryAfter + time.Duration(rand.Int64N(int64(retryAfter)/10+1))
	} else {
		d = backoff(u.p.cfg.RetryMin, u.p.cfg.RetryMax, u.failures)
	}
	u.notBefore = time.Now().Add(d)
}

// backoff returns the wait after the failures-th consecutive failure:
// "equal jitter" on min·2^(failures-1) capped at max, i.e. a uniform draw
// from [b/2, b]. The floor keeps a fleet from retrying at once; the jitter
// spreads it.
func backoff(lo, hi time.Duration, failures int) time.Duration {
	b := hi
	if failures < 62 {
		if s := lo << (failures - 1); s > 0 && s < hi {
			b = s
		}
	}
	half := b / 2
	return half + time.Duration(rand.Int64N(int64(b-half)+1))
}

// post uploads envs and decodes the acknowledgement. Only a 202 with the
// shuffler's JSON counts as an acknowledgement: a captive portal or proxy
// answering 200 is not the shuffler.
func (u *uploader) post(ctx context.Context, envs []report.Envelope) (*ackBody, error) {
	body := report.EncodeEnvelopes(envs)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, bytes.NewReader(body))
	if err != nil {
		return nil, &uploadError{err: err}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := u.p.hc.Do(req)
	if err != nil {
		return nil, &uploadError{err: fmt.Errorf("POST %s: %w", u.url, err)}
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, &uploadError{status: resp.StatusCode, err: fmt.Errorf("POST %s: %s: reading the answer: %w", u.url, resp.Status, err)}
	}
	if resp.StatusCode != http.StatusAccepted {
		e := &uploadError{status: resp.StatusCode, err: fmt.Errorf("POST %s: %s: %.200s", u.url, resp.Status, bytes.TrimSpace(rb))}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			e.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		return nil, e
	}
	var ack ackBody
	if err := json.Unmarshal(rb, &ack); err != nil || ack.Accepted == nil || ack.Duplicates == nil || ack.Rejected == nil {
		return nil, &uploadError{status: resp.StatusCode, err: fmt.Errorf("POST %s: 202 without the shuffler's {accepted, duplicates, rejected}: %.200s", u.url, rb)}
	}
	if got := *ack.Accepted + *ack.Duplicates + *ack.Rejected; got != int64(len(envs)) {
		u.p.log.Warn("blanket upload: acknowledgement counts do not add up", "sent", len(envs), "accepted", *ack.Accepted, "duplicates", *ack.Duplicates, "rejected", *ack.Rejected)
	}
	return &ack, nil
}

// parseRetryAfter parses a Retry-After value, delay-seconds or an HTTP
// date, capped at maxRetryAfter; 0 when absent or invalid.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
