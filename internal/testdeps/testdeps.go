// Package testdeps decides what a test does when something it needs from
// the machine is missing (a PostgreSQL server, Chromium): under make test,
// make audit and CI, which set BLANKET_TEST_REQUIRE=1 and install them
// (make deps), it fails; under a plain go test it skips, naming what is
// missing and how to get it.
package testdeps

import (
	"os"
	"testing"
)

// EnvRequire is the variable that makes a missing dependency fail a test
// instead of skipping it.
const EnvRequire = "BLANKET_TEST_REQUIRE"

// Required reports whether missing dependencies fail tests.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Missing ends t for a missing dependency err: it fails t when Required,
// and skips it otherwise.
func Missing(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%v (%s=1: make test, make audit and CI require it)", err, EnvRequire)
	}
	t.Skipf("skipped: %v (make test requires it)", err)
}
