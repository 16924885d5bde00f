package shuffler

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// mint issues admission tokens as an app gets them: an Issuer of a
// random seed (SQLite, in a temporary directory), one new identity per
// token, Blind, Issue, Finalize.
type mint struct {
	seed []byte
	is   *issuer.Issuer
	n    atomic.Int64
}

func newMint(t testing.TB) *mint {
	t.Helper()
	m := &mint{seed: make([]byte, issuer.SeedSize)}
	rand.Read(m.seed)
	is, err := issuer.New(context.Background(), issuer.Options{Seed: m.seed, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	m.is = is
	return m
}

// verifier returns a Verifier of m's seed: the shuffler's.
func (m *mint) verifier(t testing.TB) *issuer.Verifier {
	t.Helper()
	v, err := issuer.NewVerifier(m.seed)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// token returns the binary form of a new token of poolKey, issued to a
// new identity (safe for concurrent use).
func (m *mint) token(t testing.TB, poolKey string) []byte {
	t.Helper()
	p, req, err := admission.Blind([]string{poolKey})
	if err != nil {
		t.Fatal(err)
	}
	id := auth.Identity{Issuer: "https://idp.test", Subject: fmt.Sprint("instance-", m.n.Add(1))}
	resp, err := m.is.Issue(context.Background(), id, req)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := admission.Finalize(p, resp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := toks[0].MarshalBinary()
	return b
}

// refusalCodes returns the code of each refused envelope of res, by
// index.
func refusalCodes(res UploadResult) map[int]string {
	out := map[int]string{}
	for _, e := range res.Errors {
		out[e.Index] = e.Code
	}
	return out
}

// TestShufflerAdmitsOnlyValidUnspentTokens uploads, to a shuffler that
// verifies tokens, envelopes with a valid token and envelopes without
// one, with bytes that are not one, with a token of another pool, of
// another period, a forged one, and one another envelope spent (in the
// same upload and in a later one): only the valid ones are pooled, each
// refusal carries its code and is counted by reason; the retry of an
// accepted envelope (same id, same token) is a duplicate, not a spend.
func TestShufflerAdmitsOnlyValidUnspentTokens(t *testing.T) {
	m := newMint(t)
	reg := prometheus.NewPedanticRegistry()
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1", Admission: m.verifier(t), Registerer: reg})
	yesterday := report.Period{Start: today.Start - today.Length, Length: today.Length}
	otherPool := periodKey("net/latency_ms", "00000000000000e1")
	forged := make([]byte, admission.TokenSize)
	rand.Read(forged)

	envs := envelopes(todayKey, fakeSealed(9))
	good := m.token(t, todayKey)
	envs[0].Token = good
	envs[1].Token = nil
	envs[2].Token = make([]byte, admission.TokenSize) // the zero token, Finalize's for a refused item
	envs[3].Token = []byte("not a token")
	envs[4].Token = m.token(t, otherPool)
	envs[5].Token = m.token(t, report.PeriodPoolKey(metric, "00000000000000e1", yesterday))
	envs[6].Token = forged
	envs[7].Token = good // another report spending envs[0]'s token
	envs[8].Token = m.token(t, todayKey)
	want := map[int]string{
		1: admission.UploadTokenMissing, 2: admission.UploadTokenMissing, 3: admission.UploadTokenInvalid,
		4: admission.UploadTokenInvalid, 5: admission.UploadTokenInvalid, 6: admission.UploadTokenInvalid,
		7: admission.UploadTokenSpent,
	}
	var res UploadResult
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if res.Accepted != 2 || res.Duplicates != 0 || res.Rejected != len(want) {
		t.Fatalf("result %+v; want 2 accepted, %d rejected", res, len(want))
	}
	got := refusalCodes(res)
	for i, code := range want {
		if got[i] != code {
			t.Errorf("envelope %d: code %q, want %q (%+v)", i, got[i], code, res.Errors)
		}
	}
	for _, e := range res.Errors {
		if e.Error == "" {
			t.Errorf("envelope %d: no reason in words", e.Index)
		}
	}

	// The retry of the accepted envelope, whose answer was lost: a
	// duplicate. The same token with yet another report: spent.
	again := envs[0]
	other := envelopes(todayKey, fakeSealed(1))[0]
	other.Token = good
	if post(t, nil, f.url, report.EncodeEnvelopes([]report.Envelope{again, other}), &res); res.Duplicates != 1 || res.Accepted != 0 || res.Rejected != 1 || res.Errors[0].Code != admission.UploadTokenSpent || res.Errors[0].Index != 1 {
		t.Fatalf("retry and a second spend: %+v; want a duplicate and token_spent at 1", res)
	}
	// The refused envelope's id is not remembered: sent again with a
	// token of its own, it is accepted.
	envs[7].Token = m.token(t, todayKey)
	if post(t, nil, f.url, report.EncodeEnvelopes(envs[7:8]), &res); res.Accepted != 1 {
		t.Fatalf("the refused envelope with a token of its own: %+v", res)
	}

	st, err := f.s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[todayKey] != 3 {
		t.Fatalf("pool holds %d reports, want the 3 admitted", st.Pools[todayKey])
	}
	for reason, n := range map[string]float64{admission.UploadTokenMissing: 2, admission.UploadTokenInvalid: 4, admission.UploadTokenSpent: 2} {
		if got := rejectedCount(t, reg, reason); got != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, got, n)
		}
	}
	lint(t, reg)
}

// rejectedCount returns the value of
// blanket_shuffler_envelopes_rejected_total{reason=reason} in reg.
func rejectedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "blanket_shuffler_envelopes_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no rejected series of reason %q", reason)
	return 0
}

