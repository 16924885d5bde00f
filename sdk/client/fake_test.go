package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// testEps0 is the local budget of every metric of the test plan; the plan
// is "calibrated" by hand, since the tests exercise the client, not the
// accountant.
const testEps0 = 2

// testPlan returns a calibrated plan of three metrics (k-RR, RAPPOR,
// summation) sealed to pub.
func testPlan(pub []byte) *plan.Plan {
	p := &plan.Plan{
		Version: plan.Version,
		Target:  plan.Target{Eps: 1, Delta: 1e-6},
		NMin:    100,
		Travel:  "separate",
		Metrics: []plan.Metric{
			{Name: "app/screen", Plugin: "krr", Categories: []string{"home", "search", "settings"}, Other: "other"},
			{Name: "app/feature", Plugin: "rappor", Categories: []string{"a", "b", "c", "d"}},
			{Name: "app/bytes", Plugin: "summation", Lo: 0, Hi: 100, Params: map[string]string{"k": "4"}},
		},
		Grace:     1, // the tests of late periods count one period of grace
		Guarantee: &plan.Guarantee{Eps: 1, Delta: 1e-6, Rule: "by hand, for tests"},
	}
	for i := range p.Metrics {
		p.Metrics[i].Version, p.Metrics[i].Eps0, p.Metrics[i].Delta = "1", testEps0, 1e-6/3
	}
	if pub != nil {
		p.CollectorKeys = []plan.CollectorKey{plan.NewCollectorKey(pub, 0)}
	}
	return p
}

// fakeServer is a shuffler and collector in one, as far as the client can
// tell: it serves a plan and takes uploads, deduplicating by report id like
// the real shuffler, and opens every report with the collector's private
// key of the report's period in the plan it serves (rotate adds keys).
type fakeServer struct {
	*httptest.Server
	// priv is the first key; privs every key by id.
	priv  *report.PrivateKey
	privs map[string]*report.PrivateKey
	// sealedTo counts the reports opened per key id.
	sealedTo map[string]int

	mu   sync.Mutex
	plan []byte // served at /v1/plan
	sig  string // plan's signature (plan.SignatureHeader); "": unsigned
	// endorsements is served as plan.EndorsementsHeader when not "".
	endorsements string
	etag         string // the plan's ETag: its digest, quoted
	planErr      int    // when non-zero, /v1/plan answers this status
	// notModified counts plan requests answered 304.
	notModified int
	pl          *plan.Plan        // the plan served, for its bindings
	ids         map[report.ID]int // deliveries per id, counting duplicates
	// keys counts the distinct envelopes per pool key (the pool, epoch
	// and period they were sent for).
	keys    map[string]int
	raw     int // envelopes delivered, duplicates included
	posts   int // POST requests
	gets    int // GET requests
	opened  map[string][][]byte
	openErr error
	// names are the plan's metrics in order; messages the decoded
	// messages of pooled travel, in arrival order.
	epoch          string // of the plan served
	names          []string
	messages       [][]report.Part
	sealedMessages [][]byte
	// respond, when set, decides the answer to POST number n (from 1)
	// before the body is stored; store=false answers without storing.
	respond func(n int, envs []report.Envelope) (status int, header http.Header, store bool)
	// afterStore, when set, runs after storing, before answering 202.
	afterStore func(n int)
	// refuse, when set, gives the reason the server refuses an envelope
	// for good ("" takes it), as the shuffler does a period past its
	// grace: a refused envelope is not stored, is counted rejected in the
	// 202 answer and is named with its reason in its errors, at most
	// nameMax of them per answer (0: all), as the shuffler names only the
	// first few.
	refuse  func(e report.Envelope) string
	nameMax int
	// refused counts the refusals per id.
	refused map[report.ID]int
	// admission, when set, is the plan route's client.AdmissionHeader.
	admission string
	// tokenCheck, when set, is asked about every envelope not stored
	// before (a duplicate is answered as one, whatever its token), as the
	// shuffler checks admission tokens: a code refuses the envelope,
	// named in the 202 answer with the code and why. It runs with mu
	// held.
	tokenCheck func(e report.Envelope) (code, why string)
}

