package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxKeySetBytes bounds a key set read from a file or a URL.
const maxKeySetBytes = 1 << 20

// keySource holds the key set: read once from a file, or fetched from a
// URL and fetched again after Refresh and on unknown key ids.
type keySource struct {
	o Options

	mu      sync.RWMutex
	keys    []jose.JSONWebKey // public signing keys
	fetched time.Time         // when keys were fetched (URL)

	// fetchMu serializes fetches after New; lastAttempt is when the last
	// of them began, lastErr how it failed (nil if it did not); both
	// under fetchMu.
	fetchMu     sync.Mutex
	lastAttempt time.Time
	lastErr     error
}

// newKeySource reads or fetches the key set.
func newKeySource(ctx context.Context, o Options) (*keySource, error) {
	s := &keySource{o: o}
	if o.JWKSFile != "" {
		b, err := os.ReadFile(o.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeySet, err)
		}
		keys, err := parseKeySet(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", err, o.JWKSFile)
		}
		s.keys = keys
		return s, nil
	}
	if err := s.fetch(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// parseKeySet returns the usable keys of a JSON Web Key Set: those that
// parse (others, of a type go-jose does not know, are skipped), are
// asymmetric (a symmetric key is skipped: no HMAC algorithm is taken),
// and are for signatures (use absent or "sig"); a private key is reduced
// to its public half. No usable key is an error wrapping ErrKeySet.
func parseKeySet(b []byte) ([]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: not a JSON Web Key Set: %v", ErrKeySet, err)
	}
	var keys []jose.JSONWebKey
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		if err := json.Unmarshal(r, &k); err != nil || !k.Valid() {
			continue
		}
		if _, symmetric := k.Key.([]byte); symmetric || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no public signing key among %d", ErrKeySet, len(raw.Keys))
	}
	return keys, nil
}

// fetch fetches the key set from the URL and, if it is usable, replaces
// the keys with it. The caller is New, or attempt.
func (s *keySource) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.FetchTimeout)
	defer cancel()
	now := s.o.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.JWKSURL, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrKeySet, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: fetching %s: %v", ErrKeySet, s.o.JWKSURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: fetching %s: %s", ErrKeySet, s.o.JWKSURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return fmt.Errorf("%w: fetching %s: %v", ErrKeySet, s.o.JWKSURL, err)
	}
	if len(b) > maxKeySetBytes {
		return fmt.Errorf("%w: %s: over %d bytes", ErrKeySet, s.o.JWKSURL, maxKeySetBytes)
	}
	keys, err := parseKeySet(b)
	if err != nil {
		return fmt.Errorf("%w: %s", err, s.o.JWKSURL)
	}
	s.mu.Lock()
	s.keys, s.fetched = keys, now
	s.mu.Unlock()
	return nil
}

// lookup returns the key of key id kid for algorithm alg: the first with
// that id whose alg is alg or unset. An empty kid names the set's only
// key. found reports whether the set has a key of that id at all.
func (s *keySource) lookup(kid, alg string) (k jose.JSONWebKey, ok, found bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if kid == "" {
		if len(s.keys) != 1 {
			return k, false, false
		}
		k = s.keys[0]
		return k, k.Algorithm == "" || k.Algorithm == alg, true
	}
	for _, k := range s.keys {
		if k.KeyID != kid {
			continue
		}
		found = true
		if k.Algorithm == "" || k.Algorithm == alg {
			return k, true, true
		}
	}
	return jose.JSONWebKey{}, false, found
}

// stale reports whether the keys come from the URL and are older than
// Refresh.
func (s *keySource) stale() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.o.JWKSURL != "" && s.o.Now().Sub(s.fetched) >= s.o.Refresh
}

// mayAttempt reports whether a fetch may begin: none began less than
// MinRefetch ago. The caller holds fetchMu.
func (s *keySource) mayAttempt() bool {
	return s.lastAttempt.IsZero() || s.o.Now().Sub(s.lastAttempt) >= s.o.MinRefetch
}

// attempt fetches the key set, recording when and how. The caller holds
// fetchMu. The fetch does not follow ctx's cancellation (FetchTimeout
// bounds it): ctx is one request's, and a client that hung up would
// otherwise fail the fetch and spend the MinRefetch slot, so that a
// caller closing connections once a minute could keep a rotated-in key
// unknown and a removed one trusted for good (review of issue 25).
func (s *keySource) attempt(ctx context.Context) error {
	s.lastAttempt = s.o.Now()
	s.lastErr = s.fetch(context.WithoutCancel(ctx))
	return s.lastErr
}

// key returns the key that verifies a token of key id kid and algorithm
// alg. Fetches of the URL begin at most once per MinRefetch: a stale set
// is fetched again first (by one caller; the others go on with the old
// set, which a failed fetch keeps), and a kid the set lacks causes a
// fetch. A kid the set lacks while the last fetch failed is reported as
// ErrKeysUnavailable (the instance should retry), otherwise as
// ErrUnknownKey.
func (s *keySource) key(ctx context.Context, kid, alg string) (jose.JSONWebKey, error) {
	if s.stale() && s.fetchMu.TryLock() {
		if s.stale() && s.mayAttempt() {
			_ = s.attempt(ctx)
		}
		s.fetchMu.Unlock()
	}
	k, ok, found := s.lookup(kid, alg)
	if !found && kid != "" && s.o.JWKSURL != "" {
		var err error
		if k, ok, found, err = s.refetch(ctx, kid, alg); err != nil {
			return k, err
		}
	}
	switch {
	case !found && kid == "":
		return k, refuse(ErrUnknownKey, "no key id, and the key set has %d keys", s.size())
	case !found:
		return k, refuse(ErrUnknownKey, "key id %q", kid)
	case !ok:
		return k, refuse(ErrAlgorithm, "key %q is not for %s", kid, alg)
	}
	return k, nil
}

// refetch fetches the set again for a token of unknown key id kid, if
// mayAttempt, and looks the key up again.
func (s *keySource) refetch(ctx context.Context, kid, alg string) (k jose.JSONWebKey, ok, found bool, err error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	// Another caller may have fetched it meanwhile.
	if k, ok, found = s.lookup(kid, alg); found {
		return k, ok, found, nil
	}
	if s.mayAttempt() {
		s.attempt(ctx)
		if k, ok, found = s.lookup(kid, alg); found {
			return k, ok, found, nil
		}
	}
	if s.lastErr != nil {
		return k, false, false, fmt.Errorf("%w: %w: key id %q: %v", ErrRefused, ErrKeysUnavailable, kid, s.lastErr)
	}
	return k, false, false, nil
}

// size returns the number of keys held.
func (s *keySource) size() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.keys)
}
