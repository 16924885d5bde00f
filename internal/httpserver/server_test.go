package httpserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestErrorLogRedactsAddresses checks that net/http's error log, which
// names peers, reaches the logs without their addresses.
func TestErrorLogRedactsAddresses(t *testing.T) {
	var buf bytes.Buffer
	w := redactingWriter{slog.New(slog.NewTextHandler(&buf, nil))}
	for _, line := range []string{
		"http: TLS handshake error from 192.0.2.7:51234: EOF\n",
		"http: panic serving [2001:db8::1]:443: boom\n",
		"http: panic serving [fe80::1%eth0]:8080: boom\n",
	} {
		buf.Reset()
		w.Write([]byte(line))
		out := buf.String()
		for _, addr := range []string{"192.0.2.7", "51234", "2001:db8::1", "fe80::1"} {
			if strings.Contains(out, addr) {
				t.Errorf("log %q keeps %s", out, addr)
			}
		}
		if !strings.Contains(out, "<addr>") {
			t.Errorf("log %q: no <addr>", out)
		}
	}
}
