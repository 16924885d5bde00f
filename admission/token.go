package admission

// Security sketch. Notation: G is ristretto255, a group of prime order q;
// H1 is HashToGroup (RFC 9380 hash-to-curve, a random oracle onto G); H2
// is the Finalize hash of RFC 9497 (SHA-512 over the length-prefixed
// input and element). The issuer's secret is a uniformly random 32-byte
// seed s.
//
// Binding to the pool and period. The key of pool key P is
// k_P = DeriveKeyPair(s, Info(P)) (RFC 9497 §3.2.1: HashToScalar over s,
// the length-prefixed info and a counter). Info is injective (a label,
// then P length-prefixed) and the pool key names the period
// (report.PeriodPoolKey), so with HashToScalar modelled as a random
// oracle the keys of distinct pool keys are independent uniform scalars:
// evaluations under k_P tell nothing about k_P' for P' ≠ P, and a token
// of P verifies under P' with probability about 2^-512 (a random 64-byte
// output).
//
// A token of P is (x, y) with y = H2(x, k_P·H1(x)). Issuance is RFC 9497
// base mode (mode 0x00): the client draws x (32 bytes) and a blind r,
// uniform in Z_q \ {0}, sends B = r·H1(x); the issuer answers Z = k_P·B;
// the client computes N = r⁻¹·Z = k_P·H1(x) and y = H2(x, N).
//
// Unforgeability (one-more). A party that obtained ℓ evaluations under
// k_P, on elements of its choice, and outputs ℓ+1 valid tokens of P with
// distinct inputs must, except with probability about (ℓ+1)·2^-512, have
// queried H2 at (x_i, k_P·H1(x_i)) for ℓ+1 distinct x_i: it computed
// k·Q for ℓ+1 random-oracle points Q with ℓ calls to the k·(·) oracle.
// That is the one-more-gap-DH problem, the assumption under which RFC
// 9497 §7.2.1 states base mode's security (the 2HashDH OPRF of Jarecki,
// Kiayias, Krawczyk and Xu, 2016). With the issuer's grant rule (one
// evaluation per authenticated identity and pool key) and the shuffler's
// spent set (one acceptance per pool key and input: SpentKey in package
// issuer), an identity gets at most one envelope per pool key admitted.
// Verifying needs k_P, so only holders of s verify: the scheme is
// symmetric, like a MAC.
//
// Unlinkability. G has prime order and H1(x) is not the identity (the
// client checks), so B = r·H1(x) for r uniform in Z_q \ {0} is uniform over
// G \ {0} whatever x is: the issuer's view of a request (the identity, B,
// Z) is independent of the token (x, y), information-theoretically. This
// holds when the issuer evaluates every request under the one key k_P.
// Base mode has no proof that it did (no DLEQ proof, unlike VOPRF): an
// issuer answering instance i under a key k_i of its own makes tokens
// that verify only under k_i, which a verifier colluding with it could
// use to tell instances apart. An honest verifier checks under k_P only
// and refuses such tokens, so a lone tagging issuer shows as refusals.
// The doc of the package weighs this trust split.

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/cloudflare/circl/oprf"
)

// Sizes in bytes.
const (
	// InputSize is the length of a token's input, drawn by the client.
	InputSize = 32
	// OutputSize is the length of a token's output (SHA-512).
	OutputSize = 64
	// TokenSize is the length of a token's binary form: the input, then
	// the output.
	TokenSize = InputSize + OutputSize
	// ElementSize is the length of an encoded ristretto255 element (a
	// blinded or evaluated element) and of a scalar (a blind).
	ElementSize = 32
	// MaxPoolKeyLen bounds a pool key in bytes, as report.MaxMetricLen
	// bounds an envelope's Metric field, which carries it.
	MaxPoolKeyLen = report.MaxMetricLen
)

// Suite returns the OPRF suite of admission tokens: RFC 9497's
// ristretto255-SHA512, used in base mode (oprf.BaseMode).
func Suite() oprf.Suite { return oprf.SuiteRistretto255 }

// Token is an admission token: an input the client drew and the OPRF
// output on it under the key of the token's pool key. It is redeemed
// once, with an envelope of that pool key; it names neither.
type Token struct {
	Input  [InputSize]byte
	Output [OutputSize]byte
}

// IsZero reports whether t is the zero Token (Finalize's for a refused
// item).
func (t Token) IsZero() bool { return t == Token{} }

// AppendBinary appends t's binary form (TokenSize bytes: the input, then
// the output) to b.
func (t Token) AppendBinary(b []byte) ([]byte, error) {
	return append(append(b, t.Input[:]...), t.Output[:]...), nil
}

// MarshalBinary returns t's binary form (TokenSize bytes).
func (t Token) MarshalBinary() ([]byte, error) {
	return t.AppendBinary(make([]byte, 0, TokenSize))
}

// ParseToken parses a token's binary form. Bytes of another length are
// an error wrapping ErrMalformed.
func ParseToken(b []byte) (Token, error) {
	var t Token
	if len(b) != TokenSize {
		return t, fmt.Errorf("%w: token of %d bytes, want %d", ErrMalformed, len(b), TokenSize)
	}
	copy(t.Input[:], b[:InputSize])
	copy(t.Output[:], b[InputSize:])
	return t, nil
}

// infoLabel opens every Info, separating admission keys from any other
// use of the seed.
const infoLabel = "blanket admission v1"

// Info returns the info string from which the issuer derives the key of
// poolKey (oprf.DeriveKey(Suite(), oprf.BaseMode, seed, Info(poolKey))):
// "blanket admission v1", then the pool key's length (2 bytes, big
// endian) and the pool key. A pool key that CheckPoolKey refuses is an
// error wrapping ErrMalformed.
func Info(poolKey string) ([]byte, error) {
	if _, err := CheckPoolKey(poolKey); err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(infoLabel)+2+len(poolKey))
	b = append(b, infoLabel...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(poolKey)))
	return append(b, poolKey...), nil
}

// CheckPoolKey returns the period of poolKey, or an error wrapping
// ErrMalformed unless it is a pool key with a period
// (report.ParsePoolKey), valid UTF-8 (it travels in JSON) without control
// characters, and of 1 to
// MaxPoolKeyLen bytes.
func CheckPoolKey(poolKey string) (report.Period, error) {
	if len(poolKey) == 0 || len(poolKey) > MaxPoolKeyLen {
		return report.Period{}, fmt.Errorf("%w: pool key of %d bytes, want 1 to %d", ErrMalformed, len(poolKey), MaxPoolKeyLen)
	}
	if !utf8.ValidString(poolKey) {
		return report.Period{}, fmt.Errorf("%w: pool key %q is not UTF-8", ErrMalformed, poolKey)
	}
	// Control characters (NUL among them, which PostgreSQL's text refuses
	// and would fail a whole request) are in no pool key the SDK makes.
	if i := strings.IndexFunc(poolKey, unicode.IsControl); i >= 0 {
		return report.Period{}, fmt.Errorf("%w: pool key %q has a control character at byte %d", ErrMalformed, poolKey, i)
	}
	_, _, period, err := report.ParsePoolKey(poolKey)
	if err != nil {
		return report.Period{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return period, nil
}
