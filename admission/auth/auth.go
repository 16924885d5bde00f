// Package auth authenticates the app instances that ask the admission
// issuer for tokens: a JSON Web Token (RFC 7519) signed by the operator's
// identity provider, checked against the provider's public keys (a JSON
// Web Key Set, from a file or a URL). The instance's identity is the
// token's issuer and subject.
//
//	a, err := auth.New(ctx, auth.Options{JWKSURL: "https://idp.example/jwks.json", Audience: "blanket"})
//	id, err := a.Authenticate(ctx, bearer) // id.Issuer, id.Subject
//
// Only asymmetric signatures are taken (DefaultAlgorithms): the key set
// is public, so an HMAC key taken from it (alg confusion) or an unsigned
// token (alg "none") never verifies.
package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Errors. Authenticate's refusals wrap ErrRefused and one of the more
// specific sentinels.
var (
	// ErrOptions reports an invalid Options field; the message names it.
	ErrOptions = errors.New("auth: bad options")
	// ErrKeySet reports a key set that cannot be read or holds no usable
	// key.
	ErrKeySet = errors.New("auth: unusable key set")
	// ErrKeysUnavailable reports a token signed under a key the set does
	// not hold, when the set's URL could not be fetched again: the
	// caller may retry later.
	ErrKeysUnavailable = errors.New("auth: key set unavailable")
	// ErrRefused reports a token that does not authenticate.
	ErrRefused = errors.New("auth: token refused")

	// ErrMalformed: the token is not a JWS compact serialization.
	ErrMalformed = errors.New("malformed token")
	// ErrAlgorithm: the token's algorithm is not an allowed one ("none",
	// HMAC, one not in Options.Algorithms) or not the key's.
	ErrAlgorithm = errors.New("algorithm not allowed")
	// ErrUnknownKey: the key set holds no key of the token's key id.
	ErrUnknownKey = errors.New("unknown key")
	// ErrSignature: the signature does not verify.
	ErrSignature = errors.New("bad signature")
	// ErrExpired: the token's exp is past (beyond the leeway).
	ErrExpired = errors.New("token expired")
	// ErrNotYetValid: the token's nbf or iat is ahead (beyond the
	// leeway).
	ErrNotYetValid = errors.New("token not yet valid")
	// ErrIssuer: the token's iss is not Options.Issuer.
	ErrIssuer = errors.New("wrong issuer")
	// ErrAudience: the token's aud does not name Options.Audience.
	ErrAudience = errors.New("wrong audience")
	// ErrClaims: the token lacks exp or sub, or its claims do not decode.
	ErrClaims = errors.New("missing or malformed claims")
)

