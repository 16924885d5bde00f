package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwtDate is jwt.NewNumericDate.
func jwtDate(t time.Time) *jwt.NumericDate { return jwt.NewNumericDate(t) }

// jwksServer serves a key set on loopback and counts its fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	set     []byte
	fetches int
	down    bool
}

func newJWKSServer(t *testing.T, set []byte) *jwksServer {
	s := &jwksServer{set: set}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.fetches++
		if s.down {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.set)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(set []byte, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set, s.down = set, down
}

func (s *jwksServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// TestKeySetURLIsRefetchedOnUnknownKeysAtMostOncePerMinRefetch: a
// rotated-in key is found by a refetch; fetches, for unknown key ids or
// a stale set, begin at most once per MinRefetch; a failed fetch keeps
// the old keys and reports an unknown key as unavailable until a fetch
// succeeds.
func TestKeySetURLIsRefetchedOnUnknownKeysAtMostOncePerMinRefetch(t *testing.T) {
	k1, k2 := newSigner(t, "k1", jose.ES256), newSigner(t, "k2", jose.EdDSA)
	srv := newJWKSServer(t, keySet(t, k1))
	c := &clockT{t: testNow}
	a, err := New(context.Background(), Options{JWKSURL: srv.URL, Now: c.now, MinRefetch: time.Minute, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(name string, s signer, want error, fetches int) {
		t.Helper()
		cl := claims("device-1")
		*cl.Expiry = *jwtDate(c.now().Add(time.Hour))
		*cl.IssuedAt = *jwtDate(c.now())
		_, err := a.Authenticate(ctx, s.sign(t, cl))
		if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if n := srv.count(); n != fetches {
			t.Errorf("%s: %d fetches, want %d", name, n, fetches)
		}
	}
	step("known key", k1, nil, 1)
	srv.serve(keySet(t, k1, k2), false)
	step("rotated-in key", k2, nil, 2)
	step("unknown key within MinRefetch of that", newSigner(t, "k3", jose.ES256), ErrUnknownKey, 2)
	c.add(time.Minute)
	step("unknown key", newSigner(t, "k3", jose.ES256), ErrUnknownKey, 3)
	for range 20 {
		step("another unknown key at once", newSigner(t, "k4", jose.ES256), ErrUnknownKey, 3)
	}
	c.add(time.Minute)
	step("unknown key a minute later", newSigner(t, "k5", jose.ES256), ErrUnknownKey, 4)
	c.add(time.Hour)
	srv.serve(keySet(t, k2), false)
	step("stale set refreshed", k2, nil, 5)
	step("a key rotated out, within MinRefetch of the refresh", k1, ErrUnknownKey, 5)

	srv.serve(nil, true)
	c.add(2 * time.Hour)
	step("server down, known key", k2, nil, 6)
	step("server down, unknown key", newSigner(t, "k6", jose.ES256), ErrKeysUnavailable, 6)
	c.add(time.Minute)
	step("server down, unknown key a minute later", newSigner(t, "k6", jose.ES256), ErrKeysUnavailable, 7)
	srv.serve(keySet(t, k2), false)
	c.add(time.Minute)
	step("server back", k2, nil, 8)
	step("server back, unknown key", newSigner(t, "k6", jose.ES256), ErrUnknownKey, 8)
}

// TestNewFailsWithoutTheKeySet: a URL that does not answer a key set
// fails New.
func TestNewFailsWithoutTheKeySet(t *testing.T) {
	srv := newJWKSServer(t, nil)
	srv.serve(nil, true)
	if _, err := New(context.Background(), Options{JWKSURL: srv.URL}); !errors.Is(err, ErrKeySet) {
		t.Errorf("New on a failing URL: %v, want ErrKeySet", err)
	}
	srv.serve([]byte(`{"keys":[]}`), false)
	if _, err := New(context.Background(), Options{JWKSURL: srv.URL}); !errors.Is(err, ErrKeySet) {
		t.Errorf("New on an empty key set: %v, want ErrKeySet", err)
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	if _, err := New(context.Background(), Options{JWKSURL: slow.URL, FetchTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrKeySet) {
		t.Errorf("New on a URL that never answers: %v, want ErrKeySet", err)
	}
}

// clockT is a settable clock.
type clockT struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clockT) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clockT) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestKeySetFetchOutlivesACancelledRequest: a caller that hangs up (its
// context cancelled) while its unknown key id makes the issuer fetch the
// key set must not fail the fetch and so spend the refetch slot: an
// attacker doing that once a minute would keep a rotated-in key unknown
// (and a removed one trusted) for good. Before the fix the app's JWT of
// the new key was refused as "key set unavailable".
func TestKeySetFetchOutlivesACancelledRequest(t *testing.T) {
	k1, k2 := newSigner(t, "k1", jose.ES256), newSigner(t, "k2", jose.ES256)
	srv := newJWKSServer(t, keySet(t, k1))
	c := &clockT{t: testNow}
	a, err := New(context.Background(), Options{JWKSURL: srv.URL, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	srv.serve(keySet(t, k1, k2), false) // the provider rotates k2 in
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Authenticate(ctx, newSigner(t, "zz", jose.ES256).sign(t, claims("x"))); err == nil {
		t.Fatal("a JWT of an unknown key authenticated")
	}
	if _, err := a.Authenticate(context.Background(), k2.sign(t, claims("device-1"))); err != nil {
		t.Errorf("the app's JWT of the rotated-in key after a cancelled fetch: %v", err)
	}
}
