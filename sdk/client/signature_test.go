package client_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

func otherSigner(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

// TestProviderRefusesAPlanNotSignedByThePinnedKey serves the plan
// unsigned, signed by another key, and with a signature of other bytes:
// NewProvider refuses each with an error that says what is wrong, and
// nothing is recorded or sent.
func TestProviderRefusesAPlanNotSignedByThePinnedKey(t *testing.T) {
	cases := []struct {
		name string
		sig  func(body []byte) string
		want error
		says string
	}{
		{"unsigned", func([]byte) string { return "" }, plan.ErrUnsigned, "no Blanket-Plan-Signature header"},
		{"another key", func(b []byte) string { s, _ := plan.SignPlan(otherSigner(t), b, nil).Headers(); return s }, plan.ErrBadSignature, "does not verify under the pinned key"},
		{"other bytes", func(b []byte) string {
			s, _ := plan.SignPlan(testPlanSigner, append([]byte(" "), b...), nil).Headers()
			return s
		}, plan.ErrBadSignature, "does not verify under the pinned key"},
		{"garbage", func([]byte) string { return "not base64" }, plan.ErrBadSignature, "Blanket-Plan-Signature must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			f.setSignature(c.sig(f.planBytes()), "")
			p, err := client.NewProvider(context.Background(), fastConfig(f, t.TempDir()))
			if !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("NewProvider: %v; want ErrPlanRefused and %v, saying %q", err, c.want, c.says)
			}
			if p != nil || p.Plan() != nil {
				t.Fatal("a Provider was returned for a refused plan")
			}
			if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
				t.Fatalf("Record on the nil Provider: %v", err)
			}
			if _, posts := f.requests(); posts != 0 {
				t.Fatalf("%d uploads under a refused plan", posts)
			}
		})
	}
}

// TestProviderPlanKeyConfig: without PlanKey a Provider that fetches its
// plan does not start, naming the field; a PlanKey that does not decode
// is refused; InsecureSkipPlanSignature takes an unsigned plan; a shipped
// Config.Plan needs no key.
func TestProviderPlanKeyConfig(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg := fastConfig(f, t.TempDir())
	cfg.PlanKey = ""
	if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrBadConfig) || !strings.Contains(err.Error(), "PlanKey is required") {
		t.Fatalf("no PlanKey: %v; want ErrBadConfig naming PlanKey", err)
	}
	cfg.PlanKey = "AAAA"
	if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrBadConfig) || !errors.Is(err, plan.ErrBadSigningKey) {
		t.Fatalf("PlanKey AAAA: %v; want ErrBadConfig and plan.ErrBadSigningKey", err)
	}
	// The private key's line of the collector's key file.
	cfg.PlanKey = plan.SigningSeedPrefix + base64.StdEncoding.EncodeToString(testPlanSigner.Seed())
	if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrBadConfig) || !errors.Is(err, plan.ErrBadSigningKey) || !strings.Contains(err.Error(), "PRIVATE") {
		t.Fatalf("PlanKey the private seed: %v; want ErrBadConfig and plan.ErrBadSigningKey saying it is the PRIVATE key", err)
	}
	f.setSignature("", "")
	cfg.PlanKey, cfg.InsecureSkipPlanSignature = "", true
	p := newProvider(t, cfg)
	if p.Plan() == nil {
		t.Fatal("InsecureSkipPlanSignature: no plan")
	}
	shipped := fastConfig(f, t.TempDir())
	shipped.PlanKey, shipped.Plan = "", p.Plan()
	if newProvider(t, shipped).Plan() == nil {
		t.Fatal("Config.Plan without PlanKey: no plan")
	}
}

// TestProviderFollowsAPlanKeyRollover: a plan signed by a key the pinned
// one endorsed is taken; one whose endorsement another key signed is not.
func TestProviderFollowsAPlanKeyRollover(t *testing.T) {
	next := otherSigner(t)
	nextPub := next.Public().(ed25519.PublicKey)
	for _, c := range []struct {
		name     string
		endorser ed25519.PrivateKey
		ok       bool
	}{
		{"endorsed by the pinned key", testPlanSigner, true},
		{"endorsed by another key", otherSigner(t), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			// The test clock stands at t0; the endorsement is valid from
			// a day before.
			e := plan.Endorse(c.endorser, nextPub, t0.Add(-24*time.Hour))
			f.setSignature(plan.SignPlan(next, f.planBytes(), []plan.Endorsement{e}).Headers())
			p, err := client.NewProvider(context.Background(), fastConfig(f, t.TempDir()))
			if c.ok {
				if err != nil {
					t.Fatalf("NewProvider: %v", err)
				}
				p.Shutdown(context.Background())
				return
			}
			if !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, plan.ErrBadSignature) {
				t.Fatalf("NewProvider: %v; want ErrPlanRefused and ErrBadSignature", err)
			}
		})
	}
}

