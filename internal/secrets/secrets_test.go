package secrets

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLoadOrCreate: the first call writes fresh's content and says so,
// the next reads it back without calling fresh; a file others may read is
// refused with ErrSecretFile, and one that cannot be read names its path.
func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "collector.key")
	calls := 0
	fresh := func() ([]byte, error) { calls++; return []byte("secret"), nil }
	for i, wantCreated := range []bool{true, false} {
		b, created, err := LoadOrCreate(path, fresh)
		if err != nil || string(b) != "secret" || created != wantCreated {
			t.Fatalf("call %d: %q, %v, %v; want %q, created %v", i+1, b, created, err, "secret", wantCreated)
		}
	}
	if calls != 1 {
		t.Fatalf("fresh called %d times, want once", calls)
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreate(path, fresh); !errors.Is(err, ErrSecretFile) {
			t.Fatalf("mode 0644: %v; want ErrSecretFile", err)
		}
	}
	missing := filepath.Join(t.TempDir(), "gone", "batch.token")
	if _, err := Read(missing); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrSecretFile) || !strings.HasPrefix(err.Error(), "secrets: reading "+missing+": ") {
		t.Fatalf("Read of a missing file: %v; want fs.ErrNotExist, not ErrSecretFile, naming the file", err)
	}
}
