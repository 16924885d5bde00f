package main

import (
	"os"
	"testing"

	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/testbuild"
)

// TestMain stops the throwaway PostgreSQL server, if a test started one,
// and removes the binaries the tests built (the example plugin olh).
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	testbuild.Remove()
	os.Exit(code)
}
