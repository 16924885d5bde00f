package secrets

import (
	"context"
	"fmt"
	"os"
	"time"
)

// lockPoll is how often Lock tries again while another holds the lock.
const lockPoll = 10 * time.Millisecond

// Lock takes the exclusive lock of the secret file path: a lock (flock) on
// the file path + ".lock" beside it, created empty (mode 0600) on first use
// and never removed. It waits while another process, or another Lock of
// this one, holds it, until ctx is done, and returns the function that
// releases it. Whoever reads a secret file to change it (Replace) holds
// the lock from the read to the write, so that two changes chain rather
// than one overwriting the other. Where the system has no flock in
// package syscall (Windows, Solaris and illumos, AIX), Lock does not lock.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("secrets: lock: %w", err)
	}
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("secrets: locking %s: %w", f.Name(), err)
		}
		if ok {
			// Closing the file releases the lock.
			return func() { f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("secrets: waiting for the lock %s: %w", f.Name(), ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
