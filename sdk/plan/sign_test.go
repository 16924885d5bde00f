package plan_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
)

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// roundTrip encodes s as its headers and decodes them, as a relay and an
// app do.
func roundTrip(t *testing.T, s plan.Signature) plan.Signature {
	t.Helper()
	sig, end := s.Headers()
	got, err := plan.ParseSignature(sig, end)
	if err != nil {
		t.Fatalf("ParseSignature(%q, %q): %v", sig, end, err)
	}
	return got
}

var (
	body = []byte(`{"version":1,"collector_key":"AAAA"}`)
	now  = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
)

func TestSignedPlanVerifiesUnderThePinnedKey(t *testing.T) {
	pub, priv := newKey(t)
	s := roundTrip(t, plan.SignPlan(priv, body, nil))
	k, err := plan.VerifyPlan(pub, body, s, now)
	if err != nil || !k.Equal(pub) {
		t.Fatalf("VerifyPlan = %v, %v; want the pinned key", k, err)
	}
	parsed, err := plan.ParseSigningKey(plan.FormatSigningKey(pub))
	if err != nil || !parsed.Equal(pub) {
		t.Fatalf("ParseSigningKey(FormatSigningKey) = %v, %v", parsed, err)
	}
}

func TestSignedPlanRefusesAnyChangedByte(t *testing.T) {
	pub, priv := newKey(t)
	s := plan.SignPlan(priv, body, nil)
	for i := range body {
		b := bytes.Clone(body)
		b[i] ^= 1
		if _, err := plan.VerifyPlan(pub, b, s, now); !errors.Is(err, plan.ErrBadSignature) {
			t.Fatalf("plan byte %d flipped: err = %v, want ErrBadSignature", i, err)
		}
	}
	for i := range s.Sig {
		bad := plan.Signature{Sig: bytes.Clone(s.Sig)}
		bad.Sig[i] ^= 0x80
		if _, err := plan.VerifyPlan(pub, body, bad, now); !errors.Is(err, plan.ErrBadSignature) {
			t.Fatalf("signature byte %d flipped: err = %v, want ErrBadSignature", i, err)
		}
	}
	if _, err := plan.VerifyPlan(pub, append(bytes.Clone(body), ' '), s, now); !errors.Is(err, plan.ErrBadSignature) {
		t.Fatalf("a byte appended: err = %v, want ErrBadSignature", err)
	}
}

func TestSignedPlanRefusesAnotherKeyAndNoSignature(t *testing.T) {
	pub, _ := newKey(t)
	_, other := newKey(t)
	if _, err := plan.VerifyPlan(pub, body, plan.SignPlan(other, body, nil), now); !errors.Is(err, plan.ErrBadSignature) {
		t.Fatalf("signed by another key: err = %v, want ErrBadSignature", err)
	}
	if _, err := plan.ParseSignature("", ""); !errors.Is(err, plan.ErrUnsigned) {
		t.Fatalf("no signature header: err = %v, want ErrUnsigned", err)
	}
	if _, err := plan.VerifyPlan(pub, body, plan.Signature{}, now); !errors.Is(err, plan.ErrUnsigned) {
		t.Fatalf("empty signature: err = %v, want ErrUnsigned", err)
	}
	for _, bad := range []string{"not base64!", "AAAA"} {
		if _, err := plan.ParseSignature(bad, ""); !errors.Is(err, plan.ErrBadSignature) {
			t.Fatalf("signature %q: err = %v, want ErrBadSignature", bad, err)
		}
		if _, err := plan.ParseSigningKey(bad); !errors.Is(err, plan.ErrBadSigningKey) {
			t.Fatalf("key %q: err = %v, want ErrBadSigningKey", bad, err)
		}
	}
}

// TestParseSigningKeyRefusesThePrivateSeed: the private key's line of the
// collector's key file, alone, with spaces or with the rest of the file,
// is refused as a pin with an error that says it is the private key and
// how to print the public one, and does not repeat the seed.
func TestParseSigningKeyRefusesThePrivateSeed(t *testing.T) {
	_, priv := newKey(t)
	seed := base64.StdEncoding.EncodeToString(priv.Seed())
	line := plan.SigningSeedPrefix + seed
	for _, s := range []string{line, " " + line + "\n", line + "\n" + plan.Endorse(priv, priv.Public().(ed25519.PublicKey), now).String()} {
		_, err := plan.ParseSigningKey(s)
		if !errors.Is(err, plan.ErrBadSigningKey) || !strings.Contains(err.Error(), "PRIVATE") || !strings.Contains(err.Error(), "blanket collector plan-key") {
			t.Fatalf("ParseSigningKey(the seed line) = %v; want ErrBadSigningKey saying it is the PRIVATE key and to use blanket collector plan-key", err)
		}
		if strings.Contains(err.Error(), seed) {
			t.Fatalf("the error repeats the private seed: %v", err)
		}
	}
}

