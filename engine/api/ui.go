package api

import (
	"net/http"
)

// uiRoutes serves the web UI (Config.UI, engine/webui) beside the API, if
// there is one: /, /ui and /ui/ lead to its page, /ui/{file} serves its
// files, /api/v3/docs the API reference page.
func (s *Server) uiRoutes() {
	ui := s.cfg.UI
	if ui == nil {
		return
	}
	files := ui.Handler()
	s.handle("GET /ui", redirectToUI)
	s.handle("GET /ui/", func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Path != "/ui/" {
			return notFound("no such page of the UI: " + r.URL.Path)
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/"
		files.ServeHTTP(w, r2)
		return nil
	})
	// The REST API's reference, rendered in the browser from openapi.json.
	s.handle("GET /api/v3/docs", func(w http.ResponseWriter, r *http.Request) error {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/apidocs.html"
		files.ServeHTTP(w, r2)
		return nil
	})
	s.handle("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("file")
		if !ui.Has(name) {
			return notFound("no such file of the UI: " + name)
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
		return nil
	})
}

// redirectToUI sends a browser to the UI's page.
func redirectToUI(w http.ResponseWriter, r *http.Request) error {
	http.Redirect(w, r, "/ui/", http.StatusFound)
	return nil
}
