package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testNow is the tests' clock.
var testNow = time.Unix(1_800_000_000, 0)

// signer signs test tokens under one key.
type signer struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// newSigner returns a signer of a fresh key for alg (ES256, EdDSA, or
// RS256, whose 2048-bit key is made once per test binary).
func newSigner(t testing.TB, kid string, alg jose.SignatureAlgorithm) signer {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case jose.RS256:
		rsaOnce.Do(func() { rsaKey, err = rsa.GenerateKey(rand.Reader, 2048) })
		priv = rsaKey
	}
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: alg, priv: priv}
}

// public returns the signer's public key as a JWK.
func (s signer) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: s.priv.Public(), KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"}
}

// sign returns a JWT of claims signed by s.
func (s signer) sign(t testing.TB, claims any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: jose.JSONWebKey{Key: s.priv, KeyID: s.kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// keySet returns the JWKS of the signers' public keys.
func keySet(t testing.TB, signers ...signer) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, s := range signers {
		set.Keys = append(set.Keys, s.public())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// claims returns valid claims for subject sub.
func claims(sub string) jwt.Claims {
	return jwt.Claims{
		Issuer:   "https://idp.test",
		Subject:  sub,
		Audience: jwt.Audience{"blanket"},
		Expiry:   jwt.NewNumericDate(testNow.Add(time.Hour)),
		IssuedAt: jwt.NewNumericDate(testNow.Add(-time.Minute)),
	}
}

// writeFile writes b to a file in a temporary directory.
func writeFile(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// b64 is unpadded base64url.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// TestAuthenticateRefusesBadTokens: each way a token can be wrong is
// refused with its error; the good ones of each algorithm pass.
func TestAuthenticateRefusesBadTokens(t *testing.T) {
	es, ed, rs := newSigner(t, "es", jose.ES256), newSigner(t, "ed", jose.EdDSA), newSigner(t, "rs", jose.RS256)
	impostor := newSigner(t, "es", jose.ES256) // another key under a known kid
	stranger := newSigner(t, "unknown", jose.ES256)
	a, err := New(context.Background(), Options{
		JWKSFile: writeFile(t, keySet(t, es, ed, rs)),
		Issuer:   "https://idp.test", Audience: "blanket",
		Now: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(c *jwt.Claims)) jwt.Claims {
		c := claims("device-1")
		f(&c)
		return c
	}
	payload, _ := json.Marshal(claims("device-1"))
	none := b64([]byte(`{"alg":"none","kid":"es","typ":"JWT"}`)) + "." + b64(payload) + "."

	// Alg confusion: HS256 keyed with the public key as the verifier
	// would see it (its JWK, its PEM).
	jwk, _ := json.Marshal(rs.public())
	der, _ := x509.MarshalPKIXPublicKey(rs.priv.Public())
	var confused []string
	for _, secret := range [][]byte{jwk, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})} {
		hs := signer{kid: "rs", alg: jose.HS256}
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: hs.kid}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(sig).Claims(claims("device-1")).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		confused = append(confused, tok)
	}

	for _, c := range []struct {
		name  string
		token string
		want  error
	}{
		{"ES256", es.sign(t, claims("device-1")), nil},
		{"EdDSA", ed.sign(t, claims("device-1")), nil},
		{"RS256", rs.sign(t, claims("device-1")), nil},
		{"within leeway", es.sign(t, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(testNow.Add(-30 * time.Second)) })), nil},
		{"expired", es.sign(t, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(testNow.Add(-2 * time.Minute)) })), ErrExpired},
		{"not yet valid", es.sign(t, with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(testNow.Add(5 * time.Minute)) })), ErrNotYetValid},
		{"wrong signature", impostor.sign(t, claims("device-1")), ErrSignature},
		{"wrong audience", es.sign(t, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other"} })), ErrAudience},
		{"no audience", es.sign(t, with(func(c *jwt.Claims) { c.Audience = nil })), ErrAudience},
		{"wrong issuer", es.sign(t, with(func(c *jwt.Claims) { c.Issuer = "https://evil.test" })), ErrIssuer},
		{"unknown kid", stranger.sign(t, claims("device-1")), ErrUnknownKey},
		{"no kid, several keys", signer{alg: jose.ES256, priv: es.priv}.sign(t, claims("device-1")), ErrUnknownKey},
		{"alg none", none, ErrAlgorithm},
		{"HS256 keyed with the JWK", confused[0], ErrAlgorithm},
		{"HS256 keyed with the PEM", confused[1], ErrAlgorithm},
		{"kid of another algorithm", signer{kid: "rs", alg: jose.ES256, priv: es.priv}.sign(t, claims("device-1")), ErrAlgorithm},
		{"no exp", es.sign(t, with(func(c *jwt.Claims) { c.Expiry = nil })), ErrClaims},
		{"no sub", es.sign(t, with(func(c *jwt.Claims) { c.Subject = "" })), ErrClaims},
		{"exp not a number", es.sign(t, map[string]any{"sub": "device-1", "iss": "https://idp.test", "aud": "blanket", "exp": "tomorrow"}), ErrClaims},
		{"garbage", "not.a.jwt", ErrMalformed},
		{"empty", "", ErrMalformed},
	} {
		id, err := a.Authenticate(context.Background(), c.token)
		if c.want == nil {
			if err != nil || id != (Identity{Issuer: "https://idp.test", Subject: "device-1"}) {
				t.Errorf("%s: %+v, %v", c.name, id, err)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestKeySetKeepsOnlyPublicSigningKeys: a symmetric key, an encryption
// key and a key of an unknown type are skipped, a private key reduced to
// its public half; a set of no usable key is refused.
func TestKeySetKeepsOnlyPublicSigningKeys(t *testing.T) {
	es := newSigner(t, "es", jose.ES256)
	priv, _ := json.Marshal(jose.JSONWebKey{Key: es.priv, KeyID: "es", Algorithm: "ES256"})
	sym, _ := json.Marshal(jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hs"})
	enc := es.public()
	enc.Use, enc.KeyID = "enc", "enc"
	encB, _ := json.Marshal(enc)
	set := []byte(`{"keys":[` + string(sym) + `,` + string(encB) + `,{"kty":"XYZ","kid":"new"},` + string(priv) + `]}`)
	keys, err := parseKeySet(set)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].KeyID != "es" || !keys[0].IsPublic() {
		t.Errorf("kept %+v, want the public half of es", keys)
	}
	if _, err := parseKeySet([]byte(`{"keys":[` + string(sym) + `]}`)); !errors.Is(err, ErrKeySet) {
		t.Errorf("a set of a symmetric key: %v, want ErrKeySet", err)
	}
	if _, err := New(context.Background(), Options{JWKSFile: writeFile(t, []byte("nope"))}); !errors.Is(err, ErrKeySet) {
		t.Errorf("a file that is no key set: %v, want ErrKeySet", err)
	}
	for _, o := range []Options{
		{},
		{JWKSFile: "a", JWKSURL: "http://b"},
		{JWKSFile: "a", Algorithms: []jose.SignatureAlgorithm{jose.HS256}},
		{JWKSFile: "a", Leeway: -time.Second},
	} {
		if _, err := New(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v): %v, want ErrOptions", o, err)
		}
	}
}
