package shuffler

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk/report"
)

// MinSealedLen is the shortest sealed report that can open: the X25519
// encapsulated key (32 bytes) and the ChaCha20-Poly1305 tag (16 bytes).
const MinSealedLen = report.SealOverhead

// dedupGenerations is the number of full generations of ids kept besides
// the current one; a generation holds DedupWindow/dedupGenerations ids.
const dedupGenerations = 4

// groupMaxEnvelopes bounds the envelopes committed in one transaction.
const groupMaxEnvelopes = 100000

// Register adds the shuffler's public route to mux: POST /v1/reports.
func (s *Shuffler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/reports", s.handleReports)
}

// RegisterAdmin adds the shuffler's operator routes to mux: GET
// /v1/pools, each pool's fill against n_min, and POST /v1/pools/close,
// which closes periods before their deadline (ClosePeriods). Serve them
// only to the operator (the admin listener of the blanket commands,
// loopback by default): pool counts polled over time show when reports
// arrive, which the shuffler exists to hide from everyone else.
func (s *Shuffler) RegisterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/pools", s.handlePools)
	mux.HandleFunc("POST /v1/pools/close", s.handleClose)
}

// UploadResult is the JSON body of a 202 answer to POST /v1/reports.
type UploadResult struct {
	// Accepted is the number of envelopes newly pooled.
	Accepted int `json:"accepted"`
	// Duplicates is the number of envelopes whose id was already accepted
	// (a retry after a lost acknowledgement): they are safely stored.
	Duplicates int `json:"duplicates"`
	// Rejected is the number of envelopes refused for good (unknown metric,
	// unsupported suite, too short, no valid unspent admission token);
	// retrying them will not help.
	Rejected int `json:"rejected"`
	// Errors names every rejected envelope, with its code and why.
	Errors []EnvelopeError `json:"errors,omitempty"`
}

// EnvelopeError says why one envelope of an upload was rejected.
type EnvelopeError struct {
	// Index is the envelope's position in the upload.
	Index int `json:"index"`
	// Code names the reason for programs, as the reason label of
	// blanket_shuffler_envelopes_rejected_total does: unknown_pool,
	// no_period, unknown_period_length, late, early, too_many_epochs,
	// unsupported_suite, too_short, or for the admission token
	// admission.UploadTokenMissing, UploadTokenInvalid and
	// UploadTokenSpent.
	Code string `json:"code"`
	// Error is the reason in words.
	Error string `json:"error"`
}

type acceptItem struct {
	metric string
	suite  uint16
	sealed []byte
	h      []byte
	// spent is the SpentKey of the envelope's admission token (package
	// issuer), nil without Options.Admission.
	spent  []byte
	period report.Period
	index  int // in the upload
}

type acceptReq struct {
	items []acceptItem
	done  chan acceptRes
}

type acceptRes struct {
	accepted, duplicates int
	// late are the indices of envelopes of a closed period (table
	// forgotten: its ids forgotten, or its pools released whole):
	// refused.
	late []int
	// spent are the indices of envelopes whose admission token another
	// envelope (another report id) spent: refused.
	spent []int
	err   error
}

// idHash returns the keyed hash under which a report id is remembered: the
// seen table then holds nothing that matches a client's outbox.
func (s *Shuffler) idHash(id report.ID) []byte {
	m := hmac.New(sha256.New, s.salt)
	m.Write(id[:])
	return m.Sum(nil)[:16]
}

// uploadReadTimeout bounds reading one upload body, far below the
// server's ReadTimeout (which large batches to the collector need).
const uploadReadTimeout = time.Minute

