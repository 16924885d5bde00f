//go:build unix && !solaris && !aix

package secrets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLockExcludes: while one Lock of a secret file is held, another
// waits, and gives up with ctx's error when ctx ends; once the first is
// released the second is taken. The lock file is mode 0600.
func TestLockExcludes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plan-signing.key")
	unlock, err := Lock(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*lockPoll)
	defer cancel()
	if _, err := Lock(short, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Lock while the first is held: %v; want it to wait until ctx ends", err)
	}
	unlock()
	unlock, err = Lock(ctx, path)
	if err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	unlock()
	if fi, err := os.Stat(path + ".lock"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v; want mode 0600", fi, err)
	}
}

// TestLockWaitsForTheRelease: a Lock waiting for another's release takes
// the lock once it is released.
func TestLockWaitsForTheRelease(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plan-signing.key")
	unlock, err := Lock(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(3*lockPoll, unlock)
	second, err := Lock(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	second()
}
