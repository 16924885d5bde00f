package testbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ShareEnv names a directory that the test processes of one run share
// their binaries through (make test sets it to a fresh directory and
// removes it afterwards): the first process to ask for a binary builds it
// there, under a lock, and every other process of the run uses that build
// instead of linking its own (the blanket CLI alone takes seconds of CPU
// to link, and six packages' tests run it). Without it each process
// builds its own, as before. The directory must not outlive the sources:
// a binary found there is used as is.
const ShareEnv = "BLANKET_TESTBUILD_DIR"

// shared returns where b lives in the shared directory dir: a directory
// per build named by a hash of its package (made absolute when it is a
// relative path, which each test process reads from its own directory),
// tags and name.
func (b *build) shared(dir string) (string, error) {
	pkg := b.pkg
	if strings.HasPrefix(pkg, ".") {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			return "", err
		}
		pkg = abs
	}
	h := sha256.Sum256([]byte(pkg + "\x00" + b.tags + "\x00" + b.name))
	return filepath.Join(dir, hex.EncodeToString(h[:8]), b.name), nil
}

// runShared makes b.path the shared build of b in dir, building it unless
// another process has: the build goes into a temporary directory renamed
// into place, under an exclusive lock on the build's lock file, so that a
// process that finds the binary finds it whole, and one waiting for the
// lock finds it built.
func (b *build) runShared(dir string) {
	path, err := b.shared(dir)
	if err != nil {
		b.err = fmt.Errorf("testbuild: %v", err)
		return
	}
	b.path = path
	if _, err := os.Stat(path); err == nil {
		return
	}
	unlock, err := lockFile(filepath.Dir(path) + ".lock")
	if err != nil {
		b.err = fmt.Errorf("testbuild: %v", err)
		return
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return // built while this process waited
	}
	tmp, err := os.MkdirTemp(dir, "building-")
	if err != nil {
		b.err = fmt.Errorf("testbuild: %v", err)
		return
	}
	defer os.RemoveAll(tmp)
	if b.err = goBuild(filepath.Join(tmp, b.name), b.pkg, b.tags); b.err != nil {
		return
	}
	if err := os.Rename(tmp, filepath.Dir(path)); err != nil {
		b.err = fmt.Errorf("testbuild: %v", err)
	}
}