// envelopeError is an entry of the errors of the shuffler's 202 answer.
type envelopeError struct {
	Index int    `json:"index"`
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// setAdmission sets admission and tokenCheck.
func (f *fakeServer) setAdmission(header string, check func(e report.Envelope) (code, why string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admission, f.tokenCheck = header, check
}

// setRefuse sets refuse and nameMax.
func (f *fakeServer) setRefuse(refuse func(e report.Envelope) string, nameMax int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse, f.nameMax = refuse, nameMax
}

// testPlanSigner is the plan-signing key of every fake server, from a
// fixed seed, so that the crash test's child process pins it too;
// testPlanKey is its public key as Config.PlanKey takes it.
var (
	testPlanSigner = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	testPlanKey    = plan.FormatSigningKey(testPlanSigner.Public().(ed25519.PublicKey))
)

func newFakeServer(t testing.TB, p *plan.Plan) *fakeServer {
	t.Helper()
	f, err := startFake(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// startFake starts a fakeServer for p (testPlan when nil); the caller
// closes it.
func startFake(p *plan.Plan) (*fakeServer, error) {
	priv, pub, err := report.GenerateKey()
	if err != nil {
		return nil, err
	}
	sk, err := report.ParsePrivateKey(priv)
	if err != nil {
		return nil, err
	}
	if p == nil {
		p = testPlan(pub)
	}
	f := &fakeServer{priv: sk, privs: map[string]*report.PrivateKey{sk.ID(): sk}, sealedTo: map[string]int{},
		ids: map[report.ID]int{}, keys: map[string]int{}, opened: map[string][][]byte{}, refused: map[report.ID]int{}}
	f.setPlan(p)
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f, nil
}

// setHooks sets respond and afterStore.
func (f *fakeServer) setHooks(respond func(n int, envs []report.Envelope) (int, http.Header, bool), afterStore func(n int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respond, f.afterStore = respond, afterStore
}

// requests returns the GET and POST requests served.
func (f *fakeServer) requests() (gets, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.posts
}

// setPlanErr makes /v1/plan answer status (0: serve the plan).
func (f *fakeServer) setPlanErr(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.planErr = status
}

func (f *fakeServer) setPlan(p *plan.Plan) {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan = b
	f.sig, f.endorsements = plan.SignPlan(testPlanSigner, b, nil).Headers()
	f.etag = `"` + p.Digest() + `"`
	f.pl = clonePlanJSON(p)
	f.names = nil
	f.epoch = p.Epoch()
	for _, m := range p.Metrics {
		f.names = append(f.names, m.Name)
	}
}

// rotate adds a new collector key to the plan served, sealing the periods
// from from (Unix seconds) on, and returns its id.
func (f *fakeServer) rotate(t testing.TB, from int64) string {
	t.Helper()
	pub, sk := servertest.CollectorKey(t)
	f.mu.Lock()
	f.privs[sk.ID()] = sk
	p := clonePlanJSON(f.pl)
	f.mu.Unlock()
	p.CollectorKeys = append(p.CollectorKeys, plan.NewCollectorKey(pub, from))
	f.setPlan(p)
	return sk.ID()
}

// sealedCounts returns a copy of the reports opened per key id.
func (f *fakeServer) sealedCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.sealedTo)
}

// setSignature makes the plan served carry sig and endorsements instead
// of the signature of testPlanSigner ("" for none).
func (f *fakeServer) setSignature(sig, endorsements string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sig, f.endorsements = sig, endorsements
}

// planBytes returns the plan served.
func (f *fakeServer) planBytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plan
}

// clonePlanJSON returns a deep copy of p.
func clonePlanJSON(p *plan.Plan) *plan.Plan {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	var c plan.Plan
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// periodBinding returns the binding reports of pool in period are sealed
// under in plan p, as the collector computes it: the metric's binding with
// the period set, or the pool's binding over every metric's binding with
// the period set.
func periodBinding(p *plan.Plan, pool string, period report.Period) report.Binding {
	if p.Pooled() && pool == p.Pool("") {
		bs := p.Bindings()
		for i := range bs {
			bs[i].Period = period
		}
		return report.PoolBinding(pool, p.Travel, bs)
	}
	b := p.Binding(pool)
	b.Period = period
	return b
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/plan":
		f.mu.Lock()
		f.gets++
		b, sig, end, status, etag := f.plan, f.sig, f.endorsements, f.planErr, f.etag
		same := r.Header.Get("If-None-Match") == etag
		if same && status == 0 {
			f.notModified++
		}
		if f.admission != "" {
			w.Header().Set(client.AdmissionHeader, f.admission)
		}
		f.mu.Unlock()
		if status != 0 {
			http.Error(w, "plan unavailable", status)
			return
		}
		w.Header().Set("ETag", etag)
		if same {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if sig != "" {
			w.Header().Set(plan.SignatureHeader, sig)
		}
		if end != "" {
			w.Header().Set(plan.EndorsementsHeader, end)
		}
		w.Write(b)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/reports":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		envs, err := report.DecodeEnvelopes(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.posts++
		n := f.posts
		respond, after := f.respond, f.afterStore
		f.mu.Unlock()
		if respond != nil {
			status, h, store := respond(n, envs)
			if !store {
				for k, v := range h {
					w.Header()[k] = v
				}
				w.WriteHeader(status)
				return
			}
		}
		var acc, dup, rej int
		var named []envelopeError
		f.mu.Lock()
		for i, e := range envs {
			if f.refuse != nil {
				if why := f.refuse(e); why != "" {
					rej++
					f.refused[e.ID]++
					if f.nameMax == 0 || len(named) < f.nameMax {
						named = append(named, envelopeError{Index: i, Error: why})
					}
					continue
				}
			}
			if f.tokenCheck != nil && f.ids[e.ID] == 0 {
				if code, why := f.tokenCheck(e); code != "" {
					rej++
					f.refused[e.ID]++
					named = append(named, envelopeError{Index: i, Error: why, Code: code})
					continue
				}
			}
			f.raw++
			f.ids[e.ID]++
			if f.ids[e.ID] > 1 {
				dup++
				continue
			}
			acc++
			f.keys[e.Metric]++
			pool, epoch, period, err := report.ParsePoolKey(e.Metric)
			if err != nil && f.openErr == nil {
				f.openErr = fmt.Errorf("report %s: %w", e.ID, err)
			}
			if epoch != f.epoch && f.openErr == nil {
				f.openErr = fmt.Errorf("report %s of %q: epoch %q, the plan's is %q", e.ID, pool, epoch, f.epoch)
			}
			if period.IsZero() && f.openErr == nil {
				f.openErr = fmt.Errorf("report %s of %q: no reporting period", e.ID, e.Metric)
			}
			// As the collector: the key of the report's period, by the
			// schedule served.
			priv := f.priv
			if ks, kerr := f.pl.KeySchedule(); kerr == nil {
				if k, ok := ks.For(period); ok && f.privs[k.ID] != nil {
					priv = f.privs[k.ID]
				}
			}
			pt, err := report.Open(priv, periodBinding(f.pl, pool, period), e.Sealed)
			if err != nil && f.openErr == nil {
				f.openErr = fmt.Errorf("report %s of %q: %w", e.ID, e.Metric, err)
			}
			if err == nil {
				f.sealedTo[priv.ID()]++
			}
			if !strings.HasPrefix(pool, plan.PoolPrefix) || err != nil {
				f.opened[pool] = append(f.opened[pool], pt)
				continue
			}
			parts, err := report.DecodeMessage(pt)
			if err != nil && f.openErr == nil {
				f.openErr = fmt.Errorf("message %s of %q: %w", e.ID, e.Metric, err)
			}
			f.messages = append(f.messages, parts)
			f.sealedMessages = append(f.sealedMessages, e.Sealed)
			for _, p := range parts {
				if p.Metric >= len(f.names) {
					f.openErr = fmt.Errorf("message %s of %q: part of metric %d", e.ID, e.Metric, p.Metric)
					continue
				}
				f.opened[f.names[p.Metric]] = append(f.opened[f.names[p.Metric]], p.Report)
			}
		}
		f.mu.Unlock()
		if after != nil {
			after(n)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]any{"accepted": acc, "duplicates": dup, "rejected": rej, "errors": named})
	default:
		http.NotFound(w, r)
	}
}

// counts returns the distinct ids stored, the envelopes delivered
// (duplicates included) and the largest delivery count of one id.
func (f *fakeServer) counts() (distinct, raw, maxPerID int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ids {
		maxPerID = max(maxPerID, c)
	}
	return len(f.ids), f.raw, maxPerID
}

// keyCounts returns a copy of the distinct envelopes per pool key.
func (f *fakeServer) keyCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.keys)
}

