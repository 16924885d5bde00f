package deploy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testdeps"
)

// backend is a replica as haproxy sees it: GET /readyz (503 while down)
// and every other request recorded.
type backend struct {
	name string
	srv  *httptest.Server
	down atomic.Bool

	mu   sync.Mutex
	got  []string      // "METHOD PATH"
	hdrs []http.Header // their headers
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{name: name}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			if b.down.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.got = append(b.got, r.Method+" "+r.URL.Path)
		b.hdrs = append(b.hdrs, r.Header.Clone())
		b.mu.Unlock()
		fmt.Fprint(w, b.name)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

func (b *backend) requests() ([]string, []http.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...), append([]http.Header(nil), b.hdrs...)
}

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startHAProxy runs haproxy/haproxy.cfg with env, in the foreground, and
// returns its output so far (stdout and stderr) as a function.
func startHAProxy(t *testing.T, env map[string]string) func() string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/haproxy"); err != nil {
			testdeps.Missing(t, fmt.Errorf("haproxy is not installed (Debian's haproxy; make deps installs it)"))
		}
	}
	cmd := exec.Command(bin, "-db", "-f", "haproxy/haproxy.cfg")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out servertest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return out.String
}

// TestHAProxyConfig runs the real haproxy on haproxy/haproxy.cfg in
// front of two shufflers, two collectors and an issuer (recording
// servers on loopback) and checks what the file promises: the apps'
// frontend passes POST /v1/reports and GET /v1/plan to the shufflers in
// turn, POST /v1/tokens to the issuer, and nothing else (the estimates
// API is 404 there); it strips X-Forwarded-For and Forwarded and adds
// neither; a replica whose /readyz answers 503 gets nothing until it is
// ready again; the internal frontend passes everything to the
// collectors; and haproxy logs the internal requests but none of the
// apps'.
func TestHAProxyConfig(t *testing.T) {
	s1, s2 := newBackend(t, "shuffler1"), newBackend(t, "shuffler2")
	c1, c2 := newBackend(t, "collector1"), newBackend(t, "collector2")
	is := newBackend(t, "issuer1")
	apps, internal := freeAddr(t), freeAddr(t)
	output := startHAProxy(t, map[string]string{
		"BLANKET_APPS_BIND": apps, "BLANKET_INTERNAL_BIND": internal,
		"BLANKET_SHUFFLER_1": s1.addr(), "BLANKET_SHUFFLER_2": s2.addr(),
		"BLANKET_COLLECTOR_1": c1.addr(), "BLANKET_COLLECTOR_2": c2.addr(),
		"BLANKET_ISSUER_1": is.addr(),
	})
	client := &http.Client{Timeout: 5 * time.Second}
	do := func(method, url string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// haproxy is up once the apps' frontend answers.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _ := do("GET", "http://"+apps+"/nothing", nil); code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not start:\n%s", output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Wait for the health checks to see every server up.
	time.Sleep(300 * time.Millisecond)

	seen := map[string]int{}
	for range 6 {
		code, who := do("POST", "http://"+apps+"/v1/reports", map[string]string{"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=203.0.113.7"})
		if code != http.StatusOK {
			t.Fatalf("POST /v1/reports through the apps' frontend: %d %s", code, who)
		}
		seen[who]++
	}
	if seen["shuffler1"] != 3 || seen["shuffler2"] != 3 {
		t.Errorf("uploads went to %v, want 3 to each shuffler", seen)
	}
	if code, who := do("GET", "http://"+apps+"/v1/plan", nil); code != http.StatusOK || !strings.HasPrefix(who, "shuffler") {
		t.Errorf("GET /v1/plan: %d from %q, want a shuffler", code, who)
	}
	if code, who := do("POST", "http://"+apps+"/v1/tokens", nil); code != http.StatusOK || who != "issuer1" {
		t.Errorf("POST /v1/tokens: %d from %q, want the issuer", code, who)
	}
	for _, r := range [][2]string{{"GET", "/v1/metrics"}, {"POST", "/v1/batches"}, {"GET", "/"}, {"GET", "/v1/reports"}} {
		if code, body := do(r[0], "http://"+apps+r[1], nil); code != http.StatusNotFound {
			t.Errorf("%s %s through the apps' frontend: %d %q, want 404", r[0], r[1], code, body)
		}
	}
	for _, b := range []*backend{s1, s2} {
		_, hdrs := b.requests()
		for _, h := range hdrs {
			if h.Get("X-Forwarded-For") != "" || h.Get("Forwarded") != "" {
				t.Errorf("%s got X-Forwarded-For %q, Forwarded %q", b.name, h.Get("X-Forwarded-For"), h.Get("Forwarded"))
			}
		}
	}

	// A shuffler not ready gets nothing; ready again, it takes its turn.
	s2.down.Store(true)
	waitFor(t, "haproxy to take shuffler2 out", func() bool {
		code, who := do("POST", "http://"+apps+"/v1/reports", nil)
		return code == http.StatusOK && who == "shuffler1" && countOf(do, apps, "shuffler1", 4) == 4
	})
	s2.down.Store(false)
	waitFor(t, "haproxy to take shuffler2 back", func() bool { return countOf(do, apps, "shuffler2", 4) > 0 })

	// The internal frontend: the collectors, in turn.
	seen = map[string]int{}
	for range 4 {
		code, who := do("POST", "http://"+internal+"/v1/batches", nil)
		if code != http.StatusOK {
			t.Fatalf("POST /v1/batches through the internal frontend: %d %s", code, who)
		}
		seen[who]++
	}
	if seen["collector1"] != 2 || seen["collector2"] != 2 {
		t.Errorf("batches went to %v, want 2 to each collector", seen)
	}
	if code, who := do("GET", "http://"+internal+"/v1/metrics", nil); code != http.StatusOK || !strings.HasPrefix(who, "collector") {
		t.Errorf("GET /v1/metrics through the internal frontend: %d %q", code, who)
	}

	// The internal side is logged, the apps' side never.
	waitFor(t, "the internal requests logged", func() bool { return strings.Contains(output(), "/v1/batches") })
	if out := output(); strings.Contains(out, "/v1/reports") || strings.Contains(out, "/v1/plan") || strings.Contains(out, "/v1/tokens") || strings.Contains(out, "203.0.113.7") {
		t.Errorf("haproxy logged the apps' side:\n%s", out)
	}
}

// countOf posts n uploads through the apps' frontend and counts those
// who answered.
func countOf(do func(string, string, map[string]string) (int, string), apps, who string, n int) int {
	k := 0
	for range n {
		if code, w := do("POST", "http://"+apps+"/v1/reports", nil); code == http.StatusOK && w == who {
			k++
		}
	}
	return k
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
