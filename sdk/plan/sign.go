package plan

// Signed plans (docs/api.md, GET /v1/plan): the collector signs the exact
// bytes it serves with its Ed25519 plan-signing key, and an app pinned to
// that key (client.Config.PlanKey) refuses a plan whose signature does not
// verify, so that whoever relays the plan (a shuffler, a CDN) cannot swap
// the collector's report key in it. The signature travels in HTTP headers
// next to the unchanged plan body, so that no byte of the plan is
// re-serialised between signing and verifying.
//
// A collector that changes its signing key publishes a rollover statement
// (an Endorsement) signed by the old key that names the new key and when it
// becomes valid; it serves the chain of its endorsements, oldest first,
// with every plan, and an app pinned to any key of the chain follows it to
// the key that signed the plan.

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// HTTP headers of a signed plan (GET /v1/plan).
const (
	// SignatureHeader carries the plan's signature: standard base64 of the
	// 64-byte Ed25519 signature of PlanSigningContext followed by the
	// response body.
	SignatureHeader = "Blanket-Plan-Signature"
	// SigningKeyHeader names the key that signed the plan (standard
	// base64). It is informational: an app derives the signing key from
	// its pinned key and the endorsements, never from this header.
	SigningKeyHeader = "Blanket-Plan-Signing-Key"
	// EndorsementsHeader carries the collector's key rollover statements,
	// oldest first, comma-separated (Endorsement.String); absent when the
	// collector never changed its key.
	EndorsementsHeader = "Blanket-Plan-Endorsements"
)

// Domain separation of what a plan-signing key signs: a plan's signature
// and an endorsement's are over different prefixes, so that neither can
// stand for the other, nor for anything else signed with the same key.
const (
	// PlanSigningContext prefixes the plan bytes a signature covers.
	PlanSigningContext = "blanket plan v1\n"
	// EndorsementContext prefixes what an endorsement signs: the new
	// public key (32 bytes) and its validity start (Unix seconds, 8 bytes
	// big-endian).
	EndorsementContext = "blanket plan key v1\n"
)

// MaxEndorsements bounds the rollover chain a plan may carry.
const MaxEndorsements = 16

// SigningSeedPrefix starts the line of the collector's key file (and of
// its PostgreSQL row) that holds the plan-signing private key: the prefix,
// then standard base64 of the 32-byte Ed25519 seed. The seed alone would
// look like a public key (standard base64 of 32 bytes); with the prefix an
// operator cannot mistake it for one, and ParseSigningKey refuses it, so
// that an app is never configured with the private key.
const SigningSeedPrefix = "blanket-plan-signing-seed-v1:"

// endorsementLen is the encoded size of an Endorsement: key, validity
// start, signature.
const endorsementLen = ed25519.PublicKeySize + 8 + ed25519.SignatureSize

var (
	// ErrUnsigned reports a plan served without a signature.
	ErrUnsigned = errors.New("plan: unsigned")
	// ErrBadSignature reports a plan whose signature, or whose chain of
	// key rollover statements, does not verify under the pinned key.
	ErrBadSignature = errors.New("plan: bad signature")
	// ErrBadSigningKey reports a plan-signing key that does not decode.
	ErrBadSigningKey = errors.New("plan: bad signing key")
)

// Endorsement is a key rollover statement: the holder of the previous
// plan-signing key says that Key signs the collector's plans from
// NotBefore on.
type Endorsement struct {
	// Key is the new plan-signing public key.
	Key ed25519.PublicKey
	// NotBefore is when the new key becomes valid (whole seconds).
	NotBefore time.Time
	// Signature is the previous key's signature of EndorsementContext,
	// Key and NotBefore.
	Signature []byte
}

// Endorse returns the statement, signed by old, that next signs plans from
// notBefore on.
func Endorse(old ed25519.PrivateKey, next ed25519.PublicKey, notBefore time.Time) Endorsement {
	e := Endorsement{Key: next, NotBefore: time.Unix(notBefore.Unix(), 0).UTC()}
	e.Signature = ed25519.Sign(old, e.message())
	return e
}

