package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/sdk/report"
)

// The networks of TestReplicas: collectorBalancer between the shufflers
// and the collectors, appTransport between the apps and the shufflers.
// Both inject faults and record what the servers answered.

// collectorBalancer is the one address of the collector replicas for the
// shufflers: a round-robin HTTP proxy, as a load balancer
// in front of them would be. A backend that cannot be reached (a killed
// replica) is skipped: the request goes to the next one, and only when
// none answers does the shuffler get a 502, which it retries with
// backoff. Retrying a POST /v1/batches elsewhere is safe: a collector
// counts a batch id once.
//
// It also injects the faults a real network has, so that batches are
// delivered twice:
//
//   - every loseEvery-th batch a collector acknowledged (200) has its
//     answer lost on the way back (the shuffler gets a 502 although the
//     batch is stored), so the shuffler delivers that batch again, to the
//     next replica, which must answer that it is a duplicate;
//   - every hedgeEvery-th batch is sent to every backend at once (a
//     hedged request), so that replicas ingest one batch concurrently:
//     one must count it, the others answer that it is a duplicate.
//
// It records every answer to a batch to check that.
type collectorBalancer struct {
	hc         *http.Client
	loseEvery  int
	hedgeEvery int

	mu       sync.Mutex
	backends []string // base URLs of the collectors, by slot
	next     int      // the slot the next request tries first
	batches  int      // POST /v1/batches requests
	acks     int      // 200 answers to them
	// counted and dups count, per batch id, the 200 answers that counted
	// the batch (duplicate false) and those that did not (a redelivery).
	counted, dups map[string]int
	// lost are the batch ids whose 200 answer was dropped, by answer
	// number.
	lost map[string]int
	// hedged counts the batches sent to two backends at once.
	hedged int
	// refused counts the answers to batches other than 200, by status.
	refused map[int]int
	// failovers counts requests a backend failed, tried on the next one.
	failovers int
	events    []string
}

// newCollectorBalancer returns a balancer without backends yet.
func newCollectorBalancer(loseEvery, hedgeEvery int) *collectorBalancer {
	return &collectorBalancer{
		hc:         &http.Client{Timeout: 30 * time.Second},
		loseEvery:  loseEvery,
		hedgeEvery: hedgeEvery,
		counted:    map[string]int{},
		dups:       map[string]int{},
		lost:       map[string]int{},
		refused:    map[int]int{},
	}
}

// setBackend points slot at url, adding the slot if it is new.
func (b *collectorBalancer) setBackend(slot int, url string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.backends) <= slot {
		b.backends = append(b.backends, "")
	}
	b.backends[slot] = url
	b.logf("backend %d is %s", slot, url)
}

