package main

import (
	"strings"
	"testing"
)

// TestOneShotCommands: the commands that compute once and exit (account
// and every subcommand, plan) let the accountant use huge pages; the
// servers and the rest do not.
func TestOneShotCommands(t *testing.T) {
	root := newRootCmd(defaultEnv())
	for path, want := range map[string]bool{
		"account":           true,
		"account eps":       true,
		"account delta":     true,
		"account calibrate": true,
		"account curve":     true,
		"plan":              true,
		"serve":             false,
		"shuffler":          false,
		"collector":         false,
		"issuer":            false,
		"plugin list":       false,
		"version":           false,
	} {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.Name() != strings.Fields(path)[len(strings.Fields(path))-1] {
			t.Fatalf("no command %q: %v", path, err)
		}
		if got := isOneShot(cmd); got != want {
			t.Errorf("%q one-shot: %v, want %v", path, got, want)
		}
	}
}
