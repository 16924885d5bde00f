package collector

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestConcurrentPlanKeyRotationsChain runs rotations of the plan-signing
// key file and loads of it (a collector starting, plan-key) at once,
// released together: every rotation lands in the chain, right after the
// key it says it replaced, every load returns a key of the chain, and a
// plan signed with the final key verifies from every key of the chain,
// the first included.
func TestConcurrentPlanKeyRotationsChain(t *testing.T) {
	const rotations, loads = 8, 8
	ctx := context.Background()
	dir := t.TempDir()
	k0, err := PlanSigningKey(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	var (
		olds, nexts = make([]ed25519.PublicKey, rotations), make([]ed25519.PublicKey, rotations)
		loaded      = make([]ed25519.PublicKey, loads)
		errs        = make([]error, rotations+loads)
		start       = make(chan struct{})
		wg          sync.WaitGroup
	)
	for i := range rotations {
		wg.Go(func() {
			<-start
			olds[i], nexts[i], errs[i] = RotatePlanSigningKey(ctx, dir, "", past)
		})
	}
	for i := range loads {
		wg.Go(func() {
			<-start
			loaded[i], errs[rotations+i] = PlanSigningKey(ctx, dir, "")
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s, _, err := loadOrCreatePlanSigner(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.chain) != rotations {
		t.Fatalf("the chain holds %d endorsements after %d rotations: a rotation was lost", len(s.chain), rotations)
	}
	keys := []ed25519.PublicKey{k0}
	for _, e := range s.chain {
		keys = append(keys, e.Key)
	}
	at := map[string]int{}
	for i, k := range keys {
		at[string(k)] = i
	}
	for i := range rotations {
		j, ok := at[string(nexts[i])]
		if !ok || j == 0 || !keys[j-1].Equal(olds[i]) {
			t.Fatalf("rotation %d replaced %s by %s, which the chain does not hold after it", i, plan.FormatSigningKey(olds[i]), plan.FormatSigningKey(nexts[i]))
		}
	}
	for i, k := range loaded {
		if _, ok := at[string(k)]; !ok {
			t.Fatalf("load %d returned %s, not a key of the chain", i, plan.FormatSigningKey(k))
		}
	}
	body := []byte(`{"version":1}`)
	sig := plan.SignPlan(s.key, body, s.chain)
	for i, pin := range keys {
		if got, err := plan.VerifyPlan(pin, body, sig, time.Now()); err != nil || !got.Equal(s.public()) {
			t.Fatalf("pinned to key %d of the chain: VerifyPlan = %v, %v; want the final key", i, got, err)
		}
	}
}

// TestPlanKeyOfAPreReleaseFormatIsRewritten, on either store: a key
// stored by a pre-release build, its seed without plan.SigningSeedPrefix,
// is the key PlanSigningKey returns, and is rewritten with the prefix,
// its chain unchanged.
func TestPlanKeyOfAPreReleaseFormatIsRewritten(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := servertest.StoreOf(t, kind, dir)
			first, err := newPlanSigner()
			if err != nil {
				t.Fatal(err)
			}
			s, err := first.rotate(time.Now().Add(-time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			text := s.encode()
			old := strings.TrimPrefix(text, plan.SigningSeedPrefix)
			// stored reads the stored text; set replaces it.
			var (
				stored func() string
				set    func(string)
			)
			if kind == "sqlite" {
				path := filepath.Join(dir, PlanKeyFile)
				set = func(v string) {
					if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				stored = func() string {
					b, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					return strings.TrimSpace(string(b))
				}
			} else {
				st, err := openPGStore(ctx, store)
				if err != nil {
					t.Fatal(err)
				}
				defer st.close()
				set = func(v string) {
					if _, err := st.pool.Exec(ctx, `INSERT INTO plan_signing_key (id, signer) VALUES (1, $1)`, v); err != nil {
						t.Fatal(err)
					}
				}
				stored = func() string {
					var v string
					if err := st.pool.QueryRow(ctx, `SELECT signer FROM plan_signing_key WHERE id = 1`).Scan(&v); err != nil {
						t.Fatal(err)
					}
					return v
				}
			}
			set(old)
			k, err := PlanSigningKey(ctx, dir, store)
			if err != nil || !k.Equal(s.public()) {
				t.Fatalf("PlanSigningKey = %v, %v; want the stored key", k, err)
			}
			if got := stored(); !strings.HasPrefix(got, plan.SigningSeedPrefix) || got != text {
				t.Fatalf("stored after the first read:\n%s\nwant\n%s", got, text)
			}
		})
	}
}
