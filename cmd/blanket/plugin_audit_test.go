//go:build audit

package main

import "testing"

// TestCustomPluginEndToEndDeep is TestCustomPluginEndToEnd with 'plugin
// verify' at its defaults (three eps0s, 20,000 samples per input).
func TestCustomPluginEndToEndDeep(t *testing.T) {
	customPluginEndToEnd(t)
}
