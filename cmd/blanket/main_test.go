package main

import (
	"os"
	"testing"

	"github.com/blanket-dp/blanket/internal/testbuild"
)

// TestMain removes the binaries the tests built (the example plugin olh).
func TestMain(m *testing.M) { os.Exit(testbuild.Main(m)) }
