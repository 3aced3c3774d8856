// Package webui is Maestro's web UI: static pages (plain ES modules, no
// build step) embedded in the binary and served by the REST API's handler
// under /ui/. The pages call the REST API from the browser; docs/ui.md
// describes them.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the UI's files; mount it under /ui/ with the prefix
// stripped. Files are revalidated on each load (small, and a new binary
// must not serve stale modules).
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory exists at build time
	}
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
		files.ServeHTTP(w, r)
	})
}

// Has reports whether name is one of the UI's files.
func Has(name string) bool {
	if name == "" || name == "." {
		return false
	}
	st, err := fs.Stat(static, "static/"+name)
	return err == nil && !st.IsDir()
}

// Files is the UI as a value (engine/api's Config.UI): Handler and Has.
type Files struct{}

// Handler is the package's Handler.
func (Files) Handler() http.Handler { return Handler() }

// Has is the package's Has.
func (Files) Has(name string) bool { return Has(name) }

// Local serves the UI's pages on this machine beside another handler that
// gets every other request (`maestro ui`, whose other requests go on to a
// deployed API): /ui and / lead to the page at /ui/, /ui/{file} serves the
// UI's files and /api/v3/docs the API reference page.
func Local(rest http.Handler) http.Handler {
	files := Handler()
	serve := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + name
			files.ServeHTTP(w, r2)
		}
	}
	toPage := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", toPage)
	mux.HandleFunc("GET /ui", toPage)
	mux.Handle("GET /ui/{$}", serve(""))
	mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) {
		if name := r.PathValue("file"); Has(name) {
			serve(name)(w, r)
			return
		}
		http.NotFound(w, r)
	})
	mux.Handle("GET /api/v3/docs", serve("apidocs.html"))
	mux.Handle("/", rest)
	return mux
}
