package report

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	envs := []Envelope{
		{ID: NewID(), Metric: "ui/screen", Suite: SuiteX25519ChaCha, Sealed: []byte{1, 2, 3}},
		{ID: NewID(), Metric: "sync/bytes", Suite: SuiteX25519ChaCha, Sealed: bytes.Repeat([]byte{9}, 100), Token: bytes.Repeat([]byte{7}, 96)},
		{ID: NewID(), Metric: "m", Suite: SuiteX25519ChaCha, Sealed: []byte{4}, Token: bytes.Repeat([]byte{8}, MaxTokenLen)},
	}
	got, err := DecodeEnvelopes(EncodeEnvelopes(envs))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(envs) {
		t.Fatalf("got %d envelopes, want %d", len(got), len(envs))
	}
	for i := range envs {
		if got[i].ID != envs[i].ID || got[i].Metric != envs[i].Metric || got[i].Suite != envs[i].Suite || !bytes.Equal(got[i].Sealed, envs[i].Sealed) || !bytes.Equal(got[i].Token, envs[i].Token) {
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
	if got.ID != b.ID || got.Metric != b.Metric || len(got.Sealed) != 3 || !bytes.Equal(got.Sealed[1], []byte{2, 3}) || got.Draws != 0 {
		t.Fatalf("got %+v, want %+v", got, b)
	}
	b.Draws = 2
	got, err = DecodeBatch(EncodeBatch(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.Draws != 2 || len(got.Sealed) != 3 || !bytes.Equal(got.Sealed[1], []byte{2, 3}) {
		t.Fatalf("with draws: got %+v, want %+v", got, b)
	}
}

// TestBatchWithoutDrawsIsBLB1 pins the encoding of a batch without draws
// to the bytes shufflers wrote before the floor, which collectors of that
// age decode, and that of a batch with draws.
func TestBatchWithoutDrawsIsBLB1(t *testing.T) {
	b := Batch{ID: ID{1, 2, 3}, Metric: "m", Suite: 1, Sealed: [][]byte{{9}, {8, 7}}}
	v1 := "BLB1" + string(b.ID[:]) + "\x00\x01m" + "\x00\x01" + "\x00\x00\x00\x02" + "\x00\x00\x00\x01\x09" + "\x00\x00\x00\x02\x08\x07"
	if got := string(EncodeBatch(b)); got != v1 {
		t.Fatalf("without draws: %q, want %q", got, v1)
	}
	b.Draws = 1
	v2 := "BLB2" + string(b.ID[:]) + "\x00\x01m" + "\x00\x01" + "\x00\x00\x00\x01" + "\x00\x00\x00\x02" + "\x00\x00\x00\x01\x09" + "\x00\x00\x00\x02\x08\x07"
	if got := string(EncodeBatch(b)); got != v2 {
		t.Fatalf("with a draw: %q, want %q", got, v2)
	}
}

// TestDecodeBatchDrawErrors checks that a draw count above the report
// count, or a BLB2 batch with none, is malformed.
func TestDecodeBatchDrawErrors(t *testing.T) {
	b := Batch{ID: ID{1}, Metric: "m", Suite: 1, Sealed: [][]byte{{9}, {8, 7}}, Draws: 1}
	enc := EncodeBatch(b)
	at := 4 + 16 + 2 + 1 + 2 // the draw count
	for name, draws := range map[string]uint32{"above the reports": 3, "zero": 0} {
		bad := append([]byte(nil), enc...)
		binary.BigEndian.PutUint32(bad[at:], draws)
		if _, err := DecodeBatch(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
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
		// The pre-release envelope without a token field.
		"BLE1":       append([]byte("BLU1\x00\x00\x00\x01BLE1"), good[12:len(good)-2]...),
		"long token": append(append([]byte{}, good[:len(good)-2]...), 0x02, 0x01),
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
	day := Period{Start: 86400, Length: 86400}
	bind := Binding{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2.5, Period: day}
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
		{Metric: "ui/other", Plugin: "krr", Version: "1", Eps0: 2.5, Period: day},
		{Metric: "ui/screen", Plugin: "rappor", Version: "1", Eps0: 2.5, Period: day},
		{Metric: "ui/screen", Plugin: "krr", Version: "2", Eps0: 2.5, Period: day},
		{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2.6, Period: day},
		{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2.5, Period: Period{Start: 2 * 86400, Length: 86400}},
		{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2.5, Epoch: "0123456789abcdef", Period: day},
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

// TestKeyIDNamesTheKey: a key's id is the same from its public bytes, its
// parsed public half and its private half, 16 hex digits, and differs
// between keys; a report sealed to one key of a schedule does not open
// under the next.
func TestKeyIDNamesTheKey(t *testing.T) {
	priv1, pub1, _ := GenerateKey()
	priv2, pub2, _ := GenerateKey()
	pk1, _ := ParsePublicKey(pub1)
	sk1, _ := ParsePrivateKey(priv1)
	sk2, _ := ParsePrivateKey(priv2)
	id := KeyID(pub1)
	if len(id) != KeyIDLen || pk1.ID() != id || sk1.ID() != id || sk1.PublicKey().ID() != id {
		t.Fatalf("ids %q %q %q %q", id, pk1.ID(), sk1.ID(), sk1.PublicKey().ID())
	}
	if KeyID(pub2) == id || sk2.ID() != KeyID(pub2) {
		t.Fatalf("two keys, ids %q and %q", id, KeyID(pub2))
	}
	bind := Binding{Metric: "ui/screen", Plugin: "krr", Version: "1", Eps0: 2, Epoch: "0123456789abcdef", Period: Period{Start: 86400, Length: 86400}}
	sealed, err := Seal(pk1, bind, []byte("r"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(sk2, bind, sealed); !errors.Is(err, ErrOpen) {
		t.Errorf("sealed to key 1, opened under key 2: err = %v, want ErrOpen", err)
	}
	if got, err := Open(sk1, bind, sealed); err != nil || string(got) != "r" {
		t.Errorf("Open under its own key = %q, %v", got, err)
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
	f.Add(EncodeBatch(Batch{Metric: "m", Suite: 1, Sealed: [][]byte{{1}, {2}}, Draws: 1}))
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

func TestMessageRoundTrip(t *testing.T) {
	parts := []Part{{Metric: 0, Report: []byte{7}}, {Metric: 1, Report: bytes.Repeat([]byte{1}, 300)}, {Metric: 65535, Report: nil}}
	enc := EncodeMessage(parts)
	// version, count, then (index, length, bytes) per part.
	if want := 1 + 2 + 3*6 + 1 + 300; len(enc) != want {
		t.Fatalf("encoded %d bytes, want %d", len(enc), want)
	}
	got, err := DecodeMessage(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(parts) {
		t.Fatalf("got %d parts, want %d", len(got), len(parts))
	}
	for i := range parts {
		if got[i].Metric != parts[i].Metric || !bytes.Equal(got[i].Report, parts[i].Report) {
			t.Errorf("part %d: got %+v, want %+v", i, got[i], parts[i])
		}
	}
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version 2":   append([]byte{2}, enc[1:]...),
		"no parts":    {1, 0, 0},
		"truncated":   enc[:len(enc)-1],
		"trailing":    append(append([]byte{}, enc...), 0),
		"long length": {1, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := DecodeMessage(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestPoolBinding(t *testing.T) {
	ms := []Binding{{Metric: "a", Plugin: "krr", Version: "1", Eps0: 1}, {Metric: "b", Plugin: "rappor", Version: "1", Eps0: 2}}
	base := PoolBinding("@joint", "joint", ms)
	if base.Metric != "@joint" || base.Plugin != "joint" || len(base.Version) != 64 {
		t.Fatalf("binding = %+v", base)
	}
	if again := PoolBinding("@joint", "joint", []Binding{ms[0], ms[1]}); again != base {
		t.Fatalf("not deterministic: %+v vs %+v", again, base)
	}
	// Any change to a metric's binding, or their order, changes the
	// pool binding.
	for name, other := range map[string][]Binding{
		"eps0":     {ms[0], {Metric: "b", Plugin: "rappor", Version: "1", Eps0: 2.0000001}},
		"version":  {ms[0], {Metric: "b", Plugin: "rappor", Version: "2", Eps0: 2}},
		"order":    {ms[1], ms[0]},
		"dropped":  {ms[0]},
		"boundary": {{Metric: "a", Plugin: "krr", Version: "1", Eps0: 1}, {Metric: "b", Plugin: "rappor", Version: "1\x00", Eps0: 2}},
	} {
		if PoolBinding("@joint", "joint", other) == base {
			t.Errorf("%s: same binding", name)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(EncodeMessage([]Part{{Metric: 0, Report: []byte{1}}, {Metric: 1, Report: []byte{2, 3}}}))
	f.Add([]byte{1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		parts, err := DecodeMessage(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeMessage(parts), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
