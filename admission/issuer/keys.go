package issuer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/cloudflare/circl/oprf"
)

// SeedFile is the file, in a data directory, that holds the issuer's seed
// (mode 0600): 32 random bytes, base64url. The issuer and every verifier
// (the shuffler) read the same seed; replicas of the issuer share it.
const SeedFile = "admission.seed"

// SeedSize is the length of a seed in bytes.
const SeedSize = 32

// LoadOrCreateSeed returns the seed in dir/SeedFile, writing a new random
// one when the file does not exist, and reports whether it was created. A
// seed is written as a bearer token is (secrets.LoadOrCreateToken: 32
// random bytes, base64url; two processes racing agree on one).
func LoadOrCreateSeed(dir string) (seed []byte, created bool, err error) {
	if err := secrets.EnsureDir(dir); err != nil {
		return nil, false, err
	}
	path := filepath.Join(dir, SeedFile)
	if _, created, err = secrets.LoadOrCreateToken(path); err != nil {
		return nil, false, err
	}
	seed, err = LoadSeed(path)
	return seed, created, err
}

// LoadSeed reads the seed in path (a SeedFile written by
// LoadOrCreateSeed, copied to the host of a verifier). A file readable by
// group or others, or one that is not 32 bytes in base64url, is refused
// (secrets.ErrSecretFile).
func LoadSeed(path string) ([]byte, error) {
	b, err := secrets.Read(path)
	if err != nil {
		if errors.Is(err, secrets.ErrSecretFile) {
			return nil, err
		}
		return nil, fmt.Errorf("issuer: reading the seed: %w", err)
	}
	seed, err := base64.RawURLEncoding.Strict().DecodeString(string(b))
	if err != nil || len(seed) != SeedSize {
		return nil, fmt.Errorf("%w: %s does not hold %d bytes in base64url", secrets.ErrSecretFile, path, SeedSize)
	}
	return seed, nil
}

// checkSeed refuses a seed of the wrong length.
func checkSeed(seed []byte) error {
	if len(seed) != SeedSize {
		return fmt.Errorf("%w: seed of %d bytes, want %d", ErrOptions, len(seed), SeedSize)
	}
	return nil
}

// maxKeys bounds the derived keys a keyring keeps (a few hundred bytes
// each): far more than the pool keys of the current, recent and next
// periods of any plan.
const maxKeys = 4096

// keyring derives, and caches, the OPRF server of each pool key from the
// seed: oprf.DeriveKey(Suite, BaseMode, seed, admission.Info(poolKey)).
// When full it drops an arbitrary key; deriving one again costs a few
// microseconds.
type keyring struct {
	seed []byte
	mu   sync.RWMutex
	m    map[string]oprf.Server
}

func newKeyring(seed []byte) *keyring {
	return &keyring{seed: append([]byte(nil), seed...), m: make(map[string]oprf.Server)}
}

// server returns the OPRF server of poolKey, or an error wrapping
// admission.ErrMalformed for a pool key that admission.CheckPoolKey
// refuses.
func (k *keyring) server(poolKey string) (oprf.Server, error) {
	k.mu.RLock()
	s, ok := k.m[poolKey]
	k.mu.RUnlock()
	if ok {
		return s, nil
	}
	info, err := admission.Info(poolKey)
	if err != nil {
		return oprf.Server{}, err
	}
	key, err := oprf.DeriveKey(admission.Suite(), oprf.BaseMode, k.seed, info)
	if err != nil {
		// Only a seed of the wrong length, which New refuses, or 256
		// zero scalars in a row.
		return oprf.Server{}, fmt.Errorf("issuer: deriving the key of %q: %w", poolKey, err)
	}
	s = oprf.NewServer(admission.Suite(), key)
	k.mu.Lock()
	if len(k.m) >= maxKeys {
		for old := range k.m {
			delete(k.m, old)
			break
		}
	}
	k.m[poolKey] = s
	k.mu.Unlock()
	return s, nil
}

// identityLabel derives the identity-hashing key from the seed.
const identityLabel = "blanket admission identity v1"

// identityKey returns the key of the identity hashes, derived from the
// seed, so that replicas sharing the seed hash an identity alike.
func identityKey(seed []byte) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(identityLabel))
	return m.Sum(nil)
}

// identityHash is what the store keeps of an identity: HMAC-SHA256 under
// a key derived from the seed, of the issuer and subject, each
// length-prefixed.
type identityHash [sha256.Size]byte

// hashIdentity returns the identityHash of (iss, sub) under key.
func hashIdentity(key []byte, iss, sub string) identityHash {
	m := hmac.New(sha256.New, key)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(iss)))
	m.Write(n[:])
	m.Write([]byte(iss))
	binary.BigEndian.PutUint32(n[:], uint32(len(sub)))
	m.Write(n[:])
	m.Write([]byte(sub))
	var h identityHash
	m.Sum(h[:0])
	return h
}
