package report

import (
	"crypto/hpke"
	"testing"
	"time"
)

// The collector's opening rate has a floor: one HPKE open per report
// (X25519 and ChaCha20-Poly1305). BenchmarkHPKEOpen measures bare
// crypto/hpke opens of 16-byte reports, BenchmarkOpen the same through
// Open (the binding's info and the period check), so that the
// collector's BenchmarkIngest (decode, open, accumulate, store) can be
// compared with the floor per core (issue 28: within 1.3x).

func benchKey(b *testing.B) *PrivateKey {
	b.Helper()
	priv, _, err := GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	sk, err := ParsePrivateKey(priv)
	if err != nil {
		b.Fatal(err)
	}
	return sk
}

func benchBinding() Binding {
	return Binding{Metric: "ui/screen", Period: Period{Start: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).Unix(), Length: 86400}}
}

func BenchmarkHPKEOpen(b *testing.B) {
	sk := benchKey(b)
	_, kdf, aead := suite()
	info := sealInfo(benchBinding(), sk.id)
	sealed, err := hpke.Seal(sk.k.PublicKey(), kdf, aead, info, make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := hpke.Open(sk.k, kdf, aead, info, sealed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

func BenchmarkOpen(b *testing.B) {
	sk := benchKey(b)
	bind := benchBinding()
	sealed, err := Seal(sk.PublicKey(), bind, make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Open(sk, bind, sealed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}
