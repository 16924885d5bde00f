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
// It records every answer to a batch to check that, and the batches a
// collector got but did not answer (a killed replica): one may have been
// committed before the kill, and its redelivery then answered as a
// duplicate with no answer ever counting it.
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
	// unanswered are the ids of batches a backend got no answer for.
	unanswered map[string]bool
	events     []string
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
		unanswered: map[string]bool{},
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
				b.failed(r, a, body)
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
			b.failed(r, &a, body)
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
func (b *collectorBalancer) failed(r *http.Request, a *answer, body []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failovers++
	b.logf("%s %s to %s failed: %v", r.Method, r.URL.Path, a.backend, a.err)
	if r.Method == http.MethodPost && r.URL.Path == "/v1/batches" {
		if bt, err := report.DecodeBatch(body); err == nil {
			b.unanswered[bt.ID.String()] = true
		}
	}
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
	unanswered          map[string]bool
	events              []string
}

// tally returns a copy of what the balancer recorded.
func (b *collectorBalancer) tally() balancerTally {
	b.mu.Lock()
	defer b.mu.Unlock()
	return balancerTally{
		counted: maps.Clone(b.counted), dups: maps.Clone(b.dups), lost: maps.Clone(b.lost), refused: maps.Clone(b.refused),
		hedged: b.hedged, failovers: b.failovers, unanswered: maps.Clone(b.unanswered), events: slices.Clone(b.events),
	}
}

// appTransport is the apps' network to the shufflers: it sends each
// upload to the next shuffler in turn and records what they
// acknowledged. Every loseAck-th acknowledgement (outside an outage) is
// lost on the way back: the app gets an error although its reports are
// stored, and sends the same envelopes again, which go to the other
// shuffler and must all come back as duplicates.
//
// An upload can also be committed with no answer at all: a shuffler
// SIGKILLed after its commit and before its answer (one commit holds every
// upload that waited for it, so several at once). The app's retry is then
// answered as duplicates, and no answer ever says the ids were accepted.
// The transport records the ids of every upload that got no answer
// (unanswered), so that it can tell such an acceptance from an id
// answered as a duplicate although no one ever accepted it.
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
	// state is what the answers say of each id sent (idSent and on).
	state map[report.ID]idState
	// acceptedUnanswered counts the ids accepted by a commit whose
	// answer never came (answered as duplicates on retry).
	acceptedUnanswered int
	lostAcks           int
	rechecks           int // retries after a lost acknowledgement answered as duplicates by the other shuffler
	failures           int // uploads that failed (no 202)
	errs               []string
}

// idState is what a shuffler's answers say of an envelope id.
type idState int

const (
	idSent               idState = iota // sent, no answer yet
	idUnanswered                        // in an upload that got no answer: maybe committed
	idAccepted                          // accepted by a 202 answer
	idAcceptedUnanswered                // accepted by an unanswered commit: its retry was a duplicate
)

func newAppTransport(shufflers []string, loseAck int) *appTransport {
	return &appTransport{
		hc:        &http.Client{Timeout: 30 * time.Second},
		loseAck:   loseAck,
		shufflers: shufflers,
		ackedBy:   map[report.ID]int{},
		metricOf:  map[report.ID]string{},
		state:     map[report.ID]idState{},
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
		a.unanswered(envs)
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

// unanswered records an upload of envs that got no answer (refused
// connection, reset, killed shuffler): it may have been committed.
func (a *appTransport) unanswered(envs []report.Envelope) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures++
	for _, e := range envs {
		if a.state[e.ID] == idSent {
			a.state[e.ID] = idUnanswered
		}
	}
}

// recordIDs records what a 202 answer res to an upload of envs says of
// each id: all accepted (none may have been accepted before), all
// duplicates (each must have been accepted before, by an answer or by an
// upload that got none), or, for an upload mixing both, as many accepted
// as were not. a.mu is held.
func (a *appTransport) recordIDs(slot int, envs []report.Envelope, res shuffler.UploadResult) {
	switch {
	case res.Accepted == len(envs):
		for _, e := range envs {
			if s := a.state[e.ID]; s == idAccepted || s == idAcceptedUnanswered {
				a.errs = append(a.errs, fmt.Sprintf("shuffler %d accepted id %s, accepted before: pooled twice", slot, e.ID))
			}
			a.state[e.ID] = idAccepted
		}
	case res.Duplicates == len(envs):
		for _, e := range envs {
			switch a.state[e.ID] {
			case idSent:
				a.errs = append(a.errs, fmt.Sprintf("shuffler %d answered id %s as a duplicate, never sent before: accepted by no one", slot, e.ID))
			case idUnanswered:
				a.state[e.ID] = idAcceptedUnanswered
				a.acceptedUnanswered++
			}
		}
	default:
		fresh, maybe := 0, 0
		for _, e := range envs {
			switch a.state[e.ID] {
			case idUnanswered:
				maybe++
				fallthrough
			case idSent:
				fresh++
				a.state[e.ID] = idAccepted
			}
		}
		switch dup := fresh - res.Accepted; {
		case dup < 0:
			a.errs = append(a.errs, fmt.Sprintf("shuffler %d accepted %d of an upload whose %d other ids were accepted before: pooled twice", slot, res.Accepted, len(envs)-fresh))
		case dup > maybe:
			a.errs = append(a.errs, fmt.Sprintf("shuffler %d answered %d ids of an upload as duplicates, of which %d were never sent before: accepted by no one", slot, dup, dup-maybe))
		default:
			a.acceptedUnanswered += dup
		}
	}
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
	a.recordIDs(slot, envs, res)
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
