// Package dashboard is the operator's web page of a Blanket server: the
// collector's estimates with their intervals, their series over periods,
// the privacy guarantee per period and over the horizon next to the plan's
// target, and the shuffler's pool fill against n_min.
//
// The page is static: HTML, CSS and JavaScript embedded in the binary
// (package embed), no chart library, nothing fetched from the network. It reads
// the servers' JSON API from the origin that serves it (GET /v1/plan,
// /v1/metrics, /v1/metrics/{name} of a collector, GET /v1/pools of a
// shuffler) and shows the panels of the roles it finds there, so the same
// page serves `blanket serve`, `blanket collector` and `blanket shuffler`.
//
//	mux := http.NewServeMux()
//	c.Register(mux)          // the collector's API
//	dashboard.Register(mux, dashboard.Roles{Collector: true}) // GET /, GET /dashboard/{file}
package dashboard

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
)

// Roles are the roles the server plays on the mux the page is registered
// on: the page asks only for their endpoints.
type Roles struct {
	// Collector: GET /v1/metrics and GET /v1/metrics/{name} are served.
	Collector bool `json:"collector"`
	// Shuffler: GET /v1/pools is served.
	Shuffler bool `json:"shuffler"`
}

//go:embed static
var static embed.FS

// Files are the page's assets: index.html, and the files it loads under
// /dashboard/.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return sub
}

// Register adds the page to mux: GET / (exactly) serves index.html, GET
// /dashboard/roles.json the roles and GET /dashboard/{file} the page's
// scripts and styles. Every server serves GET /v1/plan (a shuffler relays
// its collector's).
func Register(mux *http.ServeMux, roles Roles) {
	files := http.FileServerFS(Files())
	rolesJSON, _ := json.Marshal(roles)
	mux.HandleFunc("GET /dashboard/roles.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(rolesJSON)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, Files(), "index.html")
	})
	mux.Handle("GET /dashboard/", http.StripPrefix("/dashboard/", noDirs(files)))
}

// noDirs refuses directory listings.
func noDirs(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path[len(r.URL.Path)-1] == '/' {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
