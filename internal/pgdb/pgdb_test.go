package pgdb

import (
	"strings"
	"testing"
)

// TestRedact checks that no form of a password reaches a log line: in the
// user part (percent-encoded or not), as a query parameter, or in a URL
// that does not parse.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, secret string }{
		{"postgres://u:secret@h/db", "secret"},
		{"postgres://u:p%40ss@h/db", "p%40ss"},
		{"postgres://u@h/db?password=secret&sslmode=disable", "secret"},
		{"postgres://u:secret@h:notaport/db", "secret"},
		{"postgres://u:sec ret@h/db%zz", "sec"},
	} {
		got := Redact(c.in)
		if strings.Contains(got, c.secret) {
			t.Errorf("Redact(%q) = %q keeps the password", c.in, got)
		}
	}
	if got := Redact("postgres://u@h:5432/db?sslmode=disable"); got != "postgres://u@h:5432/db?sslmode=disable" {
		t.Errorf("a URL without a password changed: %q", got)
	}
}
