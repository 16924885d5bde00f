// Package ldp holds what local randomizers share: the randomness source and
// exact sampling primitives, the categorical domain with its optional
// "other" bucket, the fixed-width report encoding, the eps0 range check and
// the frequency estimators of pure protocols with their post-processing,
// and the steps of sdk.Randomizer that the built-in randomizers take alike
// (configuration checks, the declaration form, Accumulate, the Estimate
// envelope).
//
// Randomness is crypto-backed by default (NewCryptoSource) and injectable
// for tests (any math/rand/v2 source):
//
//	src := ldp.NewCryptoSource()
//	keep := ldp.Choose(src, pKeep, pFlip) // exact even for tiny probabilities
//	j := ldp.Intn(src, k)                 // rejection sampling, never %
//
// A randomizer whose reports are indices accumulates them with
//
//	stat, err := ldp.AccumulateIndices(ctx, &desc, eps0, k, reports)
//
// Uniform integers use rejection sampling; Bernoulli draws are exact for the
// float64 probability given. Frequency estimates follow Wang, Blocki, Li,
// Jha, "Locally Differentially Private Protocols for Frequency Estimation",
// USENIX Security 2017.
package ldp
