package client_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an admission issuer on loopback: the real issuer.Handler
// over a real SQLite store, authenticating JWTs against a test identity
// provider's key set (a JWKS file), on the test clock; with the verifier
// of its seed, as the shuffler holds it.
type testIssuer struct {
	*httptest.Server
	verifier *issuer.Verifier
	signer   jose.Signer
	clk      *testClock

	mu      sync.Mutex
	posts   int            // POST requests
	asked   map[string]int // times each pool key was asked
	bodies  [][]byte       // the request bodies, in order
	answers [][]byte       // the issuer's answers, in order
	// hold, when set, answers request n (from 1) instead of the issuer's
	// answer rec, which the issuer has committed.
	hold func(n int, rec *httptest.ResponseRecorder, w http.ResponseWriter, r *http.Request)
}

// newTestIssuer starts a testIssuer on clk admitting the pools allow
// admits (nil: every pool).
func newTestIssuer(t *testing.T, clk *testClock, allow func(pool, epoch string, period report.Period) bool) *testIssuer {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, set, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(ctx, auth.Options{JWKSFile: jwks, Issuer: "https://idp.test", Audience: "blanket", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, issuer.SeedSize)
	rand.Read(seed)
	is, err := issuer.New(ctx, issuer.Options{Seed: seed, Dir: dir, Now: clk.Now, Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	ti := &testIssuer{clk: clk, asked: map[string]int{}}
	if ti.verifier, err = issuer.NewVerifier(seed); err != nil {
		t.Fatal(err)
	}
	if ti.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil); err != nil {
		t.Fatal(err)
	}
	h := is.Handler(a)
	ti.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req admission.TokenRequest
		json.Unmarshal(body, &req)
		ti.mu.Lock()
		ti.posts++
		n, hold := ti.posts, ti.hold
		ti.bodies = append(ti.bodies, body)
		for _, item := range req.Requests {
			ti.asked[item.Pool]++
		}
		ti.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		ti.mu.Lock()
		ti.answers = append(ti.answers, rec.Body.Bytes())
		ti.mu.Unlock()
		if hold != nil {
			hold(n, rec, w, r)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(ti.Close)
	return ti
}

// credential returns a Config.Credential giving a JWT of the test
// identity provider for the instance sub, valid for 30 days of the test
// clock; calls counts its calls.
func (ti *testIssuer) credential(t *testing.T, sub string, calls *int) func(context.Context) (string, error) {
	var mu sync.Mutex
	return func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if calls != nil {
			*calls++
		}
		return jwt.Signed(ti.signer).Claims(jwt.Claims{Issuer: "https://idp.test", Subject: sub,
			Audience: jwt.Audience{"blanket"}, Expiry: jwt.NewNumericDate(ti.clk.Now().Add(30 * day))}).Serialize()
	}
}

// requests returns the POSTs served and a copy of the pool keys asked.
func (ti *testIssuer) requests() (int, map[string]int) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	asked := make(map[string]int, len(ti.asked))
	for k, n := range ti.asked {
		asked[k] = n
	}
	return ti.posts, asked
}

// shufflerCheck returns a fakeServer.tokenCheck that checks envelopes'
// tokens as the shuffler does with the verifier v: a token is required,
// must verify for the envelope's pool key, and is taken once.
func shufflerCheck(v *issuer.Verifier) func(e report.Envelope) (string, string) {
	spent := issuer.NewMemorySpent(30 * day)
	return func(e report.Envelope) (string, string) {
		if len(e.Token) == 0 {
			return "token_missing", "no admission token"
		}
		tok, err := admission.ParseToken(e.Token)
		if err == nil {
			err = v.Verify(e.Metric, tok)
		}
		if err != nil {
			return "token_invalid", err.Error()
		}
		if fresh, err := spent.Spend(context.Background(), e.Metric, tok); err != nil || !fresh {
			return "token_spent", "spent before"
		}
		return "", ""
	}
}

// admissionConfig is clockConfig with a Credential for the instance
// "device-1" of ti and ti as the issuer. The background loop's ticks are
// an hour apart: the tests drive the admitter with Flush.
func admissionConfig(t *testing.T, f *fakeServer, ti *testIssuer, dir string) (client.Config, *testClock) {
	cfg := fastConfig(f, dir)
	cfg.Now = ti.clk.Now
	cfg.Credential = ti.credential(t, "device-1", nil)
	cfg.Issuer = ti.URL
	cfg.UploadInterval = time.Hour
	return cfg, ti.clk
}

// admittedProvider starts, against f, a test issuer whose tokens f's
// shuffler requires and a Provider with admissionConfig, and waits for its
// first round's tokens (of two periods: 2 per pool).
func admittedProvider(t *testing.T, f *fakeServer, tokens int64) (*testIssuer, *client.Provider, *testClock) {
	t.Helper()
	ti := newTestIssuer(t, newTestClock(), nil)
	f.setAdmission(client.AdmissionTokens, shufflerCheck(ti.verifier))
	cfg, clk := admissionConfig(t, f, ti, t.TempDir())
	p := newProvider(t, cfg)
	waitStats(t, p, "the tokens of two periods", func(s client.Stats) bool { return s.Tokens == tokens })
	return ti, p, clk
}

// poolKeys returns the pool keys of the test plan's metrics in period d
// days after t0's.
func poolKeys(p *client.Provider, d int) []string {
	pl := p.Plan()
	per := pl.ReportPeriod(t0.Add(time.Duration(d) * day))
	var out []string
	for _, m := range pl.Metrics {
		out = append(out, report.PeriodPoolKey(pl.Pool(m.Name), pl.Epoch(), per))
	}
	return out
}

// waitStats waits until ok(p.Stats()) holds, for at most 10 s.
func waitStats(t *testing.T, p *client.Provider, what string, ok func(client.Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(p.Stats()); {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTokensFetchedAheadForEveryPool: a Provider with a Credential asks
// the issuer, at start, in one request, for the tokens of every pool of
// the plan in the current period and the next, although the app records
// one metric only; once the period ends it asks for the period after the
// next, and uploads the report of the metric recorded with the token of
// its pool key, which the shuffler's verifier takes. Each pool key is
// asked once.
func TestTokensFetchedAheadForEveryPool(t *testing.T) {
	f := newFakeServer(t, nil)
	ti := newTestIssuer(t, newTestClock(), nil)
	f.setAdmission(client.AdmissionTokens, shufflerCheck(ti.verifier))
	var (
		mu  sync.Mutex
		got []report.Envelope
	)
	f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, envs...)
		return 0, nil, true
	}, nil)
	cfg, clk := admissionConfig(t, f, ti, t.TempDir())
	p := newProvider(t, cfg)
	waitStats(t, p, "the tokens of two periods", func(s client.Stats) bool { return s.Tokens == 6 })
	posts, asked := ti.requests()
	want := append(poolKeys(p, 0), poolKeys(p, 1)...)
	if posts != 1 || len(asked) != len(want) {
		t.Fatalf("at start the issuer got %d requests for %v; want one for %v", posts, asked, want)
	}
	for _, k := range want {
		if asked[k] != 1 {
			t.Errorf("pool key %s asked %d times at start, want once", k, asked[k])
		}
	}
	ctx := context.Background()
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	posts, asked = ti.requests()
	want = append(want, poolKeys(p, 2)...)
	if posts != 2 || len(asked) != len(want) {
		t.Fatalf("after the period the issuer got %d requests for %v; want two, for %v", posts, asked, want)
	}
	for _, k := range want {
		if asked[k] != 1 {
			t.Errorf("pool key %s asked %d times, want once", k, asked[k])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the shuffler got %d envelopes, want the report of app/screen", len(got))
	}
	tok, err := admission.ParseToken(got[0].Token)
	if err != nil {
		t.Fatalf("the envelope's token: %v", err)
	}
	if err := ti.verifier.Verify(got[0].Metric, tok); err != nil || got[0].Metric != poolKeys(p, 0)[0] {
		t.Errorf("the token of the envelope of %s: %v", got[0].Metric, err)
	}
	if st := p.Stats(); st.Accepted != 1 || st.Rejected != 0 || st.Tokens != 9 || st.TokensRefused != 0 {
		t.Errorf("stats %+v: want one report accepted and 9 tokens granted", st)
	}
}

// TestFlushAsksForTheCurrentPeriod: an app whose background loop did not
// run in a period (a device asleep) and that records then gets that
// period's tokens at its Flush in the period, for every pool, as the loop
// would have asked; not only once the period has ended, beside the upload,
// which would tell the issuer that it recorded then and when it uploads.
// (Found in review: a Flush that asked only for its held reports' pool
// keys did so.) The report then goes with its token.
func TestFlushAsksForTheCurrentPeriod(t *testing.T) {
	f := newFakeServer(t, nil)
	ti, p, clk := admittedProvider(t, f, 6)
	ctx := context.Background()
	clk.Advance(2 * day) // day 2: no round of the background loop runs
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	_, asked := ti.requests()
	for _, k := range poolKeys(p, 2) {
		if asked[k] != 1 {
			t.Errorf("pool key %s of the period recorded in asked %d times by its Flush, want once", k, asked[k])
		}
	}
	closeAndFlush(t, p, clk)
	if _, again := ti.requests(); again[poolKeys(p, 2)[0]] != 1 {
		t.Errorf("the period's pool keys asked again after it ended: %v", again)
	}
	if st := p.Stats(); st.Accepted != 1 || st.Rejected != 0 {
		t.Errorf("stats %+v: want the report accepted with its token", st)
	}
}

// TestTokensFetchedForThePlansPool: under joint and parallel travel the
// plan has one pool, whose pool keys of the current and the next period
// are asked at start; the period's message goes with its token.
func TestTokensFetchedForThePlansPool(t *testing.T) {
	for _, travel := range []string{"joint", "parallel"} {
		t.Run(travel, func(t *testing.T) {
			f := newPooledServer(t, travel)
			ti, p, clk := admittedProvider(t, f, 2)
			pl := p.Plan()
			_, asked := ti.requests()
			for d := range 2 {
				k := report.PeriodPoolKey(pl.Pool(""), pl.Epoch(), pl.ReportPeriod(t0.Add(time.Duration(d)*day)))
				if asked[k] != 1 || len(asked) != 2 {
					t.Errorf("asked %v at start; want the pool keys of %s in two periods, once each", asked, pl.Pool(""))
				}
			}
			ctx := context.Background()
			m := p.Meter("app")
			if err := errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Categorical("feature").Record(ctx, "a"), m.Sum("bytes").Record(ctx, 3)); err != nil {
				t.Fatal(err)
			}
			closeAndFlush(t, p, clk)
			if st := p.Stats(); st.Messages != 1 || st.Accepted != 1 || st.Rejected != 0 {
				t.Errorf("stats %+v: want the period's message accepted with its token", st)
			}
		})
	}
}

// TestTokenRequestSurvivesCrash: a Provider stores its token request
// before it sends it; the issuer commits the grants, and the Provider
// dies (its outbox closed under it, no Shutdown) before it reads the
// answer. A Provider opened on the same outbox file sends the stored
// request again, byte for byte, and the issuer answers it with the same
// evaluations: it gets the tokens, which verify, and nothing is refused.
// (Blinding a new request instead would be refused: the issuer granted
// these pool keys to the instance.)
func TestTokenRequestSurvivesCrash(t *testing.T) {
	f := newFakeServer(t, nil)
	ti := newTestIssuer(t, newTestClock(), nil)
	committed, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	ti.hold = func(n int, rec *httptest.ResponseRecorder, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			close(committed)
			select { // the dead Provider never reads the answer
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}
	dir := t.TempDir()
	path := filepath.Join(dir, client.OutboxFile)
	ctx := context.Background()
	o1, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := admissionConfig(t, f, ti, dir)
	cfg.Outbox = o1
	newProvider(t, cfg) // its Shutdown, at cleanup, finds its outbox closed
	select {
	case <-committed:
	case <-time.After(10 * time.Second):
		t.Fatal("no token request reached the issuer")
	}
	o1.Close() // the crash

	o2, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	stored, err := o2.TokenRequests(ctx)
	if err != nil || len(stored) != 1 || len(stored[0].Pools) != 6 {
		t.Fatalf("stored token requests after the crash: %+v, %v; want the one sent", stored, err)
	}
	cfg.Outbox = o2
	p2 := newProvider(t, cfg)
	waitStats(t, p2, "the tokens of the stored request", func(s client.Stats) bool { return s.Tokens+s.TokensRefused == 6 })
	if st := p2.Stats(); st.Tokens != 6 || st.TokensRefused != 0 {
		t.Fatalf("after the restart: %d tokens, %d refused; want the 6 granted before the crash", st.Tokens, st.TokensRefused)
	}
	ti.mu.Lock()
	bodies, answers := slices.Clone(ti.bodies), slices.Clone(ti.answers)
	ti.mu.Unlock()
	if len(bodies) != 2 || !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatalf("the issuer got %d requests; want the stored one twice, the same bytes:\n%s\n%s", len(bodies), bodies[0], bodies[len(bodies)-1])
	}
	if !bytes.Equal(answers[0], answers[1]) {
		t.Errorf("the issuer answered the same request otherwise:\n%s\n%s", answers[0], answers[1])
	}
	if reqs, _ := o2.TokenRequests(ctx); len(reqs) != 0 {
		t.Errorf("stored token requests after the answer: %+v, want none", reqs)
	}
	pts, err := o2.PoolTokens(ctx)
	if err != nil || len(pts) != 6 {
		t.Fatalf("tokens stored: %+v, %v", pts, err)
	}
	for _, pt := range pts {
		tok, err := admission.ParseToken(pt.Token)
		if err == nil {
			err = ti.verifier.Verify(pt.PoolKey, tok)
		}
		if err != nil {
			t.Errorf("the token of %s: %v", pt.PoolKey, err)
		}
	}
}

// TestRefusedTokenDropsAtDeadline: the issuer does not admit the pool of
// app/feature. The Provider asks for it once per pool key and stores the
// refusal: flushing again asks the issuer nothing. The report of
// app/feature waits in the outbox without holding back the report of
// app/screen, which goes with its token, and at its period's deadline it
// is dropped, never sent: a Drop saying no_token with the issuer's
// refusal, Stats.NoToken, and no charge in the ledger.
func TestRefusedTokenDropsAtDeadline(t *testing.T) {
	f := newFakeServer(t, nil)
	ti := newTestIssuer(t, newTestClock(), func(pool, _ string, _ report.Period) bool { return pool != "app/feature" })
	f.setAdmission(client.AdmissionTokens, shufflerCheck(ti.verifier))
	cfg, clk := admissionConfig(t, f, ti, t.TempDir())
	drops := &dropSink{}
	cfg.OnDrop = drops.add
	p := newProvider(t, cfg)
	waitStats(t, p, "two periods' answers", func(s client.Stats) bool { return s.Tokens == 4 && s.TokensRefused == 2 })
	ctx := context.Background()
	m := p.Meter("app")
	if err := errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Categorical("feature").Record(ctx, "a")); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	posts, _ := ti.requests()
	for range 3 {
		flush(t, p)
	}
	if again, asked := ti.requests(); again != posts {
		t.Errorf("flushing again in the same period sent %d more requests to the issuer (%v); want none", again-posts, asked)
	}
	keys := f.keyCounts()
	if screen, feature := poolKeys(p, 0)[0], poolKeys(p, 0)[1]; keys[screen] != 1 || keys[feature] != 0 {
		t.Errorf("the shuffler holds %v; want the report of app/screen and not that of app/feature", keys)
	}
	if d := drops.got(); len(d) != 0 {
		t.Errorf("drops before the deadline: %+v", d)
	}
	// The period's deadline: its end plus the plan's grace, one period.
	clk.Advance(day)
	flush(t, p)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var noToken []client.Drop
	for _, d := range drops.got() {
		if d.Reason == client.DropNoToken {
			noToken = append(noToken, d)
		}
	}
	per := p.Plan().ReportPeriod(t0)
	if len(noToken) != 1 || noToken[0].Metric != "app/feature" || noToken[0].Start.Unix() != per.Start || !strings.Contains(noToken[0].Detail, admission.RefusedPool) {
		t.Errorf("drops %+v; want one no_token drop of app/feature in the first period naming the issuer's refusal %q", drops.got(), admission.RefusedPool)
	}
	if st := p.Stats(); st.NoToken != 1 || st.Rejected != 0 {
		t.Errorf("stats %+v: want one report dropped for want of a token, none refused by the shuffler", st)
	}
	if keys := f.keyCounts(); keys[poolKeys(p, 0)[1]] != 0 {
		t.Errorf("the report of app/feature reached the shuffler: %v", keys)
	}
}

