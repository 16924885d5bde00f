package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParsePending: ParsePending never panics, refuses with ErrMalformed
// and re-encodes what it takes byte for byte.
func FuzzParsePending(f *testing.F) {
	p, _, err := Blind([]string{poolKey("a", 1), poolKey("b", 2)})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := p.MarshalBinary()
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{pendingVersion, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePending(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParsePending: %v, not ErrMalformed", err)
			}
			return
		}
		if again, _ := p.MarshalBinary(); !bytes.Equal(again, b) {
			t.Fatalf("ParsePending(%x) re-encodes to %x", b, again)
		}
	})
}

// FuzzFinalize: Finalize never panics on a response body from the
// network, and fails with ErrCount, ErrMalformed or ErrRefused.
func FuzzFinalize(f *testing.F) {
	pools := []string{poolKey("a", 1), poolKey("b", 1)}
	p, req, err := Blind(pools)
	if err != nil {
		f.Fatal(err)
	}
	resp := newTestServer(f).answer(f, req)
	good, _ := json.Marshal(resp)
	f.Add(good)
	f.Add([]byte(`{"evaluations":[{"pool":"x"}]}`))
	f.Add([]byte(`{"evaluations":[{"pool":"` + pools[0] + `","refused":"period"},{"pool":"` + pools[1] + `","evaluated":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r TokenResponse
		if err := json.Unmarshal(body, &r); err != nil {
			return
		}
		tokens, err := Finalize(p, &r)
		if err != nil && !errors.Is(err, ErrCount) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrRefused) {
			t.Fatalf("Finalize: %v", err)
		}
		if (err == nil || errors.Is(err, ErrRefused)) && len(tokens) != len(pools) {
			t.Fatalf("Finalize: %d tokens for %d pool keys", len(tokens), len(pools))
		}
	})
}
