package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// The `user` header as docs/security.md has it (issue 27 N3): behind an
// authenticating proxy (maestro api --trust-user-header) a missing or
// empty header is 401 (public routes still answer), two headers are 400
// (a proxy that appends must not let the client choose); in maestro dev no
// header is the caller anonymous, and two headers are 400 too.
func TestUserHeader(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	server := func(require bool) http.Handler {
		h, err := api.New(api.Config{DB: pool, Logger: discardLogger(), Definitions: defs,
			Runs: execution.New(pool, defs, 0), TrustUserHeader: true, RequireUserHeader: require})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	proxied, dev := server(true), server(false)
	for _, tc := range []struct {
		name    string
		h       http.Handler
		method  string
		path    string
		body    string
		headers []string // user header values, in order; nil for none
		want    int
	}{
		{"proxy: no header", proxied, "GET", "/api/v3/workflows", "", nil, 401},
		{"proxy: empty header", proxied, "GET", "/api/v3/workflows", "", []string{""}, 401},
		{"proxy: blank header", proxied, "GET", "/api/v3/workflows", "", []string{"  "}, 401},
		{"proxy: no header creates nothing", proxied, "POST", "/api/v3/workflows", simple("anon", "v1"), nil, 401},
		{"proxy: two headers", proxied, "GET", "/api/v3/workflows", "", []string{"mallory", "alice"}, 400},
		{"proxy: health needs no one", proxied, "GET", "/api/v3/health", "", nil, 200},
		{"proxy: one header", proxied, "GET", "/api/v3/workflows", "", []string{"alice"}, 200},
		{"dev: no header is anonymous", dev, "GET", "/api/v3/workflows", "", nil, 200},
		{"dev: two headers", dev, "GET", "/api/v3/workflows", "", []string{"a", "b"}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			for _, v := range tc.headers {
				req.Header.Add("user", v)
			}
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
}