// logf records an event for the failure log; b.mu is held.
func (b *collectorBalancer) logf(format string, args ...any) {
	b.events = append(b.events, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

// route returns the backends in the order this request tries them, and
// whether it is a batch to hedge.
func (b *collectorBalancer) route(batch bool) ([]string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.backends)
	out := make([]string, 0, n)
	for i := range n {
		if u := b.backends[(b.next+i)%n]; u != "" {
			out = append(out, u)
		}
	}
	if n > 0 {
		b.next = (b.next + 1) % n
	}
	hedge := false
	if batch {
		b.batches++
		hedge = b.hedgeEvery > 0 && b.batches%b.hedgeEvery == 0 && len(out) > 1
		if hedge {
			b.hedged++
		}
	}
	return out, hedge
}

// answer is a backend's answer to one request.
type answer struct {
	backend string
	status  int
	header  http.Header
	body    []byte
	err     error // a transport error: no answer
}

// forward sends r (with body) to backend.
func (b *collectorBalancer) forward(ctx context.Context, backend string, r *http.Request, body []byte) answer {
	a := answer{backend: backend}
	req, err := http.NewRequestWithContext(ctx, r.Method, backend+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		a.err = err
		return a
	}
	req.Header = r.Header.Clone()
	// The proxy's own transport negotiates compression, so that it reads
	// the answers in clear.
	req.Header.Del("Accept-Encoding")
	resp, err := b.hc.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.status, a.header = resp.StatusCode, resp.Header
	a.body, a.err = io.ReadAll(resp.Body)
	return a
}

func (b *collectorBalancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	batch := r.Method == http.MethodPost && r.URL.Path == "/v1/batches"
	backends, hedge := b.route(batch)
	if hedge {
		answers := make([]answer, len(backends))
		var wg sync.WaitGroup
		for i, backend := range backends {
			wg.Go(func() { answers[i] = b.forward(r.Context(), backend, r, body) })
		}
		wg.Wait()
		var reply *answer
		for i := range answers {
			a := &answers[i]
			if a.err != nil {
				b.failed(r, a)
				continue
			}
			b.record(a, true)
			if reply == nil || a.status == http.StatusOK && reply.status != http.StatusOK {
				reply = a
			}
		}
		if reply == nil {
			http.Error(w, "no collector answered", http.StatusBadGateway)
			return
		}
		write(w, reply)
		return
	}
	for _, backend := range backends {
		a := b.forward(r.Context(), backend, r, body)
		if a.err != nil {
			if r.Context().Err() != nil {
				return
			}
			b.failed(r, &a)
			continue
		}
		if batch && b.record(&a, false) {
			http.Error(w, "the collector's answer was lost", http.StatusBadGateway)
			return
		}
		write(w, &a)
		return
	}
	http.Error(w, "no collector answered", http.StatusBadGateway)
}

// write passes a backend's answer on.
func write(w http.ResponseWriter, a *answer) {
	for k, vs := range a.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// failed records a request a backend did not answer.
func (b *collectorBalancer) failed(r *http.Request, a *answer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failovers++
	b.logf("%s %s to %s failed: %v", r.Method, r.URL.Path, a.backend, a.err)
}

// record records a collector's answer to a batch and reports whether it
// is to be lost (never for a hedged one).
func (b *collectorBalancer) record(a *answer, hedged bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.status != http.StatusOK {
		b.refused[a.status]++
		b.logf("a batch answered %d by %s (hedged %v): %s", a.status, a.backend, hedged, bytes.TrimSpace(a.body))
		return false
	}
	var res collector.IngestResult
	if err := json.Unmarshal(a.body, &res); err != nil || res.Batch == "" {
		b.refused[0]++
		b.logf("unreadable acknowledgement from %s: %q (%v)", a.backend, a.body, err)
		return false
	}
	b.acks++
	if res.Duplicate {
		b.dups[res.Batch]++
	} else {
		b.counted[res.Batch]++
	}
	lose := !hedged && b.loseEvery > 0 && b.acks%b.loseEvery == 1
	if lose {
		b.lost[res.Batch] = b.acks
	}
	b.logf("batch %s of %s: %d reports, duplicate %v, by %s; hedged %v; answer lost %v", res.Batch, res.Metric, res.N, res.Duplicate, a.backend, hedged, lose)
	return lose
}

// balancerTally is what a collectorBalancer recorded.
type balancerTally struct {
	counted, dups, lost map[string]int
	refused             map[int]int
	hedged, failovers   int
	events              []string
}

// tally returns a copy of what the balancer recorded.
func (b *collectorBalancer) tally() balancerTally {
	b.mu.Lock()
	defer b.mu.Unlock()
	return balancerTally{
		counted: maps.Clone(b.counted), dups: maps.Clone(b.dups), lost: maps.Clone(b.lost), refused: maps.Clone(b.refused),
		hedged: b.hedged, failovers: b.failovers, events: slices.Clone(b.events),
	}
}

// appTransport is the apps' network to the shufflers: it sends each
// upload to the next shuffler in turn and records what they
// acknowledged. Every loseAck-th acknowledgement (outside an outage) is
// lost on the way back: the app gets an error although its reports are
// stored, and sends the same envelopes again, which go to the other
// shuffler and must all come back as duplicates.
type appTransport struct {
	hc      *http.Client
	loseAck int

	mu        sync.Mutex
	shufflers []string // base URLs, by slot
	next      int
	outage    bool // a shuffler is down: no acknowledgement is lost
	acks      int  // 202 answers
	// ackedBy maps every acknowledged envelope id to the slot of the
	// shuffler that acknowledged it first, metricOf to its metric.
	ackedBy  map[report.ID]int
	metricOf map[report.ID]string
	accepted int // the shufflers' accepted counts, summed
	lostAcks int
	rechecks int // retries after a lost acknowledgement answered as duplicates by the other shuffler
	failures int // uploads that failed (no 202)
	errs     []string
}

func newAppTransport(shufflers []string, loseAck int) *appTransport {
	return &appTransport{
		hc:        &http.Client{Timeout: 30 * time.Second},
		loseAck:   loseAck,
		shufflers: shufflers,
		ackedBy:   map[report.ID]int{},
		metricOf:  map[report.ID]string{},
	}
}

func (a *appTransport) setShuffler(slot int, url string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shufflers[slot] = url
}

func (a *appTransport) setOutage(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outage = on
}

// route returns the shuffler an upload of envs goes to, and whether it
// is the exact retry of an acknowledged upload sent to the other one.
func (a *appTransport) route(envs []report.Envelope) (slot int, url string, recheck bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if first, ok := a.ackedBy[envs[0].ID]; ok && !a.outage {
		slot = 1 - first
		return slot, a.shufflers[slot], true
	}
	slot = a.next
	a.next = (a.next + 1) % len(a.shufflers)
	return slot, a.shufflers[slot], false
}

func (a *appTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/reports" {
		return nil, fmt.Errorf("apps send only uploads here, not %s %s", req.Method, req.URL)
	}
	envs, err := report.DecodeEnvelopes(body)
	if err != nil || len(envs) == 0 {
		return nil, fmt.Errorf("an app uploaded %d envelopes: %v", len(envs), err)
	}
	slot, url, recheck := a.route(envs)
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, url+"/v1/reports", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header.Set("Content-Type", req.Header.Get("Content-Type"))
	resp, err := a.hc.Do(out)
	var answer []byte
	if err == nil {
		answer, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		a.failed()
		return nil, err
	}
	if resp.StatusCode != http.StatusAccepted {
		a.failed()
	} else if a.acknowledged(slot, envs, answer, recheck) {
		return nil, errors.New("connection reset: the shuffler's acknowledgement was lost")
	}
	return &http.Response{
		Status: resp.Status, StatusCode: resp.StatusCode, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(answer)), ContentLength: int64(len(answer)), Request: req,
	}, nil
}