// TestNoTokenLedger: the report dropped at its deadline for want of a
// token is in the ledger as no_token, uncharged (it never left the
// device).
func TestNoTokenLedger(t *testing.T) {
	f := newFakeServer(t, nil)
	ti := newTestIssuer(t, newTestClock(), func(string, string, report.Period) bool { return false })
	f.setAdmission(client.AdmissionTokens, shufflerCheck(ti.verifier))
	cfg, clk := admissionConfig(t, f, ti, t.TempDir())
	p := newProvider(t, cfg)
	ctx := context.Background()
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	closeAndFlush(t, p, clk)
	l, err := p.Ledger(ctx)
	if err != nil || len(l) != 1 || l[0].Upload != client.UploadNoToken || l[0].Reports != 0 || l[0].Eps0 != 0 {
		t.Errorf("ledger %+v, %v; want the report of app/screen no_token, uncharged", l, err)
	}
}

// TestCredentialRequired: NewProvider in ModeOn fails with
// ErrCredentialRequired when the plan route says the shuffler requires
// admission tokens and the app has no Credential; it starts when the
// route says open, says nothing (a server before admission), or the app
// has one.
func TestCredentialRequired(t *testing.T) {
	for _, c := range []struct {
		header     string
		credential bool
		want       error
	}{
		{client.AdmissionTokens, false, client.ErrCredentialRequired},
		{client.AdmissionTokens, true, nil},
		{client.AdmissionOpen, false, nil},
		{"", false, nil},
	} {
		t.Run(c.header+map[bool]string{true: "+credential"}[c.credential], func(t *testing.T) {
			f := newFakeServer(t, nil)
			f.setAdmission(c.header, nil)
			cfg := fastConfig(f, t.TempDir())
			if c.credential {
				cfg.Credential = func(context.Context) (string, error) { return "", errors.New("no issuer in this test") }
			}
			p, err := client.NewProvider(context.Background(), cfg)
			if !errors.Is(err, c.want) {
				t.Fatalf("NewProvider: %v, want %v", err, c.want)
			}
			if err != nil {
				if p != nil {
					t.Error("NewProvider failed and returned a Provider")
				}
				if !strings.Contains(err.Error(), "Config.Credential") {
					t.Errorf("the error %q does not name Config.Credential", err)
				}
				return
			}
			p.Shutdown(context.Background())
		})
	}
}