// TestRefreshRefusesASwappedPlan: a running Provider asked to take a plan
// whose collector key was swapped (re-signed by another key) refuses it and
// keeps reporting by the plan it has, sealed to the collector's key.
func TestRefreshRefusesASwappedPlan(t *testing.T) {
	f := newFakeServer(t, nil)
	p := newProvider(t, fastConfig(f, t.TempDir()))
	want := p.Plan().CollectorKeys[0].ID
	_, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	f.setPlan(testPlan(pub)) // signed by testPlanSigner: now re-sign it
	f.setSignature(plan.SignPlan(otherSigner(t), f.planBytes(), nil).Headers())
	changed, err := p.RefreshPlan(context.Background())
	if changed || !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, plan.ErrBadSignature) {
		t.Fatalf("RefreshPlan = %v, %v; want the swapped plan refused", changed, err)
	}
	if got := p.Plan().CollectorKeys[0].ID; got != want {
		t.Fatalf("collector key %s after a refused refresh, want %s", got, want)
	}
}

// TestUnusableCachedPlanCountsAsNone: a plan cache file that does not
// decode, or whose plan does not authenticate under the pinned key (its
// signature made by another key, its collector key swapped under the
// collector's signature, signed bytes that are no plan), is ignored with
// a warning naming the file and what is wrong, as if no plan were cached,
// and is never reported by. In ModeLocal the Provider starts and records
// nothing; in ModeOn it reports by the plan the collector serves, which
// replaces the cache; with the collector down NewProvider fails with
// ErrPlanUnavailable, as with no cache.
func TestUnusableCachedPlanCountsAsNone(t *testing.T) {
	const ignored = "blanket cached plan ignored: it does not decode or authenticate"
	ctx := context.Background()
	f := newFakeServer(t, nil)
	served := f.planBytes()
	sig, _ := plan.SignPlan(testPlanSigner, served, nil).Headers()
	otherSig, _ := plan.SignPlan(otherSigner(t), served, nil).Headers()
	_, attackerKey, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	swapped, err := json.Marshal(testPlan(attackerKey))
	if err != nil {
		t.Fatal(err)
	}
	noPlan := []byte(`"no plan"`)
	noPlanSig, _ := plan.SignPlan(testPlanSigner, noPlan, nil).Headers()
	cases := []cacheCase{
		{"not JSON", "{not json", "does not decode"},
		{"signed by another key", string(client.CachedPlanFile(served, otherSig)), "does not verify under the pinned key"},
		{"collector key swapped", string(client.CachedPlanFile(swapped, sig)), "does not verify under the pinned key"},
		{"signed bytes that are no plan", string(client.CachedPlanFile(noPlan, noPlanSig)), plan.ErrInvalid.Error()},
	}
	// start writes the case's cache file for the collector at base in
	// dir and runs NewProvider in mode; warned then checks the warning.
	start := func(t *testing.T, dir string, c cacheCase, mode client.Mode, base string) (p *client.Provider, warned func(), err error) {
		t.Helper()
		path := filepath.Join(dir, client.PlanCacheFile(base))
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		logs := new(logCapture)
		cfg := fastConfig(f, dir)
		cfg.Mode, cfg.Endpoint, cfg.Logger = mode, base, logs.logger()
		p, err = client.NewProvider(ctx, cfg)
		if p != nil {
			t.Cleanup(func() { p.Shutdown(ctx) })
		}
		return p, func() {
			t.Helper()
			rs := logs.records(t, ignored)
			if len(rs) != 1 || rs[0]["level"] != "WARN" || rs[0]["file"] != path || !strings.Contains(fmt.Sprint(rs[0]["error"]), c.says) {
				t.Fatalf("logged %v; want one warning naming %s and saying %q", rs, path, c.says)
			}
		}, err
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Run("local", func(t *testing.T) {
				p, warned, err := start(t, t.TempDir(), c, client.ModeLocal, f.URL)
				if err != nil {
					t.Fatalf("NewProvider: %v; want a Provider without a plan", err)
				}
				if p.Plan() != nil || p.Meter("app").Categorical("screen").Enabled(ctx) {
					t.Fatal("ModeLocal reports by an unusable cached plan")
				}
				warned()
			})
			t.Run("on", func(t *testing.T) {
				dir := t.TempDir()
				p, warned, err := start(t, dir, c, client.ModeOn, f.URL)
				if err != nil {
					t.Fatalf("NewProvider: %v; want the collector's plan", err)
				}
				if p.Plan().Digest() != f.pl.Digest() {
					t.Fatal("ModeOn reports by another plan than the collector's")
				}
				cached, err := os.ReadFile(filepath.Join(dir, client.PlanCacheFile(f.URL)))
				if err != nil || string(cached) != string(client.CachedPlanFile(served, sig)) {
					t.Fatalf("cache file %s, %v; want the plan fetched, replacing the unusable one", cached, err)
				}
				warned()
			})
			t.Run("collector down", func(t *testing.T) {
				p, warned, err := start(t, t.TempDir(), c, client.ModeOn, refusingServer(t))
				if p != nil || !errors.Is(err, client.ErrPlanUnavailable) {
					t.Fatalf("NewProvider: %v; want ErrPlanUnavailable, as with no cached plan", err)
				}
				warned()
			})
		})
	}
}

// cacheCase is a plan cache file and what the warning that ignores it
// says.
type cacheCase struct{ name, file, says string }