func (a *appTransport) failed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures++
}

// acknowledged records a 202 of shuffler slot to an upload of envs and
// reports whether the acknowledgement is to be lost.
func (a *appTransport) acknowledged(slot int, envs []report.Envelope, answer []byte, recheck bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	var res shuffler.UploadResult
	if err := json.Unmarshal(answer, &res); err != nil {
		a.errs = append(a.errs, fmt.Sprintf("shuffler %d answered 202 %q: %v", slot, answer, err))
		return false
	}
	if res.Rejected != 0 || res.Accepted+res.Duplicates != len(envs) {
		a.errs = append(a.errs, fmt.Sprintf("shuffler %d answered an upload of %d envelopes with %+v", slot, len(envs), res))
	}
	if recheck {
		if res.Accepted != 0 || res.Duplicates != len(envs) {
			a.errs = append(a.errs, fmt.Sprintf("shuffler %d answered an exact retry of an upload shuffler %d acknowledged with %+v, want %d duplicates", slot, 1-slot, res, len(envs)))
		} else {
			a.rechecks++
		}
	}
	a.accepted += res.Accepted
	for _, e := range envs {
		if _, ok := a.ackedBy[e.ID]; !ok {
			pool, _, _, _ := report.ParsePoolKey(e.Metric)
			a.ackedBy[e.ID], a.metricOf[e.ID] = slot, pool
		}
	}
	a.acks++
	lose := a.loseAck > 0 && !a.outage && !recheck && a.acks%a.loseAck == 0
	if lose {
		a.lostAcks++
	}
	return lose
}

// uploadAll uploads envs in one request through a, retrying until a
// shuffler acknowledges them.
func (a *appTransport) uploadAll(ctx context.Context, envs []report.Envelope) error {
	hc := &http.Client{Transport: a}
	body := report.EncodeEnvelopes(envs)
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://shufflers.test/v1/reports", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("uploading %d envelopes: %w (last error: %v)", len(envs), ctx.Err(), err)
		}
		time.Sleep(min(20*time.Millisecond<<attempt, time.Second))
	}
}

// ackedByMetric returns the number of acknowledged report ids per metric.
func (a *appTransport) ackedByMetric() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int64{}
	for _, m := range a.metricOf {
		out[m]++
	}
	return out
}

// captureTransport takes the apps' uploads itself and acknowledges them,
// as a relay that forwards them later would: the top-up apps' reports go
// to a shuffler in one upload (appTransport.uploadAll).
type captureTransport struct {
	mu   sync.Mutex
	envs []report.Envelope
}

func (c *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	envs, err := report.DecodeEnvelopes(body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.envs = append(c.envs, envs...)
	c.mu.Unlock()
	answer, _ := json.Marshal(shuffler.UploadResult{Accepted: len(envs)})
	return &http.Response{
		Status: "202 Accepted", StatusCode: http.StatusAccepted, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(answer)),
		ContentLength: int64(len(answer)), Request: req,
	}, nil
}

func (c *captureTransport) envelopes() []report.Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.envs
}
