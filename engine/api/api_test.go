package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/dbtest"
)

func newServer(t *testing.T) http.Handler {
	t.Helper()
	return newTestServer(t).h
}

func TestNewRequiresItsDependencies(t *testing.T) {
	t.Parallel()
	if _, err := api.New(api.Config{DB: dbtest.Pool(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
		t.Fatal("api.New accepted a config without Definitions and Runs")
	}
}

func do(t *testing.T, h http.Handler, method, path string, body []byte) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var m map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, path, rec.Body.String())
		}
	}
	return rec, m
}

func TestHealth(t *testing.T) {
	t.Parallel()
	rec, body := do(t, newServer(t), http.MethodGet, "/api/v3/health", nil)
	if rec.Code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("health = %d %v", rec.Code, body)
	}
}

func TestUnknownRouteIsJSONError(t *testing.T) {
	t.Parallel()
	rec, body := do(t, newServer(t), http.MethodGet, "/api/v3/nowhere", nil)
	if rec.Code != http.StatusNotFound || body["status"] != "NOT_FOUND" || body["retryable"] != false {
		t.Fatalf("got %d %v", rec.Code, body)
	}
	if _, ok := body["errors"].([]any); !ok {
		t.Fatalf("errors must be a JSON array, got %v", body["errors"])
	}
}

func TestOversizedBodyIs413(t *testing.T) {
	t.Parallel()
	big := []byte(`{"x":"` + strings.Repeat("a", api.MaxBodyBytes) + `"}`)
	rec, body := do(t, newServer(t), http.MethodPost, "/api/v3/workflows", big)
	if rec.Code != http.StatusRequestEntityTooLarge || body["status"] != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("got %d %v", rec.Code, body)
	}
}

// Input PostgreSQL cannot store is the client's error, never a 500: found by
// fuzzing the API from its OpenAPI document (schemathesis).
func TestUnstorableInputIsBadRequest(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"workflow":{"id":"wf","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	e.send(http.MethodGet, "/api/v3/workflows/steps/breakpoints?workflowId=%00x&stepId=s", "alice", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodGet, "/api/v3/workflows/wf%FF/instances", "alice", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"workflow":{"id":"nul","description":"a\u0000b","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, http.StatusBadRequest)
	// A cursor beyond 32 bits is a valid bigint: an empty page, not an error.
	page := e.send(http.MethodGet, "/api/v3/workflows/wf/instances?limit=19&cursor=3643668328579414", "alice", "").expect(t, http.StatusOK)
	if items := page.body["elements"].([]any); len(items) != 0 {
		t.Errorf("items %v", items)
	}
}
