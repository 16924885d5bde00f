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

	"github.com/blanket-dp/blanket/admission"
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
	// unanswered is the error of the last request to the server when
	// the server did not answer it (a transport error, a timeout: the
	// plan fetch at start or an upload), nil once it answered one.
	// Shutdown does not try an upload while it is set.
	unanswered error
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
	// Errors names rejected envelopes by their index in the upload, with
	// the reason and, for some, a code (codeToken...); the shuffler names
	// only the first few.
	Errors []struct {
		Index int    `json:"index"`
		Error string `json:"error"`
		Code  string `json:"code"`
	} `json:"errors"`
}

// The codes of the shuffler's refusals of an envelope's admission token
// (ackBody.Errors).
const (
	// codeTokenMissing: the envelope carried no token, and the shuffler
	// requires one.
	codeTokenMissing = admission.UploadTokenMissing
	// codeTokenInvalid: the token does not verify for the envelope's pool
	// key.
	codeTokenInvalid = admission.UploadTokenInvalid
	// codeTokenSpent: the token was spent with another envelope.
	codeTokenSpent = admission.UploadTokenSpent
)

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
// request) or admission tokens were stored, and every UploadInterval
// closes the periods that ended and uploads (also reports left from an
// earlier run), until ctx is cancelled. Beside it run the plan refresh
// and, with Config.Credential, the fetching of admission tokens.
func (u *uploader) run(ctx context.Context) {
	tick := time.NewTicker(u.p.cfg.UploadInterval)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait() // run returns once the loops below have stopped
	if u.p.admit != nil {
		// Admission tokens are fetched apart, at start and every
		// UploadInterval, so that a slow issuer never holds uploads back.
		wg.Go(func() {
			t := time.NewTicker(u.p.cfg.UploadInterval)
			defer t.Stop()
			for {
				u.admit(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	if u.p.cfg.PlanRefresh > 0 && u.p.cfg.Plan == nil {
		// The plan is refreshed apart, so that a slow collector never
		// holds uploads back.
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

// admit runs the admitter once (a round of its work, admission.go) and
// wakes the loop when it stored a token, so that the envelopes waiting
// for it go.
func (u *uploader) admit(ctx context.Context) {
	granted, err := u.p.admit.run(ctx)
	if err != nil && ctx.Err() == nil {
		u.p.log.Warn("blanket admission tokens", "error", err)
	}
	if granted {
		u.notify()
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
	var envs []report.Envelope
	if u.p.admit != nil {
		// Only envelopes with their pool key's token: the others wait
		// for it without holding these back.
		envs, err = u.p.outbox.PendingWithToken(ctx, n)
	} else {
		envs, err = u.p.outbox.Pending(ctx, n)
	}
	if err != nil {
		u.failed(ctx, err, 0)
		return false, err
	}
	if len(envs) == 0 {
		return true, nil
	}
	ids := make([]report.ID, len(envs))
	for i := range envs {
		ids[i] = envs[i].ID
	}
	// Marked before the POST, so that a refusal of an envelope an upload
	// without an answer carried (the shuffler may hold it) is told apart.
	sentBefore, err := u.p.outbox.Sending(ctx, ids)
	if err != nil {
		u.failed(ctx, err, 0)
		return false, err
	}
	ack, err := u.post(ctx, envs)
	var ue *uploadError
	if !errors.As(err, &ue) || ue.status != 0 {
		u.answered()
	}
	if err == nil {
		// After the 202 the shuffler holds the reports it did not refuse;
		// if Ack fails or we crash before it, they are sent again and
		// dropped as duplicates (the refused ones refused again).
		return false, u.settle(ctx, envs, sentBefore, ack)
	}
	if ue != nil && (ue.status == http.StatusBadRequest || ue.status == http.StatusRequestEntityTooLarge) {
		// The body was refused as a whole. Halve the batch until the
		// offending envelope is alone, then drop it: retrying it would
		// block the queue forever.
		if len(envs) > 1 {
			u.mu.Lock()
			u.batch = max(1, len(envs)/2)
			u.mu.Unlock()
			return false, nil
		}
		if aerr := u.p.outbox.Ack(ctx, []report.ID{envs[0].ID}, UploadDropped); aerr != nil {
			u.failed(ctx, aerr, 0)
			return false, aerr
		}
		u.p.stats.dropped.Add(1)
		u.p.drop(refusedDrop(envs[0], err.Error(), ""))
		return false, nil
	}
	var ra time.Duration
	if ue != nil {
		ra = ue.retryAfter
		if ue.status == 0 && ctx.Err() == nil {
			u.noAnswer(err)
		}
	}
	u.failed(ctx, err, ra)
	return false, err
}

// settle processes the shuffler's 202 answer ack to the upload of envs:
// each envelope leaves the outbox, its ledger entries marked with what
// became of it (Outbox.Ack):
//
//   - refused by name, on its first upload: UploadRefused, its charge
//     taken back (the shuffler refuses before storing);
//   - refused by name after an earlier upload that did not settle it
//     (sentBefore): UploadUnknown, charged, since the shuffler may hold
//     that upload's copy (a retry after the period's deadline is refused
//     as late whether or not the first one was stored);
//   - the others: UploadAcknowledged.
//
// The shuffler names only the first few refusals. When every envelope it
// did not name was refused too (it refused all it did not name as
// accepted or duplicate), they are refused as above, without a reason;
// otherwise the unnamed refusals cannot be told from the acknowledged
// reports, and the envelopes not named are all UploadUnknown, charged.
// Every refusal is a Drop (of an unknown metric when it was not named).
func (u *uploader) settle(ctx context.Context, envs []report.Envelope, sentBefore []bool, ack *ackBody) error {
	named := map[int]string{}
	codes := map[int]string{}
	for _, e := range ack.Errors {
		if e.Index >= 0 && e.Index < len(envs) {
			named[e.Index], codes[e.Index] = e.Error, e.Code
		}
	}
	var refused, others []int
	for i := range envs {
		if _, ok := named[i]; ok {
			refused = append(refused, i)
		} else {
			others = append(others, i)
		}
	}
	unnamed := int(*ack.Rejected) - len(named)
	var acked, unknown []int
	switch {
	case unnamed <= 0:
		acked, unnamed = others, 0
	case unnamed >= len(others):
		for _, i := range others {
			named[i] = "refused by the shuffler (the reason was not named)"
		}
		refused, unnamed = append(refused, others...), 0
	default:
		unknown = others
	}
	var uncharged []int
	for _, i := range refused {
		if sentBefore[i] {
			unknown = append(unknown, i)
		} else {
			uncharged = append(uncharged, i)
		}
	}
	for _, step := range []struct {
		idx []int
		s   UploadState
	}{{uncharged, UploadRefused}, {unknown, UploadUnknown}, {acked, UploadAcknowledged}} {
		if len(step.idx) == 0 {
			continue
		}
		ids := make([]report.ID, len(step.idx))
		for k, i := range step.idx {
			ids[k] = envs[i].ID
		}
		if err := u.p.outbox.Ack(ctx, ids, step.s); err != nil {
			u.failed(ctx, err, 0)
			return err
		}
	}
	for _, i := range refused {
		if c := codes[i]; c == codeTokenInvalid || c == codeTokenMissing {
			// The token held for the pool key, if any, is not one the
			// shuffler takes: forget it, so that a fresh one is asked
			// for if the period is still granted.
			if err := u.p.outbox.DiscardToken(ctx, envs[i].Metric); err != nil {
				u.p.log.Warn("blanket discarding a refused admission token", "error", err)
			}
		}
		u.p.drop(refusedDrop(envs[i], named[i], codes[i]))
	}
	for range unnamed {
		u.p.drop(Drop{Reason: DropRefused, Detail: fmt.Sprintf("one of %d reports the shuffler refused in an upload of %d without naming them", unnamed, len(envs))})
	}
	u.p.stats.uploaded.Add(int64(len(envs) - len(refused) - unnamed))
	u.p.stats.accepted.Add(*ack.Accepted)
	u.p.stats.duplicates.Add(*ack.Duplicates)
	u.p.stats.rejected.Add(int64(len(refused) + unnamed))
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failures, u.lastErr = 0, nil
	u.batch = min(2*u.batch, u.p.cfg.BatchSize)
	return nil
}

// refusedDrop returns the Drop of envelope e refused for reason, with
// the shuffler's code ("" when it gave none).
func refusedDrop(e report.Envelope, reason, code string) Drop {
	pool, _, period, _ := report.ParsePoolKey(e.Metric)
	r := DropRefused
	switch code {
	case codeTokenMissing:
		r = DropNoToken
	case codeTokenInvalid:
		r = DropTokenInvalid
	case codeTokenSpent:
		r = DropTokenSpent
	}
	return dropPeriod(r, pool, period, reason)
}

// noAnswer records that the server did not answer a request, with err.
func (u *uploader) noAnswer(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.unanswered = err
}

// answered records that the server answered a request.
func (u *uploader) answered() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.unanswered = nil
}

// once uploads the pending reports until none is left, an upload fails or
// ctx is done, without retrying. It does not try while the server is
// known not to answer (a request of this run went unanswered, and none
// was answered since) or while a failure's backoff or Retry-After runs,
// and then returns the error that tells so.
func (u *uploader) once(ctx context.Context) error {
	for {
		u.mu.Lock()
		unanswered, wait, last := u.unanswered, time.Until(u.notBefore), u.lastErr
		u.mu.Unlock()
		switch {
		case unanswered != nil:
			return fmt.Errorf("client: not uploading: the server did not answer (%w)", unanswered)
		case wait > 0:
			return fmt.Errorf("client: not uploading: retry in %v (last upload error: %w)", wait.Round(time.Millisecond), last)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := u.step(ctx)
		if err != nil || done {
			return err
		}
	}
}

// failed records a failed attempt and schedules the next one: after
// retryAfter (with up to 10% jitter) when the server asked, else after an
// exponential backoff with jitter. An attempt cut short because ctx is
// done (Shutdown stopping the uploader, a Flush's deadline) is not a
// failure of the server's, and schedules nothing.
func (u *uploader) failed(ctx context.Context, err error, retryAfter time.Duration) {
	if ctx.Err() != nil {
		return
	}
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
