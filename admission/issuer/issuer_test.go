package issuer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
)

// refusalCodes returns the refusal code of each item of err (a
// *admission.RefusedError), "" for a granted one, n items in all.
func refusalCodes(t *testing.T, err error, n int) []string {
	t.Helper()
	codes := make([]string, n)
	if err == nil {
		return codes
	}
	var re *admission.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("Finalize: %v", err)
	}
	for _, r := range re.Refusals {
		codes[r.Index] = r.Code
	}
	return codes
}

// TestIssuedTokensVerifyForTheirPoolKeyOnly: blind → issue → finalize →
// verify; a token verifies for its own pool key, not for another pool's
// or another period's.
func TestIssuedTokensVerifyForTheirPoolKeyOnly(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, kind, 1, Options{})
			pools := []string{poolKey("a", 100), poolKey("b", 100), poolKey("a", 101)}
			_, tokens, err := fetch(t, f.issuers[0], instance("i1"), pools...)
			if err != nil {
				t.Fatal(err)
			}
			for i, tok := range tokens {
				for j, pool := range pools {
					err := f.verifier.Verify(pool, tok)
					if i == j && err != nil {
						t.Errorf("token of %s: Verify: %v", pool, err)
					}
					if i != j && !errors.Is(err, ErrForged) {
						t.Errorf("token of %s verified for %s: %v, want ErrForged", pools[i], pool, err)
					}
				}
			}
		})
	}
}

// TestVerifyRefusesForgedTokens: a changed output or input, a random
// token, the zero token and a malformed pool key are refused, each with
// its error.
func TestVerifyRefusesForgedTokens(t *testing.T) {
	f := newFixture(t, "sqlite", 1, Options{})
	pool := poolKey("a", 100)
	_, tokens, err := fetch(t, f.issuers[0], instance("i1"), pool)
	if err != nil {
		t.Fatal(err)
	}
	good := tokens[0]
	flipOut, flipIn := good, good
	flipOut.Output[63] ^= 1
	flipIn.Input[0] ^= 1
	var random admission.Token
	copy(random.Input[:], "random input")
	copy(random.Output[:], "random output")
	for _, c := range []struct {
		name string
		pool string
		tok  admission.Token
		want error
	}{
		{"output changed", pool, flipOut, ErrForged},
		{"input changed", pool, flipIn, ErrForged},
		{"random", pool, random, ErrForged},
		{"zero", pool, admission.Token{}, ErrNoToken},
		{"no period", "a", good, admission.ErrMalformed},
	} {
		if err := f.verifier.Verify(c.pool, c.tok); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestRetryGetsTheSameEvaluation: the same request again (an app that
// crashed after the issuer committed) gets the same evaluations, and so
// the same tokens; a different blinded element for a granted pool key
// is refused, while another instance is granted it.
func TestRetryGetsTheSameEvaluation(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, kind, replicaCount(kind), Options{})
			ctx := context.Background()
			pools := []string{poolKey("a", 100), poolKey("b", 100)}
			p, req, err := admission.Blind(pools)
			if err != nil {
				t.Fatal(err)
			}
			first, err := f.issuers[0].Issue(ctx, instance("i1"), req)
			if err != nil {
				t.Fatal(err)
			}
			// The retry goes to the last replica, from the persisted state.
			enc, _ := p.MarshalBinary()
			q, err := admission.ParsePending(enc)
			if err != nil {
				t.Fatal(err)
			}
			again, err := f.issuers[len(f.issuers)-1].Issue(ctx, instance("i1"), q.Request())
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("retry answered %v, first %v", again, first)
			}
			tokens, err := admission.Finalize(q, again)
			if err != nil {
				t.Fatal(err)
			}
			for i, tok := range tokens {
				if err := f.verifier.Verify(pools[i], tok); err != nil {
					t.Errorf("retried token of %s: %v", pools[i], err)
				}
			}

			_, _, err = fetch(t, f.issuers[0], instance("i1"), pools[0], poolKey("c", 100))
			if codes := refusalCodes(t, err, 2); !slices.Equal(codes, []string{admission.RefusedAlreadyGranted, ""}) {
				t.Errorf("a new element for a granted pool key: refusals %q, want already granted, then granted", codes)
			}
			if _, _, err := fetch(t, f.issuers[0], instance("i2"), pools...); err != nil {
				t.Errorf("another instance: %v", err)
			}
		})
	}
}

