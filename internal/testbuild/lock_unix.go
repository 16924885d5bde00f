//go:build unix

package testbuild

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on the file at path (made if missing),
// waiting for it; the function returned releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