// TestShufflerOpenTakesAnyToken checks that a shuffler without
// Options.Admission takes envelopes with no token or with bytes that are
// not one (and records no spend): admission is the caller's choice.
func TestShufflerOpenTakesAnyToken(t *testing.T) {
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1"})
	envs := envelopes(todayKey, fakeSealed(3))
	envs[1].Token = []byte("not a token")
	envs[2].Token = envs[1].Token
	var res UploadResult
	if post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); res.Accepted != 3 {
		t.Fatalf("open shuffler: %+v; want all 3 accepted", res)
	}
}

// TestStoreReplicasSpendOnce races, over many rounds, uploads of
// envelopes carrying the same tokens to every replica at once (two
// shufflers on one PostgreSQL database; on SQLite two uploads to the one
// process): per token, one envelope with another report id on each
// replica, and the very same envelope on each (a retry to another
// replica before the first answered). Each token is taken once: of the
// envelopes with distinct ids exactly one is accepted and the others are
// refused as token_spent; of the copies of one envelope, one is accepted
// and the others are duplicates, never token_spent; no upload fails.
func TestStoreReplicasSpendOnce(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { spendOnce(t, kind, 8, 6) })
	}
}

// spendOnce runs TestStoreReplicasSpendOnce over rounds rounds of per
// tokens of each kind.
func spendOnce(t *testing.T, kind string, rounds, per int) {
	m := newMint(t)
	ss := openReplicas(t, kind, replicaCount(kind), 1_000_000, Options{Admission: m.verifier(t)})
	var urls []string
	for _, s := range ss {
		urls = append(urls, serveUploads(t, s))
	}
	if len(urls) == 1 {
		urls = append(urls, urls[0])
	}
	accepted := 0
	for r := range rounds {
		// Per replica, one upload: per token of the first kind an
		// envelope of its own (another id), per token of the second the
		// same envelope.
		sameEnv := make([]report.Envelope, per)
		for i := range sameEnv {
			sameEnv[i] = report.Envelope{ID: report.NewID(), Metric: todayKey, Suite: report.SuiteX25519ChaCha, Sealed: uniqueSealed(r, per+i), Token: m.token(t, todayKey)}
		}
		shared := make([][]byte, per)
		for i := range shared {
			shared[i] = m.token(t, todayKey)
		}
		bodies := make([][]report.Envelope, len(urls))
		for u := range urls {
			for i := range per {
				bodies[u] = append(bodies[u], report.Envelope{ID: report.NewID(), Metric: todayKey, Suite: report.SuiteX25519ChaCha, Sealed: uniqueSealed(r, 1000*(u+1)+i), Token: shared[i]})
			}
			bodies[u] = append(bodies[u], sameEnv...)
			if u%2 == 1 {
				// Opposite orders: the inserts of the two replicas meet
				// from both ends.
				for a, b := 0, len(bodies[u])-1; a < b; a, b = a+1, b-1 {
					bodies[u][a], bodies[u][b] = bodies[u][b], bodies[u][a]
				}
			}
		}
		start := make(chan struct{})
		res := make([]UploadResult, len(urls))
		errs := make([]error, len(urls))
		var wg sync.WaitGroup
		for u, url := range urls {
			wg.Go(func() {
				c := &http.Client{Transport: &http.Transport{}}
				<-start
				res[u], errs[u] = uploadEnvs(c, url, bodies[u])
			})
		}
		close(start)
		wg.Wait()
		var acc, dup, spent int
		for u := range urls {
			if errs[u] != nil {
				t.Fatalf("round %d, upload %d: %v", r, u, errs[u])
			}
			acc, dup = acc+res[u].Accepted, dup+res[u].Duplicates
			for _, e := range res[u].Errors {
				if e.Code != admission.UploadTokenSpent {
					t.Fatalf("round %d, upload %d: refusal %+v; want only token_spent", r, u, e)
				}
				if isSame(bodies[u][e.Index], sameEnv) {
					t.Fatalf("round %d, upload %d: a copy of one envelope refused as spent: %+v", r, u, e)
				}
				spent++
			}
		}
		n := len(urls)
		if acc != 2*per || dup != per*(n-1) || spent != per*(n-1) {
			t.Fatalf("round %d: accepted %d, duplicates %d, token_spent %d; want %d, %d, %d", r, acc, dup, spent, 2*per, per*(n-1), per*(n-1))
		}
		accepted += acc
	}
	st, err := ss[0].Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pools[todayKey] != int64(accepted) {
		t.Fatalf("pool holds %d reports, want the %d accepted", st.Pools[todayKey], accepted)
	}
}

