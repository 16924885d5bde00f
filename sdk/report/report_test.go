package report

import (
	"bytes"
	"errors"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	envs := []Envelope{
		{ID: NewID(), Metric: "ui/screen", Suite: SuiteX25519ChaCha, Sealed: []byte{1, 2, 3}},
		{ID: NewID(), Metric: "sync/bytes", Suite: SuiteX25519ChaCha, Sealed: bytes.Repeat([]byte{9}, 100)},
	}
	got, err := DecodeEnvelopes(EncodeEnvelopes(envs))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(envs) {
		t.Fatalf("got %d envelopes, want %d", len(got), len(envs))
	}
	for i := range envs {
		if got[i].ID != envs[i].ID || got[i].Metric != envs[i].Metric || got[i].Suite != envs[i].Suite || !bytes.Equal(got[i].Sealed, envs[i].Sealed) {
			t.Errorf("envelope %d: got %+v, want %+v", i, got[i], envs[i])
		}
	}
	one, err := DecodeEnvelope(AppendEnvelope(nil, envs[0]))
	if err != nil || one.Metric != envs[0].Metric {
		t.Fatalf("DecodeEnvelope = %+v, %v", one, err)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	b := Batch{ID: NewID(), Metric: "m", Suite: 1, Sealed: [][]byte{{1}, {2, 3}, {}}}
	got, err := DecodeBatch(EncodeBatch(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != b.ID || got.Metric != b.Metric || len(got.Sealed) != 3 || !bytes.Equal(got.Sealed[1], []byte{2, 3}) {
		t.Fatalf("got %+v, want %+v", got, b)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := EncodeEnvelopes([]Envelope{{Metric: "m", Suite: 1, Sealed: []byte{1}}})
	cases := map[string][]byte{
		"empty":        nil,
		"bad magic":    append([]byte("XXXX"), good[4:]...),
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte{}, good...), 0),
		"huge count":   {'B', 'L', 'U', '1', 0xff, 0xff, 0xff, 0xff},
		"count beyond": {'B', 'L', 'U', '1', 0, 0, 0, 2},
	}
	for name, b := range cases {
		if _, err := DecodeEnvelopes(b); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: err = %v, want ErrMalformed or ErrTooLarge", name, err)
		}
	}
	if _, err := DecodeBatch([]byte("BLB1")); !errors.Is(err, ErrMalformed) {
		t.Errorf("short batch: err = %v", err)
	}
}

func TestSealOpen(t *testing.T) {
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sk.PublicKey().Bytes(), pub) {
		t.Fatal("private key does not match public key")
	}
	bind := Binding{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2.5}
	sealed, err := Seal(pk, bind, []byte("report"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(sk, bind, sealed)
	if err != nil || string(got) != "report" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Any change of binding or ciphertext fails.
	for _, other := range []Binding{
		{Metric: "ui/other", Plugin: "krr", Version: "1", Eps0: 2.5},
		{Metric: "ui/screen", Plugin: "rappor", Version: "1", Eps0: 2.5},
		{Metric: "ui/screen", Plugin: "krr", Version: "2", Eps0: 2.5},
		{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2.6},
	} {
		if _, err := Open(sk, other, sealed); !errors.Is(err, ErrOpen) {
			t.Errorf("binding %+v: err = %v, want ErrOpen", other, err)
		}
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := Open(sk, bind, sealed); !errors.Is(err, ErrOpen) {
		t.Errorf("tampered: err = %v, want ErrOpen", err)
	}
}

func FuzzDecodeEnvelopes(f *testing.F) {
	f.Add(EncodeEnvelopes([]Envelope{{Metric: "m", Suite: 1, Sealed: []byte{1, 2}}}))
	f.Add([]byte("BLU1\x00\x00\x00\x01BLE1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		envs, err := DecodeEnvelopes(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if !bytes.Equal(EncodeEnvelopes(envs), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(Batch{Metric: "m", Suite: 1, Sealed: [][]byte{{1}, {2}}}))
	f.Add([]byte("BLB1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bt, err := DecodeBatch(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeBatch(bt), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
