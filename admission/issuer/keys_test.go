package issuer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/secrets"
)

// TestSeedFileIsCreatedOnceAndShared: LoadOrCreateSeed writes a 0600 file
// once; a verifier reading the file by path gets the same seed and
// verifies the issuer's tokens.
func TestSeedFileIsCreatedOnceAndShared(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	seed, created, err := LoadOrCreateSeed(dir)
	if err != nil || !created || len(seed) != SeedSize {
		t.Fatalf("first LoadOrCreateSeed: %d bytes, created %v, %v", len(seed), created, err)
	}
	again, created, err := LoadOrCreateSeed(dir)
	if err != nil || created || !bytes.Equal(again, seed) {
		t.Fatalf("second LoadOrCreateSeed: created %v, same %v, %v", created, bytes.Equal(again, seed), err)
	}
	path := filepath.Join(dir, SeedFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v, %v", fi.Mode(), err)
	}
	is, err := New(context.Background(), Options{Seed: seed, Dir: dir, Now: (&clock{t: testNow}).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer is.Close()
	pool := poolKey("a", 100)
	_, tokens, err := fetch(t, is, instance("i1"), pool)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := LoadSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(pool, tokens[0]); err != nil {
		t.Errorf("a verifier of the seed file: %v", err)
	}
}

// TestLoadSeedRefusesBadFiles: a file others may read, one of the wrong
// length or not base64url, is refused.
func TestLoadSeedRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
	}{
		{"readable by others", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0o644},
		{"short", "AAAA", 0o600},
		{"not base64url", "!!!!AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0o600},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.content), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, c.mode)
		if _, err := LoadSeed(path); !errors.Is(err, secrets.ErrSecretFile) {
			t.Errorf("%s: LoadSeed: %v, want ErrSecretFile", c.name, err)
		}
	}
	if _, err := NewVerifier(make([]byte, 16)); !errors.Is(err, ErrOptions) {
		t.Errorf("NewVerifier of a 16-byte seed: %v", err)
	}
	if _, err := New(context.Background(), Options{Seed: make([]byte, 31), Dir: dir}); !errors.Is(err, ErrOptions) {
		t.Errorf("New with a 31-byte seed: %v", err)
	}
}

// TestKeyringStaysBounded: deriving more keys than maxKeys keeps at most
// maxKeys, and an evicted key derives again to the same.
func TestKeyringStaysBounded(t *testing.T) {
	k := newKeyring(make([]byte, SeedSize))
	first, err := k.server(poolKey("p0", 1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxKeys + 10 {
		if _, err := k.server(poolKey("p", int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if len(k.m) > maxKeys {
		t.Errorf("%d keys held, bound %d", len(k.m), maxKeys)
	}
	again, _ := k.server(poolKey("p0", 1))
	a, _ := first.PublicKey().MarshalBinary()
	b, _ := again.PublicKey().MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Error("a key derived again differs")
	}
}

// TestSpentSetTakesATokenOnce: Spend is fresh once per pool key and
// input, and Forget drops a period's keys after its deadline.
func TestSpentSetTakesATokenOnce(t *testing.T) {
	s := NewMemorySpent(0)
	var tok admission.Token
	tok.Input[0] = 1
	ctx := context.Background()
	a, b := poolKey("a", 100), poolKey("b", 100)
	for _, c := range []struct {
		pool  string
		fresh bool
	}{{a, true}, {a, false}, {b, true}, {b, false}} {
		if fresh, err := s.Spend(ctx, c.pool, tok); err != nil || fresh != c.fresh {
			t.Errorf("Spend(%s): %v, %v; want %v", c.pool, fresh, err, c.fresh)
		}
	}
	if SpentKey(a, tok) == SpentKey(b, tok) {
		t.Error("one SpentKey for two pool keys")
	}
	if n := s.Forget(testNow); n != 0 || s.Len() != 2 {
		t.Errorf("Forget during the period: %d dropped, %d held", n, s.Len())
	}
	if n := s.Forget(testNow.Add(day * 1e9)); n != 2 || s.Len() != 0 {
		t.Errorf("Forget after the period: %d dropped, %d held", n, s.Len())
	}
	if _, err := s.Spend(ctx, "a", tok); !errors.Is(err, admission.ErrMalformed) {
		t.Errorf("Spend with a pool key without a period: %v", err)
	}
}
