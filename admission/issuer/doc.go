// Package issuer is the server's half of admission tokens (package
// admission has the scheme and the app's half): the Issuer, which grants
// each authenticated app instance at most one token per pool key over
// HTTP, and the Verifier, with which the shuffler checks the token of
// each envelope.
//
//	seed, _, err := issuer.LoadOrCreateSeed(dir) // dir/admission.seed, shared with the shuffler
//	a, err := auth.New(ctx, auth.Options{JWKSURL: jwks, Audience: "blanket"})
//	is, err := issuer.New(ctx, issuer.Options{Seed: seed, Dir: dir, Allow: planPools})
//	mux.Handle(admission.TokensPath, is.Handler(a))
//	// every few minutes: is.Forget(ctx)
//
//	// the shuffler, with the same seed (issuer.LoadSeed(path)):
//	v, err := issuer.NewVerifier(seed)
//	err = v.Verify(env.Metric, tok) // then refuse a SpentKey seen before
//
// # The grant rule
//
// Issue grants an identity (the JWT's iss and sub, package auth) at most
// one evaluation per pool key, for pool keys whose period is the current
// one, one ended less than Options.Grace ago, or one of the next
// Options.Prefetch, and that Options.Allow admits. The grant (the
// identity's keyed hash, the pool key, the SHA-256 of the blinded element,
// the evaluation) is committed before the answer is sent; the same
// blinded element again is answered with the same evaluation, so that an
// app killed after the commit and before it read the answer sends its
// persisted request again and gets its token; another blinded element is
// refused (admission.RefusedAlreadyGranted). Grants are forgotten
// (Forget) once their period's deadline, its end plus the grace, passed;
// a forgotten period is granted no more, so no identity is granted a pool
// key twice, whatever the clocks and graces of the issuer's replicas
// (store_postgres.go has the argument).
//
// Identities are stored as HMAC-SHA256 under a key derived from the seed,
// never as the JWT's subject: a copy of the database alone does not tell
// whose grants it holds. A holder of the seed (the issuer, the shuffler)
// can test a guessed identity against it.
//
// # Verifying, and the spent set
//
// The shuffler verifies with the issuer's seed (Verifier.Verify: about
// 63 µs, 20 small allocations, the pool key's derived key cached), and
// must refuse a token spent before with an envelope of the same pool key.
// SpentKey gives the key under which it records a spent token: it keeps
// these keys in its own store, in the transaction that accepts the
// envelope, until the period's deadline, as it keeps envelope ids.
// MemorySpent is a SpentSet in memory for a single process and tests.
//
// # Storage
//
// issuer.db (SQLite, in Options.Dir), or the schema blanket_issuer of a
// PostgreSQL database that replicas share (Options.Store = postgres://…):
//
//	grants(identity, pool_key PK, blinded, evaluated, period_len, period_end, deadline)
//	forgotten(period_len PK, period_end)   latest forgotten end per period length
//
// admission.seed (mode 0600, base64url) holds the seed: the issuer's
// replicas and the shuffler read the same file (LoadSeed). Losing it
// invalidates every unspent token; leaking it lets its holder mint tokens.
package issuer
