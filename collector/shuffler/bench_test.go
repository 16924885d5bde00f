package shuffler

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/cputime"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/cloudflare/circl/oprf"
)

// mintDirect returns n tokens of poolKey under seed, computed as the
// verifier does (the holder of the seed can: the OPRF output on a random
// input), without an issuer's round trips.
func mintDirect(b *testing.B, seed []byte, poolKey string, n int) [][]byte {
	b.Helper()
	info, err := admission.Info(poolKey)
	if err != nil {
		b.Fatal(err)
	}
	key, err := oprf.DeriveKey(admission.Suite(), oprf.BaseMode, seed, info)
	if err != nil {
		b.Fatal(err)
	}
	s := oprf.NewServer(admission.Suite(), key)
	out := make([][]byte, n)
	for i := range out {
		var tok admission.Token
		rand.Read(tok.Input[:])
		y, err := s.FullEvaluate(tok.Input[:])
		if err != nil {
			b.Fatal(err)
		}
		copy(tok.Output[:], y)
		out[i], _ = tok.MarshalBinary()
	}
	return out
}

// BenchmarkUploadWithTokens measures the upload path, POST /v1/reports
// on loopback to the committed 202, with admission open and with tokens
// (each envelope's token verified, its spent key stored in the accept
// transaction), on SQLite and on PostgreSQL: 4 clients upload b.N
// envelopes in uploads of 100 (an op is one envelope). It reports
// envelopes per second and the test process's CPU time per envelope
// (cpu-ns/op: the shuffler's and the clients', which only encode; a
// PostgreSQL server's is its own process's, not counted). The difference
// between open and tokens is the verification (issuer.Verifier.Verify,
// about 60 µs of CPU) and the spent key's insert.
//
//	go test -run '^$' -bench UploadWithTokens -benchtime 20000x ./collector/shuffler/
func BenchmarkUploadWithTokens(b *testing.B) {
	for _, kind := range servertest.StoreKinds {
		for _, mode := range []string{admission.AdmissionOpen, admission.AdmissionTokens} {
			b.Run(fmt.Sprintf("store=%s/admission=%s", kind, mode), func(b *testing.B) {
				benchUpload(b, kind, mode == admission.AdmissionTokens, 4, 100)
			})
		}
	}
}

func benchUpload(b *testing.B, kind string, tokens bool, clients, per int) {
	seed := make([]byte, 32)
	rand.Read(seed)
	dir := b.TempDir()
	o := Options{Plan: testPlan(b, 1_000_000), Dir: dir, Store: servertest.StoreOf(b, kind, dir), Collector: "http://127.0.0.1:1", ConnRate: -1, Logger: testLogger(b)}
	var toks [][]byte
	if tokens {
		m := &mint{seed: seed}
		o.Admission = m.verifier(b)
		toks = mintDirect(b, seed, todayKey, b.N)
	}
	f := newShufflerFixture(b, o)
	sealed := fakeSealed(per)
	var next atomic.Int64
	b.ResetTimer()
	meter := cputime.Start()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			envs := make([]report.Envelope, 0, per)
			for {
				lo := int(next.Add(int64(per))) - per
				if lo >= b.N {
					return
				}
				envs = envs[:0]
				for i := lo; i < min(lo+per, b.N); i++ {
					e := report.Envelope{ID: report.NewID(), Metric: todayKey, Suite: report.SuiteX25519ChaCha, Sealed: sealed[i%per]}
					if tokens {
						e.Token = toks[i]
					}
					envs = append(envs, e)
				}
				res, err := uploadEnvs(hc, f.url, envs)
				if err != nil || res.Accepted != len(envs) {
					b.Errorf("upload: %+v, %v", res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	meter.Report(b, 1, "")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
}
