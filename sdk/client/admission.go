package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Admission tokens (issue 25 item 2). A shuffler that requires them takes
// an envelope only with a valid token of its pool key (report.PeriodPoolKey:
// pool, plan epoch, period) not spent before; an issuer grants each
// authenticated instance at most one token per pool key, blinded, so that
// the token it helped make cannot be linked to the instance when it is
// spent (package admission). With Config.Credential, in ModeOn, the
// admitter keeps the outbox supplied:
//
//   - at start and every Config.UploadInterval (and at Flush), never on
//     the Record path, it works out the pool keys it needs: every pool of
//     the current plan (each metric's under separate travel, the one pool
//     under joint or parallel travel) in the current period and the next
//     Config.TokenPrefetch, whatever the app recorded; and the pool keys of
//     the sealed reports waiting without a token, within their deadline
//     (for a period of the current plan, every pool of the plan in that
//     period, so that which metrics were recorded does not show). Flush
//     asks for the current period too: an app whose loop did not run in
//     a period (a device asleep) would otherwise ask for that period's pool
//     keys only once it ended, beside the upload, telling the issuer that
//     it recorded then and when it uploads;
//   - it asks the issuer, in one request, for those without a token, a
//     spent token, a refusal or a request stored (a request is stored,
//     with its blinds, before it is sent: Outbox.AddTokenRequest), and
//     first sends again, as they are, the requests a crash or a failed
//     POST left unanswered: the issuer answers the same blinded element
//     with the same evaluation;
//   - it stores the answer: a token per pool key granted, the refusal of
//     each refused (not asked again, so that a refusal is no loop, except
//     a period the issuer does not grant yet, asked again a period later);
//   - it drops the reports still without a token at their period's
//     deadline (DropNoToken, uncharged: they never left the device), and
//     forgets what it holds for a period past its deadline.
//
// The uploader sends only the envelopes whose pool key has a token
// (Outbox.PendingWithToken), each with it; the others wait without holding
// them back. The shuffler's refusals of a token (token_spent,
// token_invalid, token_missing in its answer) are Drops (settle).
//
// So the issuer learns that the instance is online at those times and
// its identity, and the pool keys of every pool of the plan a period or
// more ahead, the same for every instance on the plan whatever it
// records: not which metrics it used, and, since tokens are fetched a
// period ahead, not when it uploads. Only a report sealed for a period
// whose token could not be fetched ahead (the app did not run then) asks
// for its period's pool keys shortly before its upload.

// maxTokenAnswer bounds the issuer's answer: MaxRequests evaluations
// with their pool keys and room for refusal reasons.
const maxTokenAnswer = 1 << 20

// admitter fetches and stores the admission tokens of a Provider with a
// Config.Credential, in ModeOn.
type admitter struct {
	p   *Provider
	url string
	mu  sync.Mutex // one run at a time (the background loop, Flush)
}

// newAdmitter returns the admitter of p, or nil when p fetches no
// tokens.
func newAdmitter(p *Provider) (*admitter, error) {
	if p.mode != ModeOn || p.cfg.Credential == nil {
		return nil, nil
	}
	u, err := url.JoinPath(p.cfg.Issuer, admission.TokensPath)
	if err != nil {
		return nil, fmt.Errorf("%w: Issuer %q: %v", ErrBadConfig, p.cfg.Issuer, err)
	}
	return &admitter{p: p, url: u}, nil
}

// issuerError is a request the issuer did not answer with tokens.
type issuerError struct {
	status int // HTTP status, 0 when it did not answer
	err    error
}

func (e *issuerError) Error() string { return e.err.Error() }
func (e *issuerError) Unwrap() error { return e.err }

// run does one round of the admitter's work (see above) and reports
// whether it stored a token. It returns the first error that stopped it
// (the issuer unreachable, the outbox failing); what it stored before
// stays.
func (a *admitter) run(ctx context.Context) (granted bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.p
	v := p.currentPlan()
	now := p.now()
	grace := p.graceOf(v)
	held, err := p.outbox.Tokenless(ctx)
	if err != nil {
		return false, err
	}
	stored, err := p.outbox.PoolTokens(ctx)
	if err != nil {
		return false, err
	}
	if held, err = a.expire(ctx, held, stored, now, grace); err != nil {
		return false, err
	}
	if _, err := p.outbox.ForgetTokens(ctx, now.Unix()); err != nil {
		return false, err
	}
	reqs, err := p.outbox.TokenRequests(ctx)
	if err != nil {
		return false, err
	}
	for _, r := range reqs {
		n, err := a.send(ctx, r, nil, now)
		granted = granted || n > 0
		if err != nil {
			return granted, err
		}
	}
	if stored, err = p.outbox.PoolTokens(ctx); err != nil {
		return granted, err
	}
	have := make(map[string]bool, len(stored))
	for _, t := range stored {
		have[t.PoolKey] = t.Retry == 0 || now.Unix() < t.Retry
	}
	var ask []string
	for _, k := range a.wanted(v, now, grace, held) {
		if !have[k] {
			ask = append(ask, k)
		}
	}
	for len(ask) > 0 {
		chunk := ask[:min(len(ask), admission.MaxRequests)]
		ask = ask[len(chunk):]
		r, pending, err := a.store(ctx, chunk, grace)
		if err != nil {
			return granted, err
		}
		n, err := a.send(ctx, r, pending, now)
		granted = granted || n > 0
		if err != nil {
			return granted, err
		}
	}
	return granted, nil
}