func (s *Shuffler) handleReports(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.m.uploadSeconds.Observe(time.Since(start).Seconds()) }()
	// Best effort: a ResponseWriter without deadlines keeps the server's.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadReadTimeout))
	body, status, err := httpserver.ReadBody(w, r, s.o.MaxBodyBytes)
	if err != nil {
		if status == http.StatusRequestEntityTooLarge {
			s.c.tooLarge.Add(1)
		} else {
			s.c.badRequests.Add(1)
		}
		httpserver.WriteError(w, status, "%v", err)
		return
	}
	envs, err := report.DecodeEnvelopes(body)
	switch {
	case errors.Is(err, report.ErrTooLarge):
		s.c.tooLarge.Add(1)
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge, "%v", err)
		return
	case err != nil:
		s.c.badRequests.Add(1)
		httpserver.WriteError(w, http.StatusBadRequest, "%v", err)
		return
	case len(envs) > s.o.MaxEnvelopes:
		s.c.tooLarge.Add(1)
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge, "%d envelopes in one upload, limit %d", len(envs), s.o.MaxEnvelopes)
		return
	}
	if s.o.ConnRate > 0 {
		if b := httpserver.ConnBucket(r.Context(), s.o.ConnRate, s.o.ConnBurst, time.Now); b != nil {
			if wait := b.Take(len(envs)); wait > 0 {
				s.c.rateLimited.Add(1)
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				httpserver.WriteError(w, http.StatusTooManyRequests, "rate limit: %g envelopes per second per connection", s.o.ConnRate)
				return
			}
		}
	}
	var res UploadResult
	req := &acceptReq{items: make([]acceptItem, 0, len(envs)), done: make(chan acceptRes, 1)}
	refuse := func(i int, why rejectReason, format string, args ...any) {
		res.Rejected++
		res.Errors = append(res.Errors, EnvelopeError{Index: i, Code: rejectReasonNames[why], Error: fmt.Sprintf(format, args...)})
	}
	// Refused before the commit: counted once the upload is answered 202
	// (an upload answered 503, or not at all, is retried and counted
	// then). What the commit decides, commitLoop counts.
	var rejected [numRejectReasons]int64
	reject := func(i int, why rejectReason, format string, args ...any) {
		rejected[why]++
		refuse(i, why, format, args...)
	}
	for i, e := range envs {
		if err := s.accepts(e.Metric); err != nil {
			reject(i, reasonOf(err), "%v", err)
			continue
		}
		switch {
		case e.Suite != report.SuiteX25519ChaCha:
			reject(i, rejectSuite, "unsupported suite %d", e.Suite)
			continue
		case len(e.Sealed) < MinSealedLen:
			reject(i, rejectShort, "sealed report of %d bytes, shorter than %d", len(e.Sealed), MinSealedLen)
			continue
		}
		// The token before the epoch: an envelope refused does not
		// count its epoch toward MaxEpochsPerPool.
		spent, why, err := s.admit(e)
		if err != nil {
			reject(i, why, "%q: %v", e.Metric, err)
			continue
		}
		if !s.admitEpoch(e.Metric) {
			reject(i, rejectTooManyEpochs, "%q: already %d plan epochs pooled for this pool, the most the shuffler holds", e.Metric, s.o.MaxEpochsPerPool)
			continue
		}
		_, _, period, _ := report.ParsePoolKey(e.Metric)
		req.items = append(req.items, acceptItem{metric: e.Metric, suite: e.Suite, sealed: e.Sealed, h: s.idHash(e.ID), spent: spent, period: period, index: i})
	}
	if len(req.items) > 0 {
		select {
		case s.reqs <- req:
		case <-s.closed:
			s.c.unavailable.Add(1)
			w.Header().Set("Retry-After", "1")
			httpserver.WriteError(w, http.StatusServiceUnavailable, "shuffler is shutting down")
			return
		case <-r.Context().Done():
			s.c.canceled.Add(1)
			return
		}
		// Once handed over, the commit may succeed even if we stop
		// waiting; the client's retry is then a duplicate.
		var ar acceptRes
		select {
		case ar = <-req.done:
		case <-r.Context().Done():
			s.c.canceled.Add(1)
			return
		}
		if ar.err != nil {
			s.c.unavailable.Add(1)
			s.log.Error("storing reports", "error", ar.err)
			w.Header().Set("Retry-After", "1")
			httpserver.WriteError(w, http.StatusServiceUnavailable, "storing reports failed; retry")
			return
		}
		res.Accepted, res.Duplicates = ar.accepted, ar.duplicates
		for _, i := range ar.late {
			refuse(i, rejectLate, "%q: %v", envs[i].Metric, errClosed)
		}
		for _, i := range ar.spent {
			refuse(i, rejectTokenSpent, "%q: %v", envs[i].Metric, errSpent)
		}
		slices.SortFunc(res.Errors, func(a, b EnvelopeError) int { return cmp.Compare(a.Index, b.Index) })
	}
	s.c.requests.Add(1)
	for why, n := range rejected {
		s.c.rejectedBy[why].Add(n)
	}
	httpserver.WriteJSON(w, http.StatusAccepted, res)
}

// commitLoop commits uploads in groups: every request waiting when a
// transaction starts joins it, so concurrent uploads share one fsync.
func (s *Shuffler) commitLoop() {
	defer s.committer.Done()
	for {
		var group []*acceptReq
		select {
		case r := <-s.reqs:
			group = append(group, r)
		case <-s.closed:
			return
		}
		n := len(group[0].items)
	gather:
		for n < groupMaxEnvelopes {
			select {
			case r := <-s.reqs:
				group = append(group, r)
				n += len(r.items)
			default:
				break gather
			}
		}
		results, err := s.commitGroup(group)
		for i, r := range group {
			if err != nil {
				r.done <- acceptRes{err: err}
				continue
			}
			// Counted here, committed, whether or not the uploader
			// still waits for the answer: accepted counts every report
			// ever pooled.
			s.c.accepted.Add(int64(results[i].accepted))
			s.c.duplicates.Add(int64(results[i].duplicates))
			s.c.rejectedBy[rejectLate].Add(int64(len(results[i].late)))
			s.c.rejectedBy[rejectTokenSpent].Add(int64(len(results[i].spent)))
			r.done <- results[i]
		}
	}
}

// commitGroup stores the reports of a group of uploads in one transaction:
// each id not seen before is remembered and its report pooled.
func (s *Shuffler) commitGroup(group []*acceptReq) ([]acceptRes, error) {
	ctx := context.Background()
	results, changed, err := s.st.accept(ctx, group)
	if err != nil {
		return nil, err
	}
	if changed {
		// Committed: answer it. The accepts check reloads at the next
		// change (the store refuses forgotten periods itself).
		if err := s.loadForgotten(ctx); err != nil {
			s.log.Error("reading the forgotten periods", "error", err)
		}
	}
	s.poolDirty.Store(true)
	return results, nil
}

// loadForgotten reads, per period length, the latest end of a closed
// period (table forgotten).
func (s *Shuffler) loadForgotten(ctx context.Context) error {
	m, err := s.st.forgotten(ctx)
	if err != nil {
		return err
	}
	s.forgotten.Store(&m)
	return nil
}
