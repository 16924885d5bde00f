package shuffler

import "github.com/blanket-dp/blanket/sdk/ldp"

// Shuffle puts s in a uniformly random order: a Fisher-Yates shuffle whose
// every swap index is a uniform integer drawn by rejection sampling
// (ldp.Uintn), so each of the len(s)! orders has probability exactly
// 1/len(s)! when src is uniform. A nil src means a new ldp.CryptoSource
// (crypto/rand); tests inject a seeded source.
func Shuffle[T any](src ldp.Source, s []T) {
	src = ldp.DefaultSource(src)
	for i := len(s) - 1; i > 0; i-- {
		j := ldp.Uintn(src, uint64(i)+1)
		s[i], s[j] = s[j], s[i]
	}
}
