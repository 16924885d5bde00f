package testbuild

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMain runs the tests without the shared directory that make test
// names (TestShared names its own).
func TestMain(m *testing.M) {
	os.Unsetenv(ShareEnv)
	os.Exit(Main(m))
}

// The main packages of these tests (directories under testdata: a build
// takes a fraction of a second).
const (
	hello  = "./testdata/hello"
	broken = "./testdata/broken"
)

// TestBinaryOnce asks for one binary from parallel callers, one of them
// through Start: all get the same path, named after the package, alone in
// its directory, and it runs.
func TestBinaryOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped in -short mode")
	}
	Start(hello)
	paths := make([]string, 4)
	t.Run("callers", func(t *testing.T) {
		for i := range paths {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				paths[i] = Binary(t, hello)
			})
		}
	})
	for _, p := range paths[1:] {
		if p != paths[0] {
			t.Fatalf("paths %v, want one", paths)
		}
	}
	if filepath.Base(paths[0]) != "hello" {
		t.Errorf("binary %s, want it named hello", paths[0])
	}
	if ents, err := os.ReadDir(filepath.Dir(paths[0])); err != nil || len(ents) != 1 {
		t.Errorf("directory of the binary: %d entries (%v), want the binary only", len(ents), err)
	}
	if named := Named(t, hello, "blanket-hello"); named == paths[0] || filepath.Base(named) != "blanket-hello" {
		t.Errorf("Named: %s beside Binary's %s", named, paths[0])
	}
	out, err := exec.Command(paths[0], "a", "b").Output()
	if err != nil || strings.TrimSpace(string(out)) != "[a b]" {
		t.Errorf("running the binary: %q, %v", out, err)
	}
}

// TestBuildFailure checks that a failed build reports go build's output
// (Binary fails the test with it).
func TestBuildFailure(t *testing.T) {
	b, err := get(broken, "broken", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.run()
	if b.err == nil || !strings.Contains(b.err.Error(), "undefinedForTestbuild") {
		t.Errorf("build of a package that does not compile: error %v, want go build's output", b.err)
	}
}

// TestRemove checks that Remove deletes the binaries and that a later
// Binary builds again.
func TestRemove(t *testing.T) {
	p := Binary(t, hello)
	Remove()
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("binary %s after Remove: %v", p, err)
	}
	if q := Binary(t, hello); q == p {
		t.Errorf("Binary after Remove returned the removed path %s", q)
	} else if _, err := os.Stat(q); err != nil {
		t.Error(err)
	}
}

// TestShared: with ShareEnv set, a binary is built once into the shared
// directory, alone in its own directory there; a second process (here:
// this one after Remove forgot its builds) finds it and does not build it
// again, and Remove leaves it for the run that owns the directory.
func TestShared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped in -short mode")
	}
	dir := t.TempDir()
	t.Setenv(ShareEnv, dir)
	Remove()
	p := Binary(t, hello)
	if !strings.HasPrefix(p, dir+string(filepath.Separator)) || filepath.Base(p) != "hello" {
		t.Fatalf("binary %s, want hello under the shared %s", p, dir)
	}
	if ents, err := os.ReadDir(filepath.Dir(p)); err != nil || len(ents) != 1 {
		t.Errorf("directory of the shared binary: %d entries (%v), want the binary only", len(ents), err)
	}
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	Remove()
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Remove removed the shared binary: %v", err)
	}
	if q := Binary(t, hello); q != p {
		t.Errorf("a second process got %s, want the shared %s", q, p)
	}
	if after, err := os.Stat(p); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the shared binary was built again (%v)", err)
	}
	if q := Named(t, hello, "blanket-hello"); filepath.Dir(q) == filepath.Dir(p) {
		t.Errorf("another name shares the directory %s", filepath.Dir(q))
	}
	if out, err := exec.Command(p, "x").Output(); err != nil || strings.TrimSpace(string(out)) != "[x]" {
		t.Errorf("running the shared binary: %q, %v", out, err)
	}
	Remove()
}
