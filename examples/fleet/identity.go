package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The demo's own identity provider: apps with a login already hold a JWT
// from theirs (Config.Credential); the simulated instances get one minted
// with a key the fleet makes, whose public half the server verifies
// (blanket serve --jwks). Its iss and aud, which the server checks:
const (
	demoIssuer   = "blanket-demo"
	demoAudience = "blanket-demo"
	demoKeyID    = "fleet-1"
)

// writeIdentityKeys creates an Ed25519 signing key at keyPath (a private
// JWK, mode 0600) and its public JSON Web Key Set at jwksPath.
func writeIdentityKeys(keyPath, jwksPath string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	jwk := jose.JSONWebKey{Key: priv, KeyID: demoKeyID, Algorithm: string(jose.EdDSA), Use: "sig"}
	b, err := json.Marshal(jwk)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, b, 0o600); err != nil {
		return err
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk.Public()}}
	if b, err = json.Marshal(set); err != nil {
		return err
	}
	return os.WriteFile(jwksPath, b, 0o644)
}

// identities mints each simulated instance's JWT.
type identities struct {
	signer jose.Signer
}

// loadIdentities reads the private JWK writeIdentityKeys wrote.
func loadIdentities(keyPath string) (*identities, error) {
	b, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(b, &jwk); err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	if jwk.IsPublic() {
		return nil, fmt.Errorf("%s: a public key; -jwt-key needs the private key -write-jwt-key wrote", keyPath)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jwk}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &identities{signer: s}, nil
}

// mint returns a JWT for instance id, valid for an hour of the real
// clock (the server checks it against its own, whatever day the instance
// simulates).
func (ids *identities) mint(id uint64) (string, error) {
	now := time.Now()
	return jwt.Signed(ids.signer).Claims(jwt.Claims{
		Issuer:   demoIssuer,
		Audience: jwt.Audience{demoAudience},
		Subject:  fmt.Sprintf("instance-%d", id),
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(time.Hour)),
	}).Serialize()
}