func (e Endorsement) message() []byte {
	m := make([]byte, 0, len(EndorsementContext)+ed25519.PublicKeySize+8)
	m = append(m, EndorsementContext...)
	m = append(m, e.Key...)
	return binary.BigEndian.AppendUint64(m, uint64(e.NotBefore.Unix()))
}

// String encodes e as standard base64 of its key, validity start (Unix
// seconds, big-endian) and signature.
func (e Endorsement) String() string {
	b := make([]byte, 0, endorsementLen)
	b = append(b, e.Key...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.NotBefore.Unix()))
	b = append(b, e.Signature...)
	return base64.StdEncoding.EncodeToString(b)
}

// ParseEndorsement decodes Endorsement.String.
func ParseEndorsement(s string) (Endorsement, error) {
	b, ok := decodeFixed(s, endorsementLen)
	if !ok {
		return Endorsement{}, fmt.Errorf("%w: an endorsement must be standard base64 of %d bytes", ErrBadSignature, endorsementLen)
	}
	k := ed25519.PublicKeySize
	return Endorsement{
		Key:       ed25519.PublicKey(bytes.Clone(b[:k])),
		NotBefore: time.Unix(int64(binary.BigEndian.Uint64(b[k:k+8])), 0).UTC(),
		Signature: bytes.Clone(b[k+8:]),
	}, nil
}

