package collector

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// swappingShuffler is a shuffler that relays the collector's plan with a
// real PlanRelay, then swaps the collector's report key in it for its own
// (issue 25, attack (c)), and forwards uploads to the real shuffler.
type swappingShuffler struct {
	relay    *shuffler.PlanRelay
	shuffler string // the real shuffler's POST /v1/reports
	// swap is how the relayed plan is changed: "" relays it unchanged.
	swap string
	// uploads counts POST /v1/reports.
	uploads atomic.Int64
	// attackerKey is the HPKE key swapped in; signer the Ed25519 key a
	// "resign" swap signs with.
	attackerKey []byte
	signer      ed25519.PrivateKey
}

func (s *swappingShuffler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/reports" {
		s.uploads.Add(1)
		resp, err := http.Post(s.shuffler, r.Header.Get("Content-Type"), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	rec := httptest.NewRecorder()
	s.relay.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	h := rec.Header()
	if s.swap != "" {
		var p plan.Plan
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		p.CollectorKeys = []plan.CollectorKey{plan.NewCollectorKey(s.attackerKey, 0)}
		b, err := p.JSON()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body = b
		switch s.swap {
		case "strip":
			h.Del(plan.SignatureHeader)
			h.Del(plan.SigningKeyHeader)
		case "resign":
			sig, _ := plan.SignPlan(s.signer, body, nil).Headers()
			h.Set(plan.SignatureHeader, sig)
			h.Set(plan.SigningKeyHeader, plan.FormatSigningKey(s.signer.Public().(ed25519.PublicKey)))
		}
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// TestAppRefusesAPlanWhoseKeyARelaySwapped runs a collector, a real
// shuffler, and in front of them, where the apps connect, a shuffler that
// relays the collector's signed plan with PlanRelay but swaps the
// collector's report key for its own: keeping the collector's signature,
// dropping it, or signing with a key of its own. An app pinned to the
// collector's plan-signing key refuses the plan each time, with an error
// that says so, and records and uploads nothing. The same relay without
// the swap delivers the app's reports: the test can fail.
func TestAppRefusesAPlanWhoseKeyARelaySwapped(t *testing.T) {
	cf := newCollectorFixture(t, testPlan(t, 10))
	sf := newShufflerFixture(t, shuffler.Options{Plan: cf.c.Plan(), Collector: cf.srv.URL})
	_, attackerKey, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, signer, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pin := plan.FormatSigningKey(cf.c.PlanSigningKey())
	for _, c := range []struct {
		swap string
		want error // nil: the plan is taken and the reports go out
		says string
	}{
		{"keep", plan.ErrBadSignature, "does not verify under the pinned key"},
		{"strip", plan.ErrUnsigned, "sent no Blanket-Plan-Signature header"},
		{"resign", plan.ErrBadSignature, "does not verify under the pinned key"},
		{"", nil, ""},
	} {
		t.Run("swap="+c.swap, func(t *testing.T) {
			mitm := &swappingShuffler{relay: &shuffler.PlanRelay{Collector: cf.srv.URL}, shuffler: sf.url, swap: c.swap, attackerKey: attackerKey, signer: signer}
			srv := newServer(t, mitm)
			var clock atomic.Int64 // Unix nanoseconds: the uploader reads it too
			clock.Store(time.Now().Add(-24 * time.Hour).UnixNano())
			ctx := context.Background()
			p, err := client.NewProvider(ctx, client.Config{
				Mode:        client.ModeOn,
				Endpoint:    srv.URL,
				PlanKey:     pin,
				DataDir:     t.TempDir(),
				MaxEps0:     1000,
				UploadDelay: time.Millisecond,
				Now:         func() time.Time { return time.Unix(0, clock.Load()) },
			})
			if c.want != nil {
				if p != nil || !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("NewProvider = %v, %v; want ErrPlanRefused and %v saying %q", p, err, c.want, c.says)
				}
			} else if err != nil {
				t.Fatalf("NewProvider through an honest relay: %v", err)
			}
			defer p.Shutdown(ctx)
			if err := p.Meter("").Categorical(metric).Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			clock.Add(int64(24 * time.Hour)) // the period ended: Flush seals and uploads it
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := p.Flush(fctx); err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			if c.want != nil {
				if st.Recorded != 0 || mitm.uploads.Load() != 0 {
					t.Fatalf("under a refused plan: %d recorded, %d uploads", st.Recorded, mitm.uploads.Load())
				}
				return
			}
			if st.Recorded != 1 || st.Accepted != 1 || p.Plan().CollectorKeys[0].ID != cf.c.Plan().CollectorKeys[0].ID {
				t.Fatalf("through an honest relay: %+v, collector keys %+v", st, p.Plan().CollectorKeys)
			}
		})
	}
}

// fetchSignedPlan returns the body of GET /v1/plan and its signature.
func fetchSignedPlan(t *testing.T, url string) ([]byte, plan.Signature) {
	t.Helper()
	resp, err := http.Get(url + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/plan: %s, %v", resp.Status, err)
	}
	s, err := plan.ParseSignature(resp.Header.Get(plan.SignatureHeader), resp.Header.Get(plan.EndorsementsHeader))
	if err != nil {
		t.Fatalf("GET /v1/plan: %v", err)
	}
	return body, s
}

// TestPlanSigningKeyIsKeptAndRotated, on either store: the key
// PlanSigningKey makes before the first start is the one the collector
// signs its plan with, and keeps across restarts; after
// RotatePlanSigningKey the collector, restarted, signs with the new key
// and serves the rollover chain, which an app pinned to the first key
// follows through two rotations.
func TestPlanSigningKeyIsKeptAndRotated(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := servertest.StoreOf(t, kind, dir)
			k0, err := PlanSigningKey(ctx, dir, store)
			if err != nil {
				t.Fatal(err)
			}
			p := testPlan(t, 10)
			serve := func() (*Collector, string) {
				c, err := OpenCollector(ctx, CollectorOptions{Plan: p, Dir: dir, Store: store, Open: openBuiltin, Token: testToken, Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				mux := http.NewServeMux()
				c.Register(mux)
				return c, newServer(t, mux).URL
			}
			c, url := serve()
			if !c.PlanSigningKey().Equal(k0) {
				t.Fatal("the collector signs with another key than PlanSigningKey returned")
			}
			body, sig := fetchSignedPlan(t, url)
			if got, err := plan.VerifyPlan(k0, body, sig, time.Now()); err != nil || !got.Equal(k0) {
				t.Fatalf("VerifyPlan = %v, %v", got, err)
			}
			c.Close()
			past := time.Now().Add(-time.Minute)
			if _, _, err := RotatePlanSigningKey(ctx, dir, store, past); err != nil {
				t.Fatal(err)
			}
			old, k2, err := RotatePlanSigningKey(ctx, dir, store, past)
			if err != nil || old.Equal(k0) || k2.Equal(old) {
				t.Fatalf("second rotation: %v -> %v, %v", old, k2, err)
			}
			c, url = serve()
			if !c.PlanSigningKey().Equal(k2) {
				t.Fatal("the restarted collector does not sign with the rotated key")
			}
			body, sig = fetchSignedPlan(t, url)
			if len(sig.Endorsements) != 2 {
				t.Fatalf("%d endorsements served, want 2", len(sig.Endorsements))
			}
			for _, pin := range []ed25519.PublicKey{k0, old, k2} {
				if got, err := plan.VerifyPlan(pin, body, sig, time.Now()); err != nil || !got.Equal(k2) {
					t.Fatalf("pinned %s: VerifyPlan = %v, %v; want the new key", plan.FormatSigningKey(pin), got, err)
				}
			}
			if kind == "sqlite" {
				fi, err := os.Stat(filepath.Join(dir, PlanKeyFile))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("%s: %v, %v; want mode 0600", PlanKeyFile, fi, err)
				}
			}
		})
	}
}

// TestPlanRelayKeepsTheSignature: the plan a PlanRelay serves has the
// collector's bytes and signature headers, byte for byte, so that it
// verifies under the collector's key, also from the relay's cache.
func TestPlanRelayKeepsTheSignature(t *testing.T) {
	cf := newCollectorFixture(t, testPlan(t, 10))
	mux := http.NewServeMux()
	(&shuffler.PlanRelay{Collector: cf.srv.URL}).Register(mux)
	relay := newServer(t, mux)
	direct, dsig := fetchSignedPlan(t, cf.srv.URL)
	for range 2 { // the first fetches, the second is served from the cache
		body, sig := fetchSignedPlan(t, relay.URL)
		ds, de := dsig.Headers()
		rs, re := sig.Headers()
		if string(body) != string(direct) || rs != ds || re != de {
			t.Fatal("the relay changed the plan's bytes or its signature")
		}
		if _, err := plan.VerifyPlan(cf.c.PlanSigningKey(), body, sig, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}
