package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Rough edges a newcomer (or an attacker) met (issue 27): a path with dot
// segments is a 400, not a redirect into another route; a method no route
// of the path serves is a 405 naming the allowed ones; a request_id with a
// lone surrogate escape is a 400, not a collision with another such id.
func TestRoughEdges(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for _, c := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{"GET", "/api/v3/../api/v3/health", 400, ""},
		{"GET", "/api/v3/workflows/%2e%2e/health", 400, ""},
		{"GET", "/api/v3//workflows", 400, ""},
		{"FOO", "/api/v3/workflows", 405, "GET, HEAD, POST"},
		{"PATCH", "/api/v3/workflows/wf", 405, "DELETE"},
		{"GET", "/api/v3/nothing-here", 404, ""},
		{"GET", "/api/v3/health", 200, ""},
	} {
		req := httptest.NewRequest(c.method, "http://x"+c.path, nil)
		req.Header.Set("user", "alice")
		r := e.serve(req)
		if r.code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.code, r.raw, c.want)
		}
		if c.allow != "" {
			rec := httptest.NewRecorder()
			req = httptest.NewRequest(c.method, "http://x"+c.path, nil)
			req.Header.Set("user", "alice")
			e.h.ServeHTTP(rec, req)
			if got := rec.Header().Get("Allow"); got != c.allow {
				t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
			}
		}
	}

	e.send(http.MethodPost, "/api/v3/workflows", "alice", simple("wf", "v1")).expect(t, http.StatusOK)
	for _, id := range []string{`\ud800`, `\udbff`, `x\uFFFD`} {
		r := e.send(http.MethodPost, "/api/v3/workflows/wf/versions/latest/actions/start", "alice", `{"request_id":"`+id+`"}`)
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.raw), "U+FFFD") {
			t.Errorf("request_id %s: %d %s", id, r.code, r.raw)
		}
	}
	r := e.send(http.MethodPost, "/api/v3/signals", "alice", `{"name":"s","request_id":"\udc00"}`)
	if r.code != http.StatusBadRequest {
		t.Errorf("signal request_id: %d %s", r.code, r.raw)
	}
}

// Not-found messages name what was asked for: the latest run of an
// instance is the instance, not a "run 0" (issue 27).
func TestNotFoundMessagesNameWhatWasAsked(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", simple("sdk-wf", "v1")).expect(t, http.StatusOK)
	for path, want := range map[string]string{
		"/api/v3/workflows/sdk-wf/instances/99":                                "workflow instance sdk-wf/99: not found",
		"/api/v3/workflows/sdk-wf/instances/99/runs/2":                         "run 2 of workflow instance sdk-wf/99: not found",
		"/api/v3/workflows/sdk-wf/instances/99/runs/2/steps/a/attempts/latest": "step a of run 2 of workflow instance sdk-wf/99: not found",
		"/api/v3/workflows/sdk-wf/instances/99/runs/2/steps/a/attempts/3":      "attempt 3 of step a of run 2 of workflow instance sdk-wf/99: not found",
	} {
		r := e.send(http.MethodGet, path, "alice", "").expect(t, http.StatusNotFound)
		if msg, _ := r.body["message"].(string); msg != want || strings.Contains(msg, "run 0") {
			t.Errorf("%s: message %q, want %q", path, msg, want)
		}
	}
}

// A DOUBLE written as a string (Maestro's sample-wf-params.json writes
// "10.229999999999") is accepted at push and evaluates as the number.
func TestDoubleWrittenAsString(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"workflow":{"id":"dbl","params":{
		"d":{"type":"DOUBLE","value":"10.229999999999"},"twice":{"type":"DOUBLE","expression":"d * 2"}},
		"steps":[{"step":{"id":"a","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows/dbl/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	done := e.waitTerminal("/api/v3/workflows/dbl/instances/1")
	params, _ := done.body["params"].(map[string]any)
	twice, _ := params["twice"].(map[string]any)
	if done.body["status"] != "SUCCEEDED" || twice["evaluated_result"] != 20.459999999998 {
		t.Fatalf("run %s", done.raw)
	}
}

// A job template's tag object may carry fields of its own, as Maestro's
// sample-job-template-1.json does ({"name": ..., "foo": ...}); they are
// kept as the tag's attributes (issue 27: it was a 400).
func TestJobTemplateTagWithExtraField(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/job-templates", "alice", `{"owner":{"name":"alice"},"status":"ACTIVE","support":"data-eng",
		"definition":{"job_type":"etl","step_type":"NoOp","version":"default",
		  "tags":[{"name":"tier-1","namespace":"PLATFORM","foo":"bar"},"plain"]}}`).expect(t, http.StatusOK)
	got := e.send(http.MethodGet, "/api/v3/job-templates/etl", "alice", "").expect(t, http.StatusOK)
	if !strings.Contains(string(got.raw), `"foo":"bar"`) || !strings.Contains(string(got.raw), `"plain"`) {
		t.Fatalf("template %s", got.raw)
	}
}