// decodeFixed decodes s, standard base64 of n bytes (surrounding spaces
// ignored), checking its length before decoding, so that a hostile header
// costs an app no allocation of its size.
func decodeFixed(s string, n int) ([]byte, bool) {
	s = strings.TrimSpace(s)
	if len(s) != base64.StdEncoding.EncodedLen(n) {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil && len(b) == n
}

// ParseSigningKey decodes a plan-signing public key: standard base64 of
// the 32-byte Ed25519 key (what `blanket collector plan-key` prints). It
// refuses text holding the private key (SigningSeedPrefix), with an error
// that says so and does not repeat the text.
func ParseSigningKey(s string) (ed25519.PublicKey, error) {
	if strings.Contains(s, SigningSeedPrefix) {
		return nil, fmt.Errorf("%w: this is the collector's PRIVATE plan-signing key (a line of its key file, starting %s): never configure an app with it; pin the public key that `blanket collector plan-key` prints", ErrBadSigningKey, SigningSeedPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not standard base64: %v", ErrBadSigningKey, s, err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: %q decodes to %d bytes, an Ed25519 public key has %d", ErrBadSigningKey, s, len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// FormatSigningKey encodes a plan-signing public key as ParseSigningKey
// reads it.
func FormatSigningKey(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) }

// Signature is what authenticates a served plan: the signature of its
// bytes and the rollover chain from the collector's first key.
type Signature struct {
	// Sig is the Ed25519 signature of PlanSigningContext and the plan.
	Sig []byte
	// Endorsements is the collector's rollover chain, oldest first.
	Endorsements []Endorsement
}

// SignPlan returns the signature of body (the exact bytes served) by key,
// with the rollover chain that leads to key.
func SignPlan(key ed25519.PrivateKey, body []byte, chain []Endorsement) Signature {
	return Signature{Sig: ed25519.Sign(key, planMessage(body)), Endorsements: chain}
}

func planMessage(body []byte) []byte {
	m := make([]byte, 0, len(PlanSigningContext)+len(body))
	return append(append(m, PlanSigningContext...), body...)
}

// Headers returns the header values of s: SignatureHeader and, when the
// chain is not empty, EndorsementsHeader.
func (s Signature) Headers() (sig, endorsements string) {
	parts := make([]string, len(s.Endorsements))
	for i, e := range s.Endorsements {
		parts[i] = e.String()
	}
	return base64.StdEncoding.EncodeToString(s.Sig), strings.Join(parts, ", ")
}

// ParseSignature decodes the header values of a served plan (Headers): an
// error wrapping ErrUnsigned when sig is empty, ErrBadSignature when a
// value does not decode or there are more than MaxEndorsements
// endorsements. It checks the lengths and the count before decoding.
func ParseSignature(sig, endorsements string) (Signature, error) {
	sig = strings.TrimSpace(sig)
	if sig == "" {
		return Signature{}, fmt.Errorf("%w: no %s header", ErrUnsigned, SignatureHeader)
	}
	b, ok := decodeFixed(sig, ed25519.SignatureSize)
	if !ok {
		return Signature{}, fmt.Errorf("%w: %s must be standard base64 of %d bytes", ErrBadSignature, SignatureHeader, ed25519.SignatureSize)
	}
	s := Signature{Sig: b}
	if strings.TrimSpace(endorsements) == "" {
		return s, nil
	}
	if n := strings.Count(endorsements, ",") + 1; n > MaxEndorsements {
		return Signature{}, fmt.Errorf("%w: %s has %d comma-separated values, at most %d endorsements", ErrBadSignature, EndorsementsHeader, n, MaxEndorsements)
	}
	for part := range strings.SplitSeq(endorsements, ",") {
		e, err := ParseEndorsement(part)
		if err != nil {
			return Signature{}, err
		}
		s.Endorsements = append(s.Endorsements, e)
	}
	return s, nil
}

// VerifyPlan checks that body was signed by the pinned key, or by a key
// the pinned one endorsed, directly or through a chain of endorsements,
// that is valid at now. The chain is followed from the last endorsement
// naming pinned (an app pinned to a key endorsed later skips the chain's
// older statements), or from its start; from there each endorsement must
// be signed by the key before it, and none may start after now. It returns
// the key that signed the plan, or an error wrapping ErrBadSignature that
// says what did not verify.
func VerifyPlan(pinned ed25519.PublicKey, body []byte, s Signature, now time.Time) (ed25519.PublicKey, error) {
	if len(pinned) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: the pinned key has %d bytes, an Ed25519 public key has %d", ErrBadSigningKey, len(pinned), ed25519.PublicKeySize)
	}
	if len(s.Sig) == 0 {
		return nil, fmt.Errorf("%w: no signature", ErrUnsigned)
	}
	if len(s.Endorsements) > MaxEndorsements {
		return nil, fmt.Errorf("%w: %d endorsements, at most %d", ErrBadSignature, len(s.Endorsements), MaxEndorsements)
	}
	start := 0
	for i, e := range s.Endorsements {
		if e.Key.Equal(pinned) {
			start = i + 1
		}
	}
	cur := pinned
	for i, e := range s.Endorsements[start:] {
		if len(e.Key) != ed25519.PublicKeySize || !ed25519.Verify(cur, e.message(), e.Signature) {
			return nil, fmt.Errorf("%w: endorsement %d of key %s is not signed by key %s (the pinned key is %s)", ErrBadSignature, start+i+1, FormatSigningKey(e.Key), FormatSigningKey(cur), FormatSigningKey(pinned))
		}
		if now.Before(e.NotBefore) {
			return nil, fmt.Errorf("%w: endorsement %d of key %s is valid from %s, the clock reads %s", ErrBadSignature, start+i+1, FormatSigningKey(e.Key), e.NotBefore.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		cur = e.Key
	}
	if !ed25519.Verify(cur, planMessage(body), s.Sig) {
		if start == 0 && len(s.Endorsements) == 0 {
			return nil, fmt.Errorf("%w: the plan's signature does not verify under the pinned key %s (is it the key `blanket collector plan-key` prints for this collector, not another key of its data directory?)", ErrBadSignature, FormatSigningKey(pinned))
		}
		return nil, fmt.Errorf("%w: the plan's signature does not verify under key %s, which the pinned key %s leads to", ErrBadSignature, FormatSigningKey(cur), FormatSigningKey(pinned))
	}
	return cur, nil
}
