package browser

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPage opens a page in a real headless Chromium and checks what the
// package reads back: a value from the page, its draw counter, an uncaught
// exception and a console error among the problems, a failed request, and
// a PNG screenshot.
func TestPage(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><link rel="icon" href="data:,"><body><p id="x">41</p><script>
document.body.dataset.renders = "2";
window.answer = {n: Number(document.getElementById("x").textContent) + 1, s: "ok"};
console.log("fine");
console.error("drawn badly");
fetch("missing.json");
setTimeout(() => { null.boom; }, 0);
</script></body>`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Open(ctx, srv.URL+"/", 800, 600)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.WaitRenders(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var got struct {
		N int    `json:"n"`
		S string `json:"s"`
	}
	if err := p.Eval(ctx, "window.answer", &got); err != nil {
		t.Fatal(err)
	}
	if got.N != 42 || got.S != "ok" {
		t.Errorf("window.answer = %+v, want {42 ok}", got)
	}
	// The three problems arrive asynchronously.
	want := []string{"drawn badly", "boom", "404"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		all := strings.Join(p.Problems(), "\n")
		missing := ""
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing = w
			}
		}
		if missing == "" {
			if strings.Contains(all, "fine") {
				t.Errorf("console.log counted as a problem: %s", all)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("problems %q lack %q", all, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	if err := p.Screenshot(ctx, shot); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 100 || string(data[1:4]) != "PNG" {
		t.Errorf("screenshot is not a PNG (%d bytes)", len(data))
	}
}
