package issuer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/admission"
)

// Verifier checks admission tokens against the pool key they come with:
// the shuffler's side. It holds the issuer's seed (LoadSeed) and derives
// the key of each pool key as the issuer does, keeping a bounded number
// of derived keys. It is safe for concurrent use.
//
// A token verifies any number of times: refusing a second spend is the
// spent set's work (SpentKey).
type Verifier struct {
	keys *keyring
}

// NewVerifier returns a Verifier for the issuer of seed (SeedSize bytes).
func NewVerifier(seed []byte) (*Verifier, error) {
	if err := checkSeed(seed); err != nil {
		return nil, err
	}
	return &Verifier{keys: newKeyring(seed)}, nil
}

// Verify returns nil when tok is a token of poolKey: its output is the
// OPRF output on its input under the key of poolKey. It returns an error
// wrapping ErrNoToken for the zero Token, admission.ErrMalformed for a
// pool key that admission.CheckPoolKey refuses, and ErrForged for any
// other token, among them those of another pool key or period.
//
// It costs one hash to the group, one scalar multiplication and two
// SHA-512 (RFC 9497 VerifyFinalize), about 60 µs; see the package doc.
func (v *Verifier) Verify(poolKey string, tok admission.Token) error {
	if tok.IsZero() {
		return ErrNoToken
	}
	s, err := v.keys.server(poolKey)
	if err != nil {
		return err
	}
	if !s.VerifyFinalize(tok.Input[:], tok.Output[:]) {
		return fmt.Errorf("%w for pool key %q", ErrForged, poolKey)
	}
	return nil
}

// spentLabel opens the input of every SpentKey.
const spentLabel = "blanket admission spent v1"

// SpentKey returns the key under which the spent set of a verifier (the
// shuffler's) records tok as spent with an envelope of poolKey:
// SHA-256 of "blanket admission spent v1", the pool key's length (2
// bytes, big endian), the pool key and the token's input. The output is
// left out: it is a function of the input under the pool key's key, so
// a token has one SpentKey per pool key, and a token that verifies is
// the only one of its key. The shuffler keeps the keys of spent tokens
// in its own accept transaction, beside the envelope ids, until the
// period's deadline, and takes an envelope only if Verify passes and its
// SpentKey is new (what Spend does in memory).
func SpentKey(poolKey string, tok admission.Token) [sha256.Size]byte {
	h := sha256.New()
	var n [2]byte
	h.Write([]byte(spentLabel))
	binary.BigEndian.PutUint16(n[:], uint16(min(len(poolKey), 0xffff)))
	h.Write(n[:])
	h.Write([]byte(poolKey))
	h.Write(tok.Input[:])
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// SpentSet records spent tokens.
type SpentSet interface {
	// Spend records tok as spent with an envelope of poolKey and reports
	// whether it was fresh (not spent before).
	Spend(ctx context.Context, poolKey string, tok admission.Token) (fresh bool, err error)
}

// MemorySpent is a SpentSet in memory, for one process and tests: the
// shuffler keeps its spent set in its store instead (SpentKey). Each key
// is kept until its period's deadline (end plus grace), then dropped by
// Forget. It is safe for concurrent use.
type MemorySpent struct {
	grace time.Duration
	mu    sync.Mutex
	m     map[[sha256.Size]byte]int64 // SpentKey -> deadline (Unix seconds)
}

// NewMemorySpent returns an empty MemorySpent that keeps a key until
// grace after its period ends.
func NewMemorySpent(grace time.Duration) *MemorySpent {
	return &MemorySpent{grace: grace, m: make(map[[sha256.Size]byte]int64)}
}

// Spend records tok as spent with an envelope of poolKey. It does not
// verify tok (Verifier.Verify does); a pool key without a period is an
// error wrapping admission.ErrMalformed.
func (s *MemorySpent) Spend(_ context.Context, poolKey string, tok admission.Token) (bool, error) {
	p, err := admission.CheckPoolKey(poolKey)
	if err != nil {
		return false, err
	}
	k := SpentKey(poolKey, tok)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, spent := s.m[k]; spent {
		return false, nil
	}
	s.m[k] = p.End() + int64(s.grace/time.Second)
	return true, nil
}

// Forget drops the keys whose deadline is at or before now and returns
// how many it dropped. The caller refuses envelopes of those periods
// (past their deadline) by then.
func (s *MemorySpent) Forget(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, deadline := range s.m {
		if deadline <= now.Unix() {
			delete(s.m, k)
			n++
		}
	}
	return n
}

// Len returns the number of keys held.
func (s *MemorySpent) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
