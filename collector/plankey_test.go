package collector

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"
	"time"

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
