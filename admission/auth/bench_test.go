package auth

import (
	"context"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/cputime"
	jose "github.com/go-jose/go-jose/v4"
)

// BenchmarkAuthenticate measures the check of one JWT (one per token
// request, whatever its number of pool keys) per signature algorithm.
func BenchmarkAuthenticate(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.RS256} {
		b.Run(string(alg), func(b *testing.B) {
			s := newSigner(b, "k", alg)
			a, err := New(context.Background(), Options{JWKSFile: writeFile(b, keySet(b, s)), Now: func() time.Time { return testNow }})
			if err != nil {
				b.Fatal(err)
			}
			tok := s.sign(b, claims("device-1"))
			b.ReportAllocs()
			m := cputime.Start()
			for b.Loop() {
				if _, err := a.Authenticate(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
			m.Report(b, 1, "")
		})
	}
}
