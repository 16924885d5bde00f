package dashboard

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// TestRegister serves the page and checks its routes: the page at / only,
// every asset it loads, the roles, and no directory listing.
func TestRegister(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, Roles{Shuffler: true})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, page, h := get(t, srv, "/")
	if code != http.StatusOK || !strings.Contains(h.Get("Content-Type"), "text/html") || !strings.Contains(page, "<title>Blanket</title>") {
		t.Fatalf("GET / = %d %s: %.80q", code, h.Get("Content-Type"), page)
	}
	// Every script and style the page loads is served.
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	n := 0
	for _, m := range refs {
		ref := m[1]
		if strings.HasPrefix(ref, "data:") || ref == "metrics" {
			continue
		}
		n++
		if code, _, _ := get(t, srv, "/"+ref); code != http.StatusOK {
			t.Errorf("the page loads %s: GET answers %d", ref, code)
		}
	}
	if n < 4 {
		t.Errorf("the page loads %d assets, want the style and three scripts", n)
	}
	code, body, _ := get(t, srv, "/dashboard/roles.json")
	var roles Roles
	if code != http.StatusOK || json.Unmarshal([]byte(body), &roles) != nil || roles != (Roles{Shuffler: true}) {
		t.Errorf("roles.json = %d %q", code, body)
	}
	for _, path := range []string{"/dashboard/", "/dashboard/nothing.js", "/index.html/x", "/other"} {
		if code, _, _ := get(t, srv, path); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, code)
		}
	}
}

// TestNoNetwork checks that no asset loads anything from another origin:
// the page must work on a machine without network.
func TestNoNetwork(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Files(), path)
		if err != nil {
			return err
		}
		for _, m := range external.FindAllString(string(b), -1) {
			if m == "http://www.w3.org" { // the SVG namespace, not a request
				continue
			}
			t.Errorf("%s refers to %s", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
