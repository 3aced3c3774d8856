package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes every endpoint of the API (OpenAPI 3.1). The
// test in openapi_test.go keeps it in step with the routes.
//
//go:embed openapi.json
var openAPIDocument []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument) // the client went away; nothing to report
	return nil
}