// wanted returns the pool keys plan v's reports need at now: every pool
// of the plan in the current period and the next Config.TokenPrefetch,
// and those of the reports held without a token (held) within their
// deadline, for a period of plan v with every pool of the plan in it.
func (a *admitter) wanted(v *verifiedPlan, now time.Time, grace time.Duration, held []TokenlessEnvelope) []string {
	var out []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	pools := v.plan.Pools()
	cur := v.plan.ReportPeriod(now)
	if cur.Valid() != nil {
		return nil // a clock before 1970
	}
	for i := range int64(a.p.cfg.TokenPrefetch) + 1 {
		per := report.Period{Start: cur.Start + i*cur.Length, Length: cur.Length}
		for _, pool := range pools {
			add(report.PeriodPoolKey(pool, v.epoch, per))
		}
	}
	for _, h := range held {
		_, epoch, per, err := report.ParsePoolKey(h.PoolKey)
		if err != nil || per.Valid() != nil || deadline(per, grace) <= now.Unix() {
			continue
		}
		if epoch != v.epoch || per.Length != cur.Length {
			add(h.PoolKey) // another plan's: its pools are not known
			continue
		}
		for _, pool := range pools {
			add(report.PeriodPoolKey(pool, v.epoch, per))
		}
	}
	return out
}

// deadline returns the Unix second from which the shuffler takes no
// envelope of period per: its end plus the grace.
func deadline(per report.Period, grace time.Duration) int64 {
	return per.End() + int64(grace/time.Second)
}

// graceOf returns the grace of plan v's periods: Config.PeriodGrace, or
// the plan's.
func (p *Provider) graceOf(v *verifiedPlan) time.Duration {
	if p.cfg.PeriodGrace != 0 {
		return p.cfg.PeriodGrace
	}
	return v.plan.GraceLength()
}

// expire drops the reports of held whose deadline has passed at now
// (DropNoToken), naming the issuer's refusal of their pool key when
// stored holds one, and returns the others.
func (a *admitter) expire(ctx context.Context, held []TokenlessEnvelope, stored []PoolToken, now time.Time, grace time.Duration) ([]TokenlessEnvelope, error) {
	refusals := map[string]PoolToken{}
	for _, t := range stored {
		if t.Refused != "" {
			refusals[t.PoolKey] = t
		}
	}
	var keep, gone []TokenlessEnvelope
	var unsent, sent []report.ID
	for _, h := range held {
		_, _, per, err := report.ParsePoolKey(h.PoolKey)
		if err == nil && deadline(per, grace) > now.Unix() {
			keep = append(keep, h)
			continue
		}
		gone = append(gone, h)
		if h.Sent {
			sent = append(sent, h.ID) // an earlier upload may have stored it
		} else {
			unsent = append(unsent, h.ID)
		}
	}
	if err := a.p.outbox.Ack(ctx, unsent, UploadNoToken); err != nil {
		return nil, err
	}
	if err := a.p.outbox.Ack(ctx, sent, UploadUnknown); err != nil {
		return nil, err
	}
	for _, h := range gone {
		pool, _, per, _ := report.ParsePoolKey(h.PoolKey)
		detail := "no admission token of its pool key could be obtained before the period's deadline"
		if r, ok := refusals[h.PoolKey]; ok {
			detail = fmt.Sprintf("the issuer refused its admission token: %s (%s)", r.Refused, r.Reason)
		}
		a.p.stats.noToken.Add(1)
		a.p.drop(dropPeriod(DropNoToken, pool, per, detail))
	}
	return keep, nil
}

// store blinds a request for pools and stores it in the outbox, before
// it is sent. It returns the stored request and its blinds, which send
// then need not decode again (ParsePending recomputes every blinded
// element: a hash to the group and a scalar multiplication each).
func (a *admitter) store(ctx context.Context, pools []string, grace time.Duration) (TokenRequest, *admission.Pending, error) {
	pending, _, err := admission.Blind(pools)
	if err != nil {
		return TokenRequest{}, nil, fmt.Errorf("client: admission: %w", err)
	}
	b, err := pending.MarshalBinary()
	if err != nil {
		return TokenRequest{}, nil, fmt.Errorf("client: admission: %w", err)
	}
	r := TokenRequest{Pools: pools, Pending: b}
	for _, k := range pools {
		_, _, per, _ := report.ParsePoolKey(k) // Blind checked them
		r.Deadline = max(r.Deadline, deadline(per, grace))
	}
	if r.ID, err = a.p.outbox.AddTokenRequest(ctx, r); err != nil {
		return TokenRequest{}, nil, err
	}
	return r, pending, nil
}