// A plan signed with the key the pinned one endorsed verifies, as does one
// signed at the end of a chain of two rollovers, from either pinned key of
// the chain; a chain that another key signed, or that starts after the
// clock, does not.
func TestSignedPlanFollowsRollovers(t *testing.T) {
	k0, p0 := newKey(t)
	k1, p1 := newKey(t)
	k2, p2 := newKey(t)
	kx, px := newKey(t)
	e01 := plan.Endorse(p0, k1, now.Add(-time.Hour))
	e12 := plan.Endorse(p1, k2, now.Add(-time.Minute))
	cases := []struct {
		name   string
		pinned ed25519.PublicKey
		signer ed25519.PrivateKey
		chain  []plan.Endorsement
		want   ed25519.PublicKey // nil: refused
	}{
		{"one rollover", k0, p1, []plan.Endorsement{e01}, k1},
		{"two rollovers", k0, p2, []plan.Endorsement{e01, e12}, k2},
		{"pinned to the middle key", k1, p2, []plan.Endorsement{e01, e12}, k2},
		{"pinned to the newest key", k2, p2, []plan.Endorsement{e01, e12}, k2},
		{"signed by the old key despite the chain", k0, p0, []plan.Endorsement{e01}, nil},
		{"endorsed by another key", k0, p1, []plan.Endorsement{plan.Endorse(px, k1, now)}, nil},
		{"a stranger's key endorsed by another", k0, px, []plan.Endorsement{e01, plan.Endorse(p2, kx, now)}, nil},
		{"a chain with a gap", k0, p2, []plan.Endorsement{e12}, nil},
		{"a chain out of order", k0, p2, []plan.Endorsement{e12, e01}, nil},
		{"an endorsement valid from tomorrow", k0, p1, []plan.Endorsement{plan.Endorse(p0, k1, now.Add(24*time.Hour))}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := roundTrip(t, plan.SignPlan(c.signer, body, c.chain))
			got, err := plan.VerifyPlan(c.pinned, body, s, now)
			if c.want == nil {
				if !errors.Is(err, plan.ErrBadSignature) {
					t.Fatalf("VerifyPlan = %v, %v; want ErrBadSignature", got, err)
				}
				return
			}
			if err != nil || !got.Equal(c.want) {
				t.Fatalf("VerifyPlan = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestEndorsementRoundTrip(t *testing.T) {
	k1, _ := newKey(t)
	_, p0 := newKey(t)
	e := plan.Endorse(p0, k1, now)
	got, err := plan.ParseEndorsement(e.String())
	if err != nil || !got.Key.Equal(e.Key) || !got.NotBefore.Equal(e.NotBefore) || !bytes.Equal(got.Signature, e.Signature) {
		t.Fatalf("ParseEndorsement(String) = %+v, %v; want %+v", got, err, e)
	}
	if _, err := plan.ParseEndorsement(e.String()[:20]); !errors.Is(err, plan.ErrBadSignature) {
		t.Fatalf("truncated endorsement: err = %v, want ErrBadSignature", err)
	}
}

// FuzzVerifyPlan feeds arbitrary signature and endorsement headers and
// plan bytes to what an app runs on them: no input panics, and none
// verifies under a key that signed nothing.
func FuzzVerifyPlan(f *testing.F) {
	_, p0, _ := ed25519.GenerateKey(nil)
	k1, p1, _ := ed25519.GenerateKey(nil)
	sig, end := plan.SignPlan(p1, body, []plan.Endorsement{plan.Endorse(p0, k1, now)}).Headers()
	f.Add(sig, end, body)
	f.Add("", "", []byte("{}"))
	f.Add(sig, end+", "+end, body)
	pinned, _, _ := ed25519.GenerateKey(nil)
	f.Fuzz(func(t *testing.T, sig, end string, b []byte) {
		s, err := plan.ParseSignature(sig, end)
		if err != nil {
			return
		}
		if _, err := plan.VerifyPlan(pinned, b, s, now); err == nil {
			t.Fatal("a plan verified under a key that signed nothing")
		}
	})
}

// TestParseSignatureBoundsHostileHeaders: a header with more endorsements
// than an app follows, or a value longer than its fixed length, is refused
// before it is decoded. The headers here are 1 MiB or more, so decoding
// one would allocate at least 3/4 MiB; allocBound is far above what the
// refusal itself takes (its error text, and at most MaxEndorsements parsed
// endorsements of 104 bytes each) and far below that.
func TestParseSignatureBoundsHostileHeaders(t *testing.T) {
	const allocBound = 64 << 10
	_, p0 := newKey(t)
	k1, _ := newKey(t)
	sig, _ := plan.SignPlan(p0, body, nil).Headers()
	one := plan.Endorse(p0, k1, now).String()
	chain := func(n int) string { return strings.Repeat(one+", ", n-1) + one }
	if s, err := plan.ParseSignature(sig, chain(plan.MaxEndorsements)); err != nil || len(s.Endorsements) != plan.MaxEndorsements {
		t.Fatalf("%d endorsements: %d parsed, %v", plan.MaxEndorsements, len(s.Endorsements), err)
	}
	cases := []struct{ name, sig, endorsements string }{
		{"one endorsement too many", sig, chain(plan.MaxEndorsements + 1)},
		{"a million commas", sig, strings.Repeat(",", 1<<20)},
		{"eight thousand endorsements", sig, chain(1 << 13)},
		{"one endorsement of 1 MiB", sig, strings.Repeat("A", 1<<20)},
		{"a signature of 1 MiB", strings.Repeat("A", 1<<20), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = plan.ParseSignature(c.sig, c.endorsements) })
			if !errors.Is(err, plan.ErrBadSignature) {
				t.Fatalf("err = %v, want ErrBadSignature", err)
			}
			if n > allocBound {
				t.Fatalf("ParseSignature allocated %d bytes to refuse a header of %d bytes, want at most %d: it decoded before checking", n, len(c.sig)+len(c.endorsements), allocBound)
			}
		})
	}
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