// isSame reports whether env is one of envs (by report id).
func isSame(env report.Envelope, envs []report.Envelope) bool {
	for _, e := range envs {
		if e.ID == env.ID {
			return true
		}
	}
	return false
}

// spentItem is storeItem(i, p) carrying the spent key k.
func spentItem(i int, p report.Period, k byte) acceptItem {
	it := storeItem(i, p)
	it.spent = bytes.Repeat([]byte{k}, 32)
	return it
}

// TestStoreForgetsSpentWithPeriod checks, on both stores, that a spent
// token is kept until its period's deadline and forgotten with the
// period's ids then, the period recorded as closed: another report with
// the token is refused as spent before, and as late (its period closed)
// after, never accepted.
func TestStoreForgetsSpentWithPeriod(t *testing.T) {
	const grace = 3600
	ctx := context.Background()
	p, next := day(0), day(5)
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			now := p.End() // within p's grace
			var st store
			var forget func()
			if kind == "sqlite" {
				// A generation of one id: every accept rolls over and
				// deletes what is past its deadline.
				sq, err := openSQLiteStore(ctx, filepath.Join(t.TempDir(), DBFile), 1, grace, func() int64 { return now })
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sq.close() })
				st = sq
				other := 100
				forget = func() {
					other++
					if res, err := acceptOne(ctx, st, []acceptItem{storeItem(other, next)}); err != nil || res.accepted != 1 {
						t.Fatalf("accept of another period: %+v, %v", res, err)
					}
				}
			} else {
				st = openPGStores(t, 1)[0]
				forget = func() {
					if _, err := st.forget(ctx, now, grace); err != nil {
						t.Fatal(err)
					}
				}
			}
			if res, err := acceptOne(ctx, st, []acceptItem{spentItem(0, p, 7)}); err != nil || res.accepted != 1 {
				t.Fatalf("first spend: %+v, %v", res, err)
			}
			forget() // before the deadline: kept
			if res, err := acceptOne(ctx, st, []acceptItem{spentItem(1, p, 7)}); err != nil || res.accepted != 0 || len(res.spent) != 1 {
				t.Fatalf("second spend before the deadline: %+v, %v; want token_spent", res, err)
			}
			now = p.End() + grace
			forget()
			var n int
			switch s := st.(type) {
			case *sqliteStore:
				err := s.db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM spent WHERE period_end = ?`, p.End()).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
			case *pgStore:
				if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM spent WHERE period_end = $1`, p.End()).Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
			forgotten, err := st.forgotten(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 || forgotten[p.Length] < p.End() {
				t.Fatalf("past the deadline: %d spent keys of the period left, forgotten %v; want none, and the period closed", n, forgotten)
			}
			if res, err := acceptOne(ctx, st, []acceptItem{spentItem(2, p, 7)}); err != nil || res.accepted != 0 || len(res.late) != 1 {
				t.Fatalf("a spend after the deadline: %+v, %v; want refused as late", res, err)
			}
		})
	}
}