// TestIssueGrantsOnlyOpenPeriods: the current period, one ended within
// the grace and the next Prefetch are granted; one past its grace, one
// further ahead, a pool Allow refuses, a malformed item and a pool key
// asked twice are refused with their codes.
func TestIssueGrantsOnlyOpenPeriods(t *testing.T) {
	allow := func(pool, epoch string, _ report.Period) bool { return pool != "banned" }
	f := newFixture(t, "sqlite", 1, Options{Grace: 2 * day * time.Second, Prefetch: 2, Allow: allow})
	identity := make([]byte, admission.ElementSize) // the identity element's encoding
	cases := []struct {
		pool    string
		blinded []byte // nil: a fresh blinded element
		want    string
	}{
		{poolKey("a", 100), nil, ""},                      // current
		{poolKey("a", 98), nil, ""},                       // ended at day 99, grace until 101
		{poolKey("a", 97), nil, admission.RefusedPeriod},  // grace ended at day 100 start
		{poolKey("a", 102), nil, ""},                      // 2 ahead
		{poolKey("a", 103), nil, admission.RefusedPeriod}, // 3 ahead
		{poolKey("banned", 100), nil, admission.RefusedPool},
		{"no period", nil, admission.RefusedMalformed},
		{poolKey("a", 100), nil, admission.RefusedDuplicate},
		{poolKey("b", 100), identity, admission.RefusedMalformed},
		{poolKey("c", 100), []byte{1, 2, 3}, admission.RefusedMalformed},
	}
	// Blind what Blind takes, then assemble the request by hand.
	var valid []string
	for _, c := range cases {
		if _, err := admission.CheckPoolKey(c.pool); err == nil && !slices.Contains(valid, c.pool) {
			valid = append(valid, c.pool)
		}
	}
	_, blinded, err := admission.Blind(valid)
	if err != nil {
		t.Fatal(err)
	}
	req := &admission.TokenRequest{}
	for _, c := range cases {
		item := admission.BlindedItem{Pool: c.pool, Blinded: c.blinded}
		if item.Blinded == nil {
			item.Blinded = blinded.Requests[0].Blinded
			for _, b := range blinded.Requests {
				if b.Pool == c.pool {
					item.Blinded = b.Blinded
				}
			}
		}
		req.Requests = append(req.Requests, item)
	}
	resp, err := f.issuers[0].Issue(context.Background(), instance("i1"), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		ev := resp.Evaluations[i]
		if ev.Pool != c.pool || ev.Refused != c.want || (c.want == "") != (len(ev.Evaluated) == admission.ElementSize) {
			t.Errorf("item %d (%s): %+v, want refusal %q", i, c.pool, ev, c.want)
		}
	}
	if _, err := f.issuers[0].Issue(context.Background(), instance("i1"), &admission.TokenRequest{}); !errors.Is(err, admission.ErrCount) {
		t.Errorf("an empty request: %v, want ErrCount", err)
	}
}

// TestForgottenPeriodIsNeverGrantedAgain: Forget deletes the grants past
// their deadline, and a later request for their period is refused even
// by an issuer whose clock or grace would still take it.
func TestForgottenPeriodIsNeverGrantedAgain(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, kind, 1, Options{Grace: day * time.Second})
			ctx := context.Background()
			old, open := poolKey("a", 99), poolKey("a", 100)
			if _, _, err := fetch(t, f.issuers[0], instance("i1"), old, open); err != nil {
				t.Fatal(err)
			}
			if n, err := f.issuers[0].Forget(ctx); err != nil || n != 0 {
				t.Fatalf("Forget before any deadline: %d, %v", n, err)
			}
			f.clock.Set(time.Unix(101*day, 0)) // day 99's deadline: its end (100) + 1 day
			if n, err := f.issuers[0].Forget(ctx); err != nil || n != 1 {
				t.Fatalf("Forget at day 99's deadline: %d, %v; want 1", n, err)
			}
			f.clock.Set(testNow) // a replica whose clock lags
			_, _, err := fetch(t, f.issuers[0], instance("i1"), old, open)
			if codes := refusalCodes(t, err, 2); !slices.Equal(codes, []string{admission.RefusedPeriod, admission.RefusedAlreadyGranted}) {
				t.Errorf("after Forget: refusals %q, want period closed, then already granted", codes)
			}
			_, _, err = fetch(t, f.issuers[0], instance("i2"), poolKey("b", 99))
			if codes := refusalCodes(t, err, 1); codes[0] != admission.RefusedPeriod {
				t.Errorf("another pool of the forgotten period: refusal %q, want period closed", codes[0])
			}
		})
	}
}
