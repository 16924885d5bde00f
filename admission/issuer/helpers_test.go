package issuer

import (
	"context"
	"crypto/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// day is the length of the test periods.
const day = 86400

// testNow is the tests' "now": noon of day 100.
var testNow = time.Unix(100*day+day/2, 0)

// poolKey returns the pool key of pool in the day-long period d.
func poolKey(pool string, d int64) string {
	return report.PeriodPoolKey(pool, "0123456789abcdef", report.Period{Start: d * day, Length: day})
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fixture is n issuers sharing one store of kind ("sqlite": one issuer
// only, a SQLite store belongs to one process; "postgres"), one seed, and
// one settable clock, with a verifier of that seed.
type fixture struct {
	seed     []byte
	clock    *clock
	issuers  []*Issuer
	verifier *Verifier
}

// newFixture opens the fixture; o.Seed, o.Store, o.Dir and o.Now are set
// here.
func newFixture(t *testing.T, kind string, n int, o Options) *fixture {
	t.Helper()
	f := &fixture{seed: make([]byte, SeedSize), clock: &clock{t: testNow}}
	rand.Read(f.seed)
	dir := t.TempDir()
	o.Seed, o.Now, o.Dir = f.seed, f.clock.Now, dir
	o.Store = servertest.StoreOf(t, kind, dir)
	for range n {
		is, err := New(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { is.Close() })
		f.issuers = append(f.issuers, is)
	}
	var err error
	if f.verifier, err = NewVerifier(f.seed); err != nil {
		t.Fatal(err)
	}
	return f
}

// replicaCount is how many issuers share a store of kind.
func replicaCount(kind string) int {
	if kind == "postgres" {
		return 2
	}
	return 1
}

// instance names a test app instance.
func instance(sub string) auth.Identity {
	return auth.Identity{Issuer: "https://idp.test", Subject: sub}
}

// fetch runs an app's side against is: Blind, Issue, Finalize.
func fetch(t *testing.T, is *Issuer, id auth.Identity, pools ...string) (*admission.Pending, []admission.Token, error) {
	t.Helper()
	p, req, err := admission.Blind(pools)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := is.Issue(context.Background(), id, req)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := admission.Finalize(p, resp)
	return p, tokens, err
}
