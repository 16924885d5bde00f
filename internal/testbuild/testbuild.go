// Package testbuild builds the Go main packages that tests run as
// processes (the blanket CLI, plugin binaries, test tools) into binaries:
// each once per test process, however many tests ask for it, parallel ones
// included (a second caller waits for the first build). The binaries are
// plain builds, without the race detector whatever the tests run with.
//
// One rule for every test that needs a binary: in -short mode it is
// skipped (a build takes seconds); otherwise a failed build, or a missing
// go command, fails it with go build's output. A build never makes a test
// skip silently.
//
// The binaries live in one temporary directory per test process (or, when
// the environment variable BLANKET_TESTBUILD_DIR names one, in a directory
// that all test processes of a run share: see ShareEnv), which a
// package whose tests build binaries removes from its TestMain, with Main
// or, beside another wrapper such as pgtest.Main, with Remove:
//
//	func TestMain(m *testing.M) { os.Exit(testbuild.Main(m)) }
package testbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// key is one binary: a package built with tags into a file name.
type key struct{ pkg, tags, name string }

// build is one binary, built once.
type build struct {
	key
	once sync.Once
	path string
	err  error
}

var (
	mu       sync.Mutex
	root     string // this process's directory of binaries, made on first use
	builds   = map[key]*build{}
	inFlight sync.WaitGroup // the builds not finished, which Remove waits for
)

// Binary returns the path of a binary of the main package pkg (an import
// path) built with the build tags tags, named after pkg's last element
// (blanket for .../cmd/blanket). The binary is alone in its directory:
// the directory of a plugin binary (blanket-<name>) is a plugin directory
// holding that plugin only.
func Binary(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	return Named(t, pkg, path.Base(pkg), tags...)
}

// Named is Binary with the binary's file name given, e.g.
// plugin.BinaryPrefix+"testplugin" for a plugin whose main package is not
// named so.
func Named(t testing.TB, pkg, name string, tags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("builds %s; skipped in -short mode", pkg)
	}
	b, err := get(pkg, name, tags)
	if err != nil {
		t.Fatal(err)
	}
	b.run()
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Start begins building what Binary(t, pkg, tags...) returns in the
// background, for a test that has other things to do first: Binary then
// waits for this build instead of starting its own. An error is reported
// by that Binary.
func Start(pkg string, tags ...string) {
	if b, err := get(pkg, path.Base(pkg), tags); err == nil {
		go b.run()
	}
}

// get returns the build of pkg with tags into name, registered on first
// use; the caller runs it.
func get(pkg, name string, tags []string) (*build, error) {
	k := key{pkg, strings.Join(tags, ","), name}
	mu.Lock()
	defer mu.Unlock()
	if b := builds[k]; b != nil {
		return b, nil
	}
	if root == "" {
		dir, err := os.MkdirTemp("", "blanket-testbuild-")
		if err != nil {
			return nil, fmt.Errorf("testbuild: %v", err)
		}
		root = dir
	}
	// A directory per binary: no two collide (one package, other tags),
	// and a plugin binary's directory holds that plugin only.
	b := &build{key: k, path: filepath.Join(root, strconv.Itoa(len(builds)), name)}
	builds[k] = b
	inFlight.Add(1)
	return b, nil
}

// run builds b unless it is built or being built (then it waits): into
// the run's shared directory when ShareEnv names one, else into this
// process's.
func (b *build) run() {
	b.once.Do(func() {
		defer inFlight.Done()
		if dir := os.Getenv(ShareEnv); dir != "" {
			b.runShared(dir)
			return
		}
		if err := os.Mkdir(filepath.Dir(b.path), 0o755); err != nil {
			b.err = fmt.Errorf("testbuild: %v", err)
			return
		}
		b.err = goBuild(b.path, b.pkg, b.tags)
	})
}

// goBuild builds the main package pkg with the build tags tags (joined by
// commas) into the file out.
func goBuild(out, pkg, tags string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("testbuild: no go command to build %s: %v", pkg, err)
	}
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if out, err := exec.Command(goBin, append(args, pkg)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(append(args, pkg), " "), err, out)
	}
	return nil
}

// Remove waits for the builds under way and removes every binary built
// in this process's directory (not the shared one of ShareEnv); a later
// Binary builds again. TestMain calls it after m.Run.
func Remove() {
	inFlight.Wait()
	mu.Lock()
	defer mu.Unlock()
	if root != "" {
		os.RemoveAll(root)
	}
	root, builds = "", map[key]*build{}
}

// Main is a convenience for TestMain: os.Exit(testbuild.Main(m)) runs m's
// tests, then Remove, and returns m's exit code.
func Main(m *testing.M) int {
	defer Remove()
	return m.Run()
}