// send sends the stored request r to the issuer and stores its answer
// (Outbox.SettleTokenRequest), returning the number of tokens granted.
// pending is r's blinds as store made them, or nil to decode r.Pending
// (a request stored by an earlier round or run).
// A request the issuer did not answer (a transport error, a status other
// than 200, an answer that does not decode) stays stored, to be sent
// again as it is, unless the issuer refused it as a request (400, 413,
// 415: sending it again would not help), which is dropped.
func (a *admitter) send(ctx context.Context, r TokenRequest, pending *admission.Pending, now time.Time) (int, error) {
	p := a.p
	if pending == nil {
		var err error
		if pending, err = admission.ParsePending(r.Pending); err != nil {
			p.log.Warn("blanket admission: a stored token request does not decode; it is dropped", "error", err)
			return 0, p.outbox.SettleTokenRequest(ctx, r.ID, nil)
		}
	}
	bearer, err := p.cfg.Credential(ctx)
	if err != nil {
		return 0, fmt.Errorf("client: admission: Config.Credential: %w", err)
	}
	resp, err := a.post(ctx, bearer, pending.Request())
	if ie, ok := errors.AsType[*issuerError](err); ok {
		switch ie.status {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			p.log.Warn("blanket admission: the issuer refused a token request; it is dropped", "error", err)
			return 0, p.outbox.SettleTokenRequest(ctx, r.ID, nil)
		}
	}
	if err != nil {
		return 0, err
	}
	tokens, err := admission.Finalize(pending, resp)
	refused := map[int]admission.Refusal{}
	if re, ok := errors.AsType[*admission.RefusedError](err); ok {
		for _, x := range re.Refusals {
			refused[x.Index] = x
		}
	} else if err != nil {
		return 0, fmt.Errorf("client: admission: POST %s: %w", a.url, err)
	}
	grace := p.graceOf(p.currentPlan())
	next := now.Unix()
	if cur := p.currentPlan().plan.ReportPeriod(now); cur.Valid() == nil {
		next = cur.End()
	}
	answer := make([]PoolToken, 0, len(tokens))
	granted := 0
	for i, k := range pending.Pools() {
		_, _, per, _ := report.ParsePoolKey(k)
		t := PoolToken{PoolKey: k, Deadline: deadline(per, grace)}
		if x, ok := refused[i]; ok {
			t.Refused, t.Reason = x.Code, x.Reason
			if x.Code == admission.RefusedPeriod && per.End() > now.Unix() {
				// Not granted yet (too far ahead, or the clocks
				// differ): the issuer's window moves with the next
				// period.
				t.Retry = max(next, now.Unix()+1)
			}
			p.stats.tokensRefused.Add(1)
			p.log.Warn("blanket admission: the issuer refused a token", "pool_key", k, "code", x.Code, "reason", x.Reason, "asked_again", t.Retry != 0)
			answer = append(answer, t)
			continue
		}
		if t.Token, err = tokens[i].MarshalBinary(); err != nil {
			return 0, fmt.Errorf("client: admission: %w", err)
		}
		granted++
		answer = append(answer, t)
	}
	if err := p.outbox.SettleTokenRequest(ctx, r.ID, answer); err != nil {
		return 0, err
	}
	p.stats.tokens.Add(int64(granted))
	return granted, nil
}

// post sends req to the issuer with the bearer token and decodes its
// answer; any other answer than a 200 with a TokenResponse is an
// *issuerError.
func (a *admitter) post(ctx context.Context, bearer string, req *admission.TokenRequest) (*admission.TokenResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("client: admission: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return nil, &issuerError{err: err}
	}
	hr.Header.Set("Authorization", "Bearer "+bearer)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	resp, err := a.p.hc.Do(hr)
	if err != nil {
		return nil, &issuerError{err: fmt.Errorf("POST %s: %w", a.url, err)}
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer+1))
	if err != nil {
		return nil, &issuerError{status: resp.StatusCode, err: fmt.Errorf("POST %s: %s: reading the answer: %w", a.url, resp.Status, err)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &issuerError{status: resp.StatusCode, err: fmt.Errorf("POST %s: %s: %.200s", a.url, resp.Status, bytes.TrimSpace(rb))}
	}
	var out admission.TokenResponse
	if len(rb) > maxTokenAnswer {
		return nil, &issuerError{status: resp.StatusCode, err: fmt.Errorf("POST %s: an answer over %d bytes", a.url, maxTokenAnswer)}
	}
	if err := json.Unmarshal(rb, &out); err != nil {
		return nil, &issuerError{status: resp.StatusCode, err: fmt.Errorf("POST %s: the answer is not the issuer's: %v", a.url, err)}
	}
	return &out, nil
}