// checkReports opens nothing new: it checks that every stored report
// opened and is a valid report of its metric's randomizer (Accumulate
// counts no malformed report), and returns the number per metric.
func (f *fakeServer) checkReports(t *testing.T, p *plan.Plan) map[string]int {
	t.Helper()
	return f.checkReportsWith(t, p, client.InProcess(builtin.Factories()))
}

// checkReportsWith is checkReports opening randomizers with open.
func (f *fakeServer) checkReportsWith(t *testing.T, p *plan.Plan, open plan.Opener) map[string]int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openErr != nil {
		t.Fatalf("a report did not open with the collector key: %v", f.openErr)
	}
	ctx := context.Background()
	out := map[string]int{}
	for metric, reps := range f.opened {
		m := p.Metric(metric)
		if m == nil {
			t.Fatalf("report of metric %q not in the plan", metric)
		}
		r, err := open(ctx, m.Plugin, m.Config())
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.Accumulate(ctx, m.Eps0, reps)
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
		if err != nil {
			t.Fatalf("metric %q: %v", metric, err)
		}
		if st.Malformed != 0 || st.N != int64(len(reps)) {
			t.Fatalf("metric %q: %d reports, statistic has N = %d, malformed = %d", metric, len(reps), st.N, st.Malformed)
		}
		out[metric] = len(reps)
	}
	return out
}