// TestPGSpentForgetRacesAccept makes the race of store_postgres.go's
// argument deterministic: a replica forgets a period's spent tokens (the
// deletion uncommitted) while another accepts a new report with one of
// them. The accept's insert of the token's key waits for the deletion;
// once it commits, the insert stores the key, and only the check of the
// closed periods after the inserts stops the report: it must be refused
// as late, never pooled as a second spend of the token.
func TestPGSpentForgetRacesAccept(t *testing.T) {
	const grace = 3600
	ctx := context.Background()
	sts := openPGStores(t, 2)
	a, b := sts[0], sts[1]
	p := day(0)
	if res, err := acceptOne(ctx, b, []acceptItem{spentItem(0, p, 9)}); err != nil || res.accepted != 1 {
		t.Fatalf("first spend: %+v, %v", res, err)
	}
	// Replica a's forget, by hand, held open: the statement of
	// pgStore.forget in a transaction not yet committed.
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `WITH spent_gone AS (DELETE FROM spent WHERE period_end <= $1 RETURNING period_len, period_end)
		INSERT INTO forgotten (period_len, period_end) SELECT period_len, max(period_end) FROM spent_gone GROUP BY period_len
		ON CONFLICT (period_len) DO UPDATE SET period_end = greatest(forgotten.period_end, excluded.period_end)`, p.End()+grace); err != nil {
		t.Fatal(err)
	}
	done := make(chan acceptRes, 1)
	errc := make(chan error, 1)
	go func() {
		res, err := acceptOne(ctx, b, []acceptItem{spentItem(1, p, 9)})
		done <- res
		errc <- err
	}()
	waitLockWaiter(t, a)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := <-done, <-errc
	if err != nil || res.accepted != 0 || len(res.late) != 1 {
		t.Fatalf("a spend racing the forgetting of its token: %+v, %v; want refused as late", res, err)
	}
	var pooled int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pool`).Scan(&pooled); err != nil || pooled != 1 {
		t.Fatalf("pool holds %d reports (%v), want the first spend's only", pooled, err)
	}
}

// TestPlanRelaySaysAdmission checks that the plan relay answers with the
// Blanket-Admission header it is given (what an app without a credential
// reads to name what its uploads lack), and with none when not given.
func TestPlanRelaySaysAdmission(t *testing.T) {
	collector := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	for _, mode := range []string{admission.AdmissionTokens, admission.AdmissionOpen, ""} {
		mux := http.NewServeMux()
		(&PlanRelay{Collector: collector.URL, Admission: mode}).Register(mux)
		srv := newServer(t, mux)
		resp, err := http.Get(srv.URL + "/v1/plan")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, ok := resp.Header[admission.AdmissionHeader]; resp.StatusCode != http.StatusOK || mode != "" && (len(got) != 1 || got[0] != mode) || mode == "" && ok {
			t.Errorf("relay of admission %q: %s, header %q", mode, resp.Status, got)
		}
	}
}
