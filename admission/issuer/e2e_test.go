package issuer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestTokensOverHTTP runs the whole path on loopback: an identity
// provider's key set served over HTTP, an app's JWT, POST /v1/tokens,
// Finalize, Verify; an expired JWT is answered 401 with its reason.
func TestTokensOverHTTP(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(set) }))
	defer idp.Close()

	f := newFixture(t, "sqlite", 1, Options{})
	a, err := auth.New(context.Background(), auth.Options{JWKSURL: idp.URL, Audience: "blanket", Issuer: "https://idp.test", Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.issuers[0].Handler(a))
	defer srv.Close()

	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jwtFor := func(exp time.Time) string {
		tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: "https://idp.test", Subject: "device-1",
			Audience: jwt.Audience{"blanket"}, Expiry: jwt.NewNumericDate(exp)}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	pools := []string{poolKey("a", 100), poolKey("b", 101)}
	p, req, err := admission.Blind(pools)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(req)
	send := func(bearer string) *http.Response {
		r, _ := http.NewRequest(http.MethodPost, srv.URL+admission.TokensPath, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+bearer)
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	resp := send(jwtFor(testNow.Add(time.Hour)))
	var answer admission.TokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s, %v", resp.Status, err)
	}
	tokens, err := admission.Finalize(p, &answer)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range tokens {
		if err := f.verifier.Verify(pools[i], tok); err != nil {
			t.Errorf("token of %s: %v", pools[i], err)
		}
	}

	resp = send(jwtFor(testNow.Add(-time.Hour)))
	var refusal struct{ Error string }
	json.NewDecoder(resp.Body).Decode(&refusal)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(refusal.Error, "expired") {
		t.Errorf("an expired JWT: %s %q, want 401 saying expired", resp.Status, refusal.Error)
	}
}
