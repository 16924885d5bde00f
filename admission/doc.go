// Package admission is the app's half of Blanket's admission tokens, and
// their wire format. An issuer grants each authenticated app instance at
// most one token per pool key (a pool, a plan epoch and a reporting
// period: report.PeriodPoolKey); the shuffler takes an envelope only with
// a valid token of its pool key not spent before. Tokens are issued
// blinded: the issuer never sees the token it helps make, so a token
// spent at the shuffler cannot be linked to the instance that fetched it.
// This defends the shuffler's pools against outsiders who can reach the
// upload port and would fill a batch with their own reports, shrinking
// the crowd an honest report hides in.
//
// An app asks for the tokens of its pool keys, persists the pending
// state before sending (a crash then resends the same request), and
// finalizes the answer:
//
//	pending, req, err := admission.Blind(poolKeys)
//	state, err := pending.MarshalBinary() // store it; after a crash: admission.ParsePending(state), then pending.Request()
//	// POST req to the issuer's /v1/tokens with the instance's JWT (wire.go)
//	tokens, err := admission.Finalize(pending, resp) // tokens[i] goes with an envelope of poolKeys[i]
//
// This package is what an app links (the OPRF client of
// github.com/cloudflare/circl and the wire types: about twenty packages,
// 0.6 MB of binary). The issuer, the verifier and their stores are in
// package issuer; the authentication of instances (JWT) in package auth.
//
// # The scheme
//
// RFC 9497's OPRF in base mode (mode 0x00), suite ristretto255-SHA512,
// with one private key per pool key, derived from the issuer's 32-byte
// seed: oprf.DeriveKey(Suite(), oprf.BaseMode, seed, Info(poolKey)). A
// token is (input, output): 32 random bytes the client draws, and the
// OPRF output on them (the Finalize of the unblinded evaluation, 64
// bytes). The client sends the input blinded by a random scalar; the
// issuer multiplies it by the pool key's key; the client unblinds and
// hashes. Whoever holds the seed verifies a token by recomputing the
// output under the pool key's key (RFC 9497 VerifyFinalize). Since the
// pool key names the period, a token is bound to its pool and period by
// the key alone: no public metadata travels. token.go sketches why the
// scheme is unforgeable (one-more-gap-DH, RFC 9497 §7), unlinkable
// (uniformly random blinds) and bound to its pool key (key derivation).
//
// # The trust split
//
// The verifier, the shuffler, holds the issuer's seed: verifying an OPRF
// output needs the key. This gives the shuffler no new power: it can
// already put any report into a batch it forms, and the central guarantee
// assumes an honest shuffler. Admission defends against outsiders.
//
// Base mode carries no proof (DLEQ) that the issuer evaluated under the
// pool key's key. A dishonest issuer could answer each instance under a
// key of its own and, colluding with the shuffler, learn which instance
// redeemed a token (which instance sent which envelope; the report inside
// stays sealed to the collector). An honest shuffler verifies under the
// one derived key per pool key only, so such tokens are refused there: a
// lone dishonest issuer that tags instances shows as refusals, not as
// silent linking. Operators who cannot accept an issuer and a shuffler
// that might collude need VOPRF or POPRF.
package admission