// DefaultAlgorithms are the signature algorithms taken when
// Options.Algorithms is empty: the asymmetric ones of RFC 7518 and
// EdDSA.
var DefaultAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// Options configure an Authenticator.
type Options struct {
	// JWKSFile is a file holding the provider's JSON Web Key Set, read
	// once by New. Exactly one of JWKSFile and JWKSURL is required.
	JWKSFile string
	// JWKSURL is the URL of the provider's JSON Web Key Set, fetched by
	// New, and again when the set is older than Refresh or a token names
	// a key id it lacks (at most once per MinRefetch).
	JWKSURL string
	// Issuer, when set, is the iss every token must carry. Defaults to
	// any (the identity still includes the token's iss). Set it: a
	// provider that issues one subject's tokens under two iss values
	// otherwise gives that instance two identities, two tokens per pool
	// and period.
	Issuer string
	// Audience, when set, must be among every token's aud. Defaults to
	// any. Set it: the bound of one token per instance, pool and period
	// is only as strong as the cost of a new identity, and a key set
	// shared by many tenants (a hosted login service signing every
	// project's tokens with one set) lets anyone with their own project
	// mint identities the issuer would accept.
	Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat. Defaults to
	// one minute.
	Leeway time.Duration
	// Algorithms are the signature algorithms taken. Defaults to
	// DefaultAlgorithms; HMAC algorithms are refused.
	Algorithms []jose.SignatureAlgorithm
	// Client fetches JWKSURL. Defaults to http.DefaultClient; each fetch
	// is bounded by FetchTimeout.
	Client *http.Client
	// FetchTimeout bounds one fetch of JWKSURL. Defaults to 10 s.
	FetchTimeout time.Duration
	// Refresh is how long a fetched key set is used before it is fetched
	// again (by the next Authenticate; a failed fetch keeps the old set).
	// Defaults to one hour.
	Refresh time.Duration
	// MinRefetch is the least time between the beginnings of two
	// fetches of JWKSURL after New. Defaults to one minute.
	MinRefetch time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Identity names an authenticated app instance: the token's issuer and
// subject.
type Identity struct {
	Issuer, Subject string
}

// Authenticator checks bearer tokens. It is safe for concurrent use.
type Authenticator struct {
	o    Options
	keys *keySource
}

// New returns an Authenticator, reading or fetching its key set once
// (an error wrapping ErrKeySet if that fails).
func New(ctx context.Context, o Options) (*Authenticator, error) {
	if (o.JWKSFile == "") == (o.JWKSURL == "") {
		return nil, fmt.Errorf("%w: exactly one of JWKSFile and JWKSURL is required", ErrOptions)
	}
	if o.Leeway < 0 || o.FetchTimeout < 0 || o.Refresh < 0 || o.MinRefetch < 0 {
		return nil, fmt.Errorf("%w: Leeway, FetchTimeout, Refresh and MinRefetch must be >= 0", ErrOptions)
	}
	if o.Leeway == 0 {
		o.Leeway = jwt.DefaultLeeway
	}
	if len(o.Algorithms) == 0 {
		o.Algorithms = DefaultAlgorithms
	}
	for _, alg := range o.Algorithms {
		if !slices.Contains(DefaultAlgorithms, alg) {
			return nil, fmt.Errorf("%w: algorithm %q: only asymmetric signatures are taken (the key set is public)", ErrOptions, alg)
		}
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = 10 * time.Second
	}
	if o.Refresh == 0 {
		o.Refresh = time.Hour
	}
	if o.MinRefetch == 0 {
		o.MinRefetch = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	keys, err := newKeySource(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Authenticator{o: o, keys: keys}, nil
}

// refuse wraps a refusal.
func refuse(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrRefused, kind, fmt.Sprintf(format, args...))
}

// Authenticate checks the bearer token (the JWT, without "Bearer ") and
// returns the identity it names. It refuses, wrapping ErrRefused: a token
// that does not parse, of an algorithm not allowed, of a key the set
// lacks (after a refetch, rate-limited by MinRefetch; ErrKeysUnavailable
// when the last fetch failed), with a bad signature, without exp or sub,
// expired or not yet valid (beyond Leeway), or of another issuer or
// audience than configured. A token without a key id is checked against
// the set's only key, and refused if it has several.
func (a *Authenticator) Authenticate(ctx context.Context, bearer string) (Identity, error) {
	tok, err := jwt.ParseSigned(bearer, a.o.Algorithms)
	if err != nil {
		if _, ok := errors.AsType[*jose.ErrUnexpectedSignatureAlgorithm](err); ok {
			return Identity{}, refuse(ErrAlgorithm, "%v", err)
		}
		return Identity{}, refuse(ErrMalformed, "%v", err)
	}
	if len(tok.Headers) != 1 {
		return Identity{}, refuse(ErrMalformed, "%d signatures, want 1", len(tok.Headers))
	}
	h := tok.Headers[0]
	key, err := a.keys.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return Identity{}, err
	}
	var c jwt.Claims
	if err := tok.Claims(key.Key, &c); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, jwt.ErrUnmarshalNumericDate) || errors.Is(err, jwt.ErrUnmarshalAudience) {
			return Identity{}, refuse(ErrClaims, "%v", err)
		}
		return Identity{}, refuse(ErrSignature, "key %q: %v", key.KeyID, err)
	}
	if c.Expiry == nil {
		return Identity{}, refuse(ErrClaims, "no exp")
	}
	if c.Subject == "" {
		return Identity{}, refuse(ErrClaims, "no sub")
	}
	want := jwt.Expected{Issuer: a.o.Issuer, Time: a.o.Now()}
	if a.o.Audience != "" {
		want.AnyAudience = jwt.Audience{a.o.Audience}
	}
	if err := c.ValidateWithLeeway(want, a.o.Leeway); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return Identity{}, refuse(ErrExpired, "exp %v", c.Expiry.Time().UTC())
		case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
			return Identity{}, refuse(ErrNotYetValid, "%v", err)
		case errors.Is(err, jwt.ErrInvalidIssuer):
			return Identity{}, refuse(ErrIssuer, "iss %q, want %q", c.Issuer, a.o.Issuer)
		case errors.Is(err, jwt.ErrInvalidAudience):
			return Identity{}, refuse(ErrAudience, "aud %q does not name %q", []string(c.Audience), a.o.Audience)
		default:
			return Identity{}, refuse(ErrClaims, "%v", err)
		}
	}
	return Identity{Issuer: c.Issuer, Subject: c.Subject}, nil
}
