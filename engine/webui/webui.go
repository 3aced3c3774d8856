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