// TestLocalModeAsksNoIssuer: in ModeLocal and ModeOff a Provider with a
// Credential neither asks the issuer nor calls the Credential, whatever
// it records and flushes.
func TestLocalModeAsksNoIssuer(t *testing.T) {
	for _, mode := range []client.Mode{client.ModeLocal, client.ModeOff} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFakeServer(t, nil)
			ti := newTestIssuer(t, newTestClock(), nil)
			dir := t.TempDir()
			cachePlan(t, dir, f.URL, f.pl)
			cfg, clk := admissionConfig(t, f, ti, dir)
			var calls int
			cfg.Credential = ti.credential(t, "device-1", &calls)
			cfg.Mode = mode
			p := newProvider(t, cfg)
			ctx := context.Background()
			for range 2 {
				if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
					t.Fatal(err)
				}
				closeAndFlush(t, p, clk)
			}
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if posts, _ := ti.requests(); posts != 0 || calls != 0 {
				t.Errorf("the issuer got %d requests and the Credential %d calls; want none", posts, calls)
			}
			if gets, posts := f.requests(); gets != 0 || posts != 0 {
				t.Errorf("the server got %d GETs and %d POSTs; want none", gets, posts)
			}
		})
	}
}

// TestShufflerTokenRefusals: a report the shuffler refuses for its token
// is a Drop saying why: token_missing (the app has no Credential) is
// no_token, token_invalid (a shuffler holding another issuer's seed) is
// token_invalid and token_spent is token_spent; the invalid token is
// discarded, the spent one marked spent.
func TestShufflerTokenRefusals(t *testing.T) {
	other := make([]byte, issuer.SeedSize)
	rand.Read(other)
	foreign, err := issuer.NewVerifier(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code       string
		credential bool
		check      func(ti *testIssuer) func(report.Envelope) (string, string)
		want       client.DropReason
	}{
		{"token_missing", false, func(ti *testIssuer) func(report.Envelope) (string, string) { return shufflerCheck(ti.verifier) }, client.DropNoToken},
		{"token_invalid", true, func(*testIssuer) func(report.Envelope) (string, string) { return shufflerCheck(foreign) }, client.DropTokenInvalid},
		{"token_spent", true, func(*testIssuer) func(report.Envelope) (string, string) {
			return func(report.Envelope) (string, string) { return "token_spent", "spent before" }
		}, client.DropTokenSpent},
	} {
		t.Run(c.code, func(t *testing.T) {
			f := newFakeServer(t, nil)
			ti := newTestIssuer(t, newTestClock(), nil)
			f.setAdmission(client.AdmissionOpen, c.check(ti))
			cfg, clk := admissionConfig(t, f, ti, t.TempDir())
			drops := &dropSink{}
			cfg.OnDrop = drops.add
			if !c.credential {
				cfg.Credential = nil
			}
			p := newProvider(t, cfg)
			if c.credential {
				waitStats(t, p, "the tokens", func(s client.Stats) bool { return s.Tokens == 6 })
			}
			ctx := context.Background()
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			closeAndFlush(t, p, clk)
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			d := drops.got()
			if len(d) != 1 || d[0].Reason != c.want || d[0].Metric != "app/screen" {
				t.Fatalf("drops %+v, want one %s drop of app/screen", d, c.want)
			}
			if st := p.Stats(); st.Rejected != 1 || st.Accepted != 0 {
				t.Errorf("stats %+v: want the report rejected", st)
			}
			if !c.credential {
				return
			}
			o, err := client.OpenSQLiteOutbox(ctx, filepath.Join(cfg.DataDir, client.OutboxFile))
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			pts, _ := o.PoolTokens(ctx)
			key := poolKeys(p, 0)[0]
			i := slices.IndexFunc(pts, func(pt client.PoolToken) bool { return pt.PoolKey == key })
			switch {
			case c.code == "token_invalid" && i >= 0:
				t.Errorf("the invalid token of %s is still stored: %+v", key, pts[i])
			case c.code == "token_spent" && (i < 0 || !pts[i].Spent()):
				t.Errorf("the token of %s is not marked spent: %+v", key, pts)
			}
		})
	}
}
