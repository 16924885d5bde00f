package shuffler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// maxPlanBytes bounds a relayed plan.
const maxPlanBytes = 4 << 20

// PlanRelay serves GET /v1/plan on a shuffler that runs apart from the
// collector, by relaying the collector's plan, so that apps need only the
// shuffler's address. The plan is fetched on demand and kept for MaxAge;
// when the collector cannot be reached a plan fetched earlier is served,
// else 503. The plan's bytes and its signature headers (plan.SignatureHeader,
// plan.SigningKeyHeader, plan.EndorsementsHeader) are relayed unchanged:
// apps verify the collector's signature under the key they pin and check
// the plan themselves (their eps0 ceiling, their plugins), so relaying it
// adds no trust in the shuffler.
type PlanRelay struct {
	// Collector is the collector's base URL. Required unless Collectors
	// is set.
	Collector string
	// Collectors are more base URLs of the same collector, after
	// Collector (Options.Collectors): a fetch tries the URL that answered
	// last first, then the others in order. Defaults to none.
	Collectors []string
	// Client fetches the plan. Defaults to a client with a 10 s timeout.
	Client *http.Client
	// MaxAge is how long a fetched plan is served before it is fetched
	// again. Defaults to 30 s.
	MaxAge time.Duration
	// Logger receives fetch failures. Defaults to discarding them.
	Logger *slog.Logger
	// Admission, when set, is sent in the admission.AdmissionHeader of
	// every answer: admission.AdmissionTokens when this shuffler takes
	// only envelopes with a token (Options.Admission),
	// admission.AdmissionOpen otherwise. Apps read it to tell an
	// operator what their uploads lack. Defaults to no header.
	Admission string
	// OnPlan, when set, is called with each plan fetched that parses (a
	// plan that does not is still relayed: apps judge it). The shuffler
	// role uses it to take the pools of a new plan (Shuffler.AddPools).
	OnPlan func(*plan.Plan)

	mu   sync.Mutex
	body []byte
	etag string
	// sig holds the signature headers relayed with body.
	sig     http.Header
	fetched time.Time
	// good is the index of the URL that answered last.
	good int
	// held is set once a plan was fetched (Ready reads it without mu,
	// which a fetch holds).
	held atomic.Bool
}

// Register adds GET /v1/plan to mux.
func (pr *PlanRelay) Register(mux *http.ServeMux) {
	mux.Handle("GET /v1/plan", pr)
}

// ServeHTTP implements http.Handler.
func (pr *PlanRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if pr.Admission != "" {
		w.Header().Set(admission.AdmissionHeader, pr.Admission)
	}
	body, etag, sig, err := pr.plan(r.Context())
	if err != nil {
		w.Header().Set("Retry-After", "5")
		httpserver.WriteError(w, http.StatusServiceUnavailable, "the collector's plan is unavailable: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	for k, v := range sig {
		w.Header()[k] = v
	}
	w.Write(body)
}

// Refresh fetches the collector's plan unless the one held is younger
// than MaxAge (and calls OnPlan with it), so that a shuffler learns a new
// plan's pools even when no app fetches the plan through it.
func (pr *PlanRelay) Refresh(ctx context.Context) error {
	_, _, _, err := pr.plan(ctx)
	return err
}

// signatureHeaders are the headers of a signed plan, relayed unchanged.
var signatureHeaders = []string{plan.SignatureHeader, plan.SigningKeyHeader, plan.EndorsementsHeader}

func (pr *PlanRelay) plan(ctx context.Context) ([]byte, string, http.Header, error) {
	maxAge := pr.MaxAge
	if maxAge <= 0 {
		maxAge = 30 * time.Second
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.body != nil && time.Since(pr.fetched) < maxAge {
		return pr.body, pr.etag, pr.sig, nil
	}
	body, etag, sig, err := pr.fetchAny(ctx)
	if err != nil {
		if pr.Logger != nil {
			pr.Logger.Warn("fetching the collector's plan", "error", err)
		}
		if pr.body != nil {
			return pr.body, pr.etag, pr.sig, nil
		}
		return nil, "", nil, err
	}
	pr.body, pr.etag, pr.sig, pr.fetched = body, etag, sig, time.Now()
	pr.held.Store(true)
	if pr.OnPlan != nil {
		if p, err := plan.Parse(body); err == nil {
			pr.OnPlan(p)
		} else if pr.Logger != nil {
			pr.Logger.Warn("the collector's plan does not parse; relayed as is", "error", err)
		}
	}
	return body, etag, sig, nil
}

// fetchAny fetches the plan from the collector URLs, the one that
// answered last first; the caller holds mu.
func (pr *PlanRelay) fetchAny(ctx context.Context) ([]byte, string, http.Header, error) {
	var urls []string
	for _, u := range append([]string{pr.Collector}, pr.Collectors...) {
		if u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return nil, "", nil, fmt.Errorf("no collector URL")
	}
	var errs []error
	for k := range urls {
		i := (pr.good + k) % len(urls)
		body, etag, sig, err := pr.fetch(ctx, urls[i])
		if err == nil {
			pr.good = i
			return body, etag, sig, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", urls[i], err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", nil, errors.Join(errs...)
}

func (pr *PlanRelay) fetch(ctx context.Context, base string) ([]byte, string, http.Header, error) {
	c := pr.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/plan", nil)
	if err != nil {
		return nil, "", nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPlanBytes+1))
	if err != nil {
		return nil, "", nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", nil, fmt.Errorf("collector answered %s", resp.Status)
	}
	if len(body) > maxPlanBytes {
		return nil, "", nil, fmt.Errorf("plan over %d bytes", maxPlanBytes)
	}
	sig := http.Header{}
	for _, k := range signatureHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			sig[k] = v
		}
	}
	return body, resp.Header.Get("ETag"), sig, nil
}
