package issuer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/internal/servertest"
)

// stubAuth takes the bearer tokens "good:<subject>", refuses others, and
// answers "keys-down" with auth.ErrKeysUnavailable.
type stubAuth struct{}

func (stubAuth) Authenticate(_ context.Context, bearer string) (auth.Identity, error) {
	if sub, ok := strings.CutPrefix(bearer, "good:"); ok {
		return instance(sub), nil
	}
	if bearer == "keys-down" {
		return auth.Identity{}, fmt.Errorf("%w: %w", auth.ErrRefused, auth.ErrKeysUnavailable)
	}
	return auth.Identity{}, fmt.Errorf("%w: %w", auth.ErrRefused, auth.ErrSignature)
}

// post sends body to h as a token request with the bearer token.
func post(h http.Handler, bearer, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, admission.TokensPath, bytes.NewReader(body))
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHandlerAnswersErrorsAsJSON: every refusal of a whole request has
// its status and a JSON {"error": ...} body.
func TestHandlerAnswersErrorsAsJSON(t *testing.T) {
	f := newFixture(t, "sqlite", 1, Options{})
	h := f.issuers[0].Handler(stubAuth{})
	_, req, err := admission.Blind([]string{poolKey("a", 100)})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(req)
	many := &admission.TokenRequest{Requests: make([]admission.BlindedItem, admission.MaxRequests+1)}
	tooMany, _ := json.Marshal(many)
	for _, c := range []struct {
		name        string
		bearer, ct  string
		body        []byte
		status      int
		errContains string
	}{
		{"no token", "", "", good, http.StatusUnauthorized, "no bearer token"},
		{"bad token", "forged", "", good, http.StatusUnauthorized, "bad signature"},
		{"keys down", "keys-down", "", good, http.StatusServiceUnavailable, "key set unavailable"},
		{"not JSON", "good:i1", "text/plain", good, http.StatusUnsupportedMediaType, "application/json"},
		{"garbage", "good:i1", "", []byte("{"), http.StatusBadRequest, "not a token request"},
		{"bad base64", "good:i1", "", []byte(`{"requests":[{"pool":"x","blinded":"!!"}]}`), http.StatusBadRequest, "base64url"},
		{"two values", "good:i1", "", append(good, good...), http.StatusBadRequest, "more than one"},
		{"empty", "good:i1", "", []byte(`{"requests":[]}`), http.StatusBadRequest, "0 requests"},
		{"too many", "good:i1", "", tooMany, http.StatusBadRequest, "257 requests"},
		{"too large", "good:i1", "", bytes.Repeat([]byte(" "), admission.MaxBodyBytes+1), http.StatusRequestEntityTooLarge, "body over"},
		{"granted", "good:i1", "application/json; charset=utf-8", good, http.StatusOK, ""},
	} {
		w := post(h, c.bearer, c.ct, c.body)
		var body struct{ Error string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Errorf("%s: body %q is not JSON", c.name, w.Body)
		}
		if w.Code != c.status || !strings.Contains(body.Error, c.errContains) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, w.Code, body.Error, c.status, c.errContains)
		}
		if w.Code == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 without a Bearer challenge", c.name)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, admission.TokensPath, nil))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
		t.Errorf("GET: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
}

// commitChecker is a ResponseWriter that, before the status goes out,
// counts the committed grants of a pool key.
type commitChecker struct {
	http.ResponseWriter
	check func()
	once  bool
}

func (c *commitChecker) WriteHeader(status int) {
	if !c.once {
		c.once = true
		c.check()
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *commitChecker) Write(b []byte) (int, error) {
	if !c.once {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// TestGrantIsCommittedBeforeTheAnswer: when the handler starts its
// answer, the grant is already committed (another connection sees it),
// so an app that got the answer, or crashed waiting for it, finds its
// grant on retry.
func TestGrantIsCommittedBeforeTheAnswer(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, kind, 1, Options{})
			is := f.issuers[0]
			pool := poolKey("a", 100)
			p, req, err := admission.Blind([]string{pool})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(req)
			r := httptest.NewRequest(http.MethodPost, admission.TokensPath, bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer good:i1")
			rec := httptest.NewRecorder()
			seen := -1
			w := &commitChecker{ResponseWriter: rec, check: func() { seen = countGrants(t, is, pool) }}
			is.Handler(stubAuth{}).ServeHTTP(w, r)
			if rec.Code != http.StatusOK || seen != 1 {
				t.Fatalf("answered %d with %d grants committed before, want 200 after 1", rec.Code, seen)
			}
			var resp admission.TokenResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			tokens, err := admission.Finalize(p, &resp)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.verifier.Verify(pool, tokens[0]); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestHandlerAnswers503WhenTheStoreFails: a store that fails is answered
// 503, so that the app sends the same request again.
func TestHandlerAnswers503WhenTheStoreFails(t *testing.T) {
	f := newFixture(t, "sqlite", 1, Options{})
	f.issuers[0].store.close()
	_, req, _ := admission.Blind([]string{poolKey("a", 100)})
	body, _ := json.Marshal(req)
	if w := post(f.issuers[0].Handler(stubAuth{}), "good:i1", "", body); w.Code != http.StatusServiceUnavailable {
		t.Errorf("closed store: %d %s, want 503", w.Code, w.Body)
	}
	if _, err := f.issuers[0].Issue(context.Background(), instance("i1"), req); err == nil || errors.Is(err, admission.ErrCount) {
		t.Errorf("Issue on a closed store: %v", err)
	}
}
