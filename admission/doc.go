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
// that might collude need VOPRF or POPRF, at the costs below.
//
// # Costs
//
// CPU time per token on one core, from this repository's benchmarks (go
// test -bench . -cpu 1: BenchmarkAlternatives and BenchmarkClient here,
// BenchmarkVerify and BenchmarkIssue in package issuer, BenchmarkAuthenticate
// in package auth; their cpu-ns/op), on the 2-core development machine
// (an "Oxide Virtual Turin-like Processor", Go 1.26, circl v1.6.5), in
// microseconds:
//
//	                        blind  issue  finalize  verify  in all
//	OPRF base (this)           61     51        78      63     253
//	VOPRF                      61    295       449      77     882
//	POPRF                      64    352       428      87     931
//	blind RSA-2048 (RFC 9474)  79   2992        39      38    3148, and 48 ms of keygen per key
//
// The machine is shared: each figure is the least of two to six runs,
// most with the load average at 1.2 to 1.8 and one at 7 to 8, between
// which a figure varied by up to 40%; at the lower load wall times
// matched CPU times, at the higher they were 2 to 2.5 times them. A verification is
// mostly one scalar multiplication in go-ristretto's pure-Go field
// arithmetic (72% of its profile); it makes 20 small allocations.
//
// The alternatives, and why not:
//
//   - Blind RSA signatures (RFC 9474) verify fast and publicly, but issue
//     at about 3 ms per token, and carry no public metadata, so binding a
//     token to a pool and period needs a key per (pool, period): 48 ms of
//     key generation each, and a key directory the apps must fetch.
//   - Partially blind RSA (the metadata variant) needs safe-prime keys
//     and verifies with an exponent derived per metadata, about 1024 bits
//     long: milliseconds per verification.
//   - POPRF (mode 2) binds the metadata by itself and proves the
//     evaluation, at about 0.9 ms per token (the client's finalize, which
//     checks the proof, 428 µs, the issue 352 µs); VOPRF (mode 1), with a
//     derived key per pool key, about 0.9 ms too.
//
// The demo (make demo: 100,000 instances over 7 days, the apps and the
// server on one 2-core machine) spends 1.65 tokens per message (each
// instance's tokens of the days it reports, and of the day current at its
// last Flush): 173,393 with its three metrics travelling jointly, in 160 s
// in all; with TRAVEL=separate, 520,179 tokens take it to 285 s, against
// about 100 s with admission open. Measured there
// (CPU profiles of the fleet and of blanket serve), a token costs the
// loaded machine about 600 µs in all: blind 112 µs and finalize 98 µs in
// the fleet, the issuer's evaluation, store and JWT check, the shuffler's
// verification, and their HTTP. VOPRF or POPRF would add about 630 µs
// per token, mostly on the client (the proof).
//
// # Sizing
//
// N devices reporting daily for P pools make N·P tokens a day, in about N
// token requests (an app asks for all its pool keys at once). A request
// costs the issuer one JWT check (46 µs RS256, 60 µs EdDSA, 79 µs ES256)
// and one store commit; a token costs it 51 µs of evaluation, 61 to 64
// µs with the issuer's checks, and on SQLite 170 to 270 µs of CPU in all
// (BenchmarkIssue, requests of 21 and 3 pool keys). A token costs the
// shuffler one verification, 63 µs: a core verifies about 16,000 tokens a
// second. For a million devices and P = 3: about 900 s of issuer CPU and
// 190 s of shuffler CPU a day, 0.01 and 0.002 cores on average; 0.25 and
// 0.05 cores if every device fetched and reported within the same hour.
// The SQLite store commits the requests waiting together, in one synced
// transaction (BenchmarkIssueConcurrent: 134 µs of CPU per token with 32
// requests of 3 pool keys at a time per core, against 473 µs, 1.4 ms per
// request, committing each alone); PostgreSQL replicas share the load
// beyond one process. The store holds one row per grant (about 280 bytes on
// SQLite with its index, for a 41-byte pool key) until the period's
// deadline: with daily periods and the default grace (8 periods) and
// prefetch (3), up to 12 days of grants, about 10 GB for a million
// devices and P = 3.
package admission
