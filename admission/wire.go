package admission

import (
	"encoding/base64"
	"fmt"
)

// The issuer's HTTP interface, JSON over HTTP with base64url fields
// (unpadded, RFC 4648 §5):
//
//	POST /v1/tokens
//	Authorization: Bearer <JWT naming the app instance>
//	Content-Type: application/json
//
//	{"requests": [{"pool": "<pool key>", "blinded": "<32 bytes>"}, ...]}
//
// is answered 200 with one evaluation per request, in order:
//
//	{"evaluations": [{"pool": "<pool key>", "evaluated": "<32 bytes>"},
//	                 {"pool": "<pool key>", "refused": "already_granted", "reason": "..."}]}
//
// or with an error status and {"error": "<reason>"}: 400 (the body does
// not decode, or holds no request or more than MaxRequests), 401 (no
// valid bearer token), 405, 413 (a body over MaxBodyBytes), 415 (not
// JSON), 503 (the issuer's store failed: retry the same request).

// TokensPath is the path of the issuer's token endpoint.
const TokensPath = "/v1/tokens"

// MaxRequests bounds the items of one request.
const MaxRequests = 256

// MaxBodyBytes bounds the body of a request to TokensPath: MaxRequests
// items of a pool key of MaxPoolKeyLen bytes, JSON-escaped, with room.
const MaxBodyBytes = 1 << 20

// Refusal codes of an evaluation the issuer refused.
const (
	// RefusedAlreadyGranted: the identity was granted a token of this
	// pool key for another blinded element (a retry must resend the same
	// request: Pending.Request).
	RefusedAlreadyGranted = "already_granted"
	// RefusedPeriod: the pool key's period is over (past its grace) or
	// too far ahead, or was closed.
	RefusedPeriod = "period"
	// RefusedPool: the issuer does not admit this pool.
	RefusedPool = "pool"
	// RefusedMalformed: the pool key or the blinded element does not
	// decode.
	RefusedMalformed = "malformed"
	// RefusedDuplicate: the pool key was asked earlier in the same
	// request.
	RefusedDuplicate = "duplicate"
)

// TokenRequest is the body of a request to TokensPath.
type TokenRequest struct {
	Requests []BlindedItem `json:"requests"`
}

// BlindedItem asks for the evaluation of one blinded element under the
// key of one pool key.
type BlindedItem struct {
	// Pool is the pool key (report.PeriodPoolKey).
	Pool string `json:"pool"`
	// Blinded is the blinded element (ElementSize bytes).
	Blinded Bytes `json:"blinded"`
}

// TokenResponse is the body of a 200 answer from TokensPath.
type TokenResponse struct {
	Evaluations []Evaluation `json:"evaluations"`
}

// Evaluation answers one BlindedItem: its evaluated element, or a
// refusal.
type Evaluation struct {
	// Pool repeats the request's pool key.
	Pool string `json:"pool"`
	// Evaluated is the evaluated element (ElementSize bytes), absent when
	// refused.
	Evaluated Bytes `json:"evaluated,omitempty"`
	// Refused is a refusal code (RefusedAlreadyGranted, ...), absent when
	// granted.
	Refused string `json:"refused,omitempty"`
	// Reason explains a refusal.
	Reason string `json:"reason,omitempty"`
}

// Bytes is a byte string that travels in JSON as unpadded base64url.
type Bytes []byte

// MarshalText encodes b as unpadded base64url.
func (b Bytes) MarshalText() ([]byte, error) {
	out := make([]byte, base64.RawURLEncoding.EncodedLen(len(b)))
	base64.RawURLEncoding.Encode(out, b)
	return out, nil
}

// UnmarshalText decodes unpadded base64url; anything else is an error
// wrapping ErrMalformed.
func (b *Bytes) UnmarshalText(text []byte) error {
	out := make([]byte, base64.RawURLEncoding.DecodedLen(len(text)))
	n, err := base64.RawURLEncoding.Strict().Decode(out, text)
	if err != nil {
		return fmt.Errorf("%w: base64url: %v", ErrMalformed, err)
	}
	*b = out[:n]
	return nil
}

// AdmissionHeader is the response header with which the plan route (GET
// /v1/plan of blanket serve, and a shuffler's relay of it) says what the
// shuffler behind it asks of each envelope: AdmissionTokens or
// AdmissionOpen. An app without a credential reads it to tell its
// operator what is missing.
const AdmissionHeader = "Blanket-Admission"

// Values of AdmissionHeader.
const (
	// AdmissionTokens: every envelope must carry an admission token of
	// its pool key, not spent before.
	AdmissionTokens = "tokens"
	// AdmissionOpen: the shuffler takes envelopes without a token
	// (anyone who can reach its upload port can add reports).
	AdmissionOpen = "open"
)

// Codes of the shuffler's refusals of an envelope for its token (the
// "code" of an upload answer's errors, POST /v1/reports). None is worth
// a retry of the same envelope.
const (
	// UploadTokenMissing: the envelope carries no token, and the
	// shuffler takes none without.
	UploadTokenMissing = "token_missing"
	// UploadTokenInvalid: the token does not decode, or is not a token of
	// the envelope's pool key (forged, of another pool or period, or
	// issued under another seed than the shuffler's).
	UploadTokenInvalid = "token_invalid"
	// UploadTokenSpent: the token was spent by another envelope (a
	// retry of the same envelope, same report id, is a duplicate
	// instead).
	UploadTokenSpent = "token_spent"
)
