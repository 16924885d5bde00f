package issuer

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/cputime"
)

// BenchmarkVerify measures the shuffler's check of one token (the pool
// key's derived key cached). Target: at least 10,000 tokens/s on one
// core (go test -bench Verify -cpu 1): tokens/s counts wall time, which
// other work on a shared machine inflates; 1e9/cpu-ns/op is the rate of
// one core of this process.
func BenchmarkVerify(b *testing.B) {
	seed := make([]byte, SeedSize)
	rand.Read(seed)
	is := &Issuer{keys: newKeyring(seed)}
	pool := poolKey("a", 100)
	tok := issueDirect(b, is, pool)
	v, err := NewVerifier(seed)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	m := cputime.Start()
	for b.Loop() {
		if err := v.Verify(pool, tok); err != nil {
			b.Fatal(err)
		}
	}
	m.Report(b, 1, "")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkVerifyUncached measures Verify when every pool key is new to
// the verifier (its key derived first).
func BenchmarkVerifyUncached(b *testing.B) {
	seed := make([]byte, SeedSize)
	rand.Read(seed)
	is := &Issuer{keys: newKeyring(seed)}
	pool := poolKey("a", 100)
	tok := issueDirect(b, is, pool)
	b.ReportAllocs()
	m := cputime.Start()
	for b.Loop() {
		v, _ := NewVerifier(seed)
		if err := v.Verify(pool, tok); err != nil {
			b.Fatal(err)
		}
	}
	m.Report(b, 1, "")
}

// issueDirect returns a token of pool made through is.prepare, without a
// store.
func issueDirect(b *testing.B, is *Issuer, pool string) admission.Token {
	p, req, err := admission.Blind([]string{pool})
	if err != nil {
		b.Fatal(err)
	}
	g, code, reason := is.prepare(req.Requests[0], testNow.Unix(), map[string]bool{})
	if code != "" {
		b.Fatal(reason)
	}
	tokens, err := admission.Finalize(p, &admission.TokenResponse{Evaluations: []admission.Evaluation{{Pool: pool, Evaluated: g.evaluated}}})
	if err != nil {
		b.Fatal(err)
	}
	return tokens[0]
}

// memStore is a grant store in memory, for measuring Issue without a
// database.
type memStore struct {
	mu sync.Mutex
	m  map[string]stored
}

func (st *memStore) grant(_ context.Context, gs []grant) ([]stored, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]stored, len(gs))
	for i, g := range gs {
		k := string(g.identity[:]) + g.pool
		if s, ok := st.m[k]; ok {
			out[i] = s
			continue
		}
		out[i] = stored{blinded: g.blinded, evaluated: g.evaluated}
		st.m[k] = out[i]
	}
	return out, nil
}

func (st *memStore) forget(context.Context, int64) (int64, error) { return 0, nil }
func (st *memStore) ready(context.Context) error                  { return nil }
func (st *memStore) close() error                                 { return nil }

// BenchmarkIssue measures Issue per token for requests of n pool keys
// (an app asking for its pools' tokens at once), each by a new
// identity: in memory (the issuer's own work: checks, evaluation,
// identity hash) and on the SQLite store (one synced commit per
// request).
func BenchmarkIssue(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		for _, n := range []int{3, 21} {
			b.Run(fmt.Sprintf("store=%s/n=%d", kind, n), func(b *testing.B) {
				seed := make([]byte, SeedSize)
				rand.Read(seed)
				o := Options{Seed: seed, Dir: b.TempDir(), Now: (&clock{t: testNow}).Now}
				var is *Issuer
				if kind == "memory" {
					is = &Issuer{o: o, keys: newKeyring(seed), idKey: identityKey(seed), store: &memStore{m: map[string]stored{}}}
					is.o.Prefetch = DefaultPrefetch
				} else {
					var err error
					if is, err = New(context.Background(), o); err != nil {
						b.Fatal(err)
					}
					defer is.Close()
				}
				pools := make([]string, n)
				for i := range pools {
					pools[i] = poolKey(fmt.Sprint("pool", i), 100)
				}
				_, req, err := admission.Blind(pools)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				i := 0
				m := cputime.Start()
				for b.Loop() {
					i++
					resp, err := is.Issue(ctx, instance(fmt.Sprint("i", i)), req)
					if err != nil || resp.Evaluations[0].Refused != "" {
						b.Fatal(err, resp.Evaluations[0])
					}
				}
				m.Report(b, n, "token")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
			})
		}
	}
}

// BenchmarkIssueConcurrent measures Issue on the SQLite store with 32
// requests at a time per core (apps asking together), each of 3 pool keys
// by a new identity: the requests share their group's commit.
func BenchmarkIssueConcurrent(b *testing.B) {
	seed := make([]byte, SeedSize)
	rand.Read(seed)
	is, err := New(context.Background(), Options{Seed: seed, Dir: b.TempDir(), Now: (&clock{t: testNow}).Now})
	if err != nil {
		b.Fatal(err)
	}
	defer is.Close()
	pools := []string{poolKey("pool0", 100), poolKey("pool1", 100), poolKey("pool2", 100)}
	_, req, err := admission.Blind(pools)
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(32)
	m := cputime.Start()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := is.Issue(context.Background(), instance(fmt.Sprint("i", next.Add(1))), req)
			if err != nil || resp.Evaluations[0].Refused != "" {
				b.Error(err)
				return
			}
		}
	})
	m.Report(b, len(pools), "token")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pools)), "ns/token")
}
