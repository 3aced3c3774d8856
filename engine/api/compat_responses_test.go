package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The shapes of Maestro's responses are kept in testdata/maestro-shapes:
// one file per response, its "shape" the response's keys with the JSON
// type of each value ("string", "number", "boolean", "object" for a
// free-form object whose keys are data (param names, statuses), "any"
// where Maestro's example has null; a list holds the shape of its
// elements). Each names the Maestro fixture it follows, which parts were
// collapsed to "object" and which keys were left out (a deliberate
// difference, docs/maestro-compatibility.md). TestMaestroShapesFollowFixtures
// checks the files against Maestro's fixtures; TestMaestroResponseShapes
// checks this API's answers against the files.

// shapeFile is one file of testdata/maestro-shapes.
type shapeFile struct {
	MaestroFixture string   `json:"maestro_fixture"`
	MaestroPath    string   `json:"maestro_path"`
	Endpoint       string   `json:"endpoint"`
	Collapsed      []string `json:"collapsed"`
	LeftOut        []string `json:"left_out"`
	// Optional are keys (dotted, from the top) that Maestro leaves out
	// when they have no value.
	Optional []string `json:"optional"`
	// Replaced are parts whose shape follows Maestro's code rather than
	// its fixture, where the two disagree (Note says why).
	Replaced map[string]any `json:"replaced"`
	Note     string         `json:"note"`
	Shape    any            `json:"shape"`
}

func readShape(t *testing.T, name string) shapeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "maestro-shapes", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f shapeFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// eventTypes are the kinds of Maestro's timeline events: a shape keeps
// the kind ("=LOG"), an answer's event must be of that kind, and a list
// of events is compared event by event with those of the shape's kind.
var eventTypes = map[string]bool{"LOG": true, "STATUS": true, "ACTION": true, "DETAILS": true}

// skeleton is the shape of a JSON value: its keys and the types of its
// leaves.
func skeleton(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if ev, ok := e.(string); ok && k == "type" && eventTypes[ev] {
				out[k] = "=" + ev // a timeline event's kind decides its other keys
				continue
			}
			out[k] = skeleton(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{skeleton(x[0])}
	case nil:
		return "any"
	case bool:
		return "boolean"
	case float64:
		return "number"
	default:
		return "string"
	}
}

// conform lists where got departs from the shape want: a key of want that
// got lacks, or a value of another JSON type. Keys of got that want does
// not name (this implementation's own fields) are allowed.
func conform(at string, want, got any, optional []string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want an object", at, jsonType(got))}
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(w)) {
			e, present := g[k]
			if !present {
				if w[k] != "any" && !slices.Contains(optional, strings.TrimPrefix(keyPath(at+"."+k), ".")) {
					out = append(out, fmt.Sprintf("%s.%s: missing", at, k))
				}
				continue
			}
			out = append(out, conform(at+"."+k, w[k], e, optional)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want a list", at, jsonType(got))}
		}
		if len(w) == 0 {
			return nil
		}
		var kind string
		if m, ok := w[0].(map[string]any); ok {
			kind, _ = m["type"].(string)
		}
		var out []string
		for i, e := range g {
			if m, ok := e.(map[string]any); ok && strings.HasPrefix(kind, "=") && "="+fmt.Sprint(m["type"]) != kind {
				continue // another kind of event
			}
			out = append(out, conform(fmt.Sprintf("%s[%d]", at, i), w[0], e, optional)...)
		}
		return out
	case string:
		if w == "any" || w == jsonType(got) || (strings.HasPrefix(w, "=") && got == w[1:]) {
			return nil
		}
		return []string{fmt.Sprintf("%s: got %s, want %s", at, jsonType(got), w)}
	}
	return []string{fmt.Sprintf("%s: bad shape %v", at, want)}
}

// keyPath is a conform location without list indexes.
func keyPath(at string) string {
	var b strings.Builder
	skip := false
	for _, r := range at {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	}
	return fmt.Sprintf("%T", v)
}

// TestMaestroShapesFollowFixtures checks every shape file against the
// Maestro fixture it names: the file holds exactly the fixture's keys and
// types, but for the parts it says it collapsed or left out.
func TestMaestroShapesFollowFixtures(t *testing.T) {
	repo := referenceRepo(t)
	files, err := filepath.Glob(filepath.Join("testdata", "maestro-shapes", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shape files: %v", err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			f := readShape(t, name)
			var fixture any
			if err := json.Unmarshal([]byte(referenceFile(t, repo, fixturesDir+f.MaestroFixture)), &fixture); err != nil {
				t.Fatal(err)
			}
			want := skeleton(fixture)
			if f.MaestroPath != "" {
				want = want.(map[string]any)[f.MaestroPath]
			}
			for _, p := range f.Collapsed {
				setAt(t, want, p, "object")
			}
			for _, p := range f.LeftOut {
				setAt(t, want, p, nil)
			}
			for p, v := range f.Replaced {
				setAt(t, want, p, v)
			}
			a, _ := json.Marshal(want)
			b, _ := json.Marshal(f.Shape)
			if string(a) != string(b) {
				t.Errorf("shape differs from Maestro's %s:\n got %s\nwant %s", f.MaestroFixture, b, a)
			}
		})
	}
}

// setAt sets the dotted path of a skeleton to v (a list there becomes a
// list of any elements; nil deletes it).
func setAt(t *testing.T, root any, path string, v any) {
	t.Helper()
	keys := strings.Split(path, ".")
	m, _ := root.(map[string]any)
	for _, k := range keys[:len(keys)-1] {
		m, _ = m[k].(map[string]any)
	}
	if _, ok := m[keys[len(keys)-1]]; m == nil || !ok {
		t.Fatalf("Maestro's fixture has no %s", path)
	}
	last := keys[len(keys)-1]
	if v == nil {
		delete(m, last)
		return
	}
	if _, isList := m[last].([]any); isList {
		v = []any{} // collapsed to a list of any elements
	}
	m[last] = v
}

// checkShape compares an answer with a shape file.
func checkShape(t *testing.T, name string, r response) {
	t.Helper()
	f := readShape(t, name)
	var got any
	if err := json.Unmarshal(r.raw, &got); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, d := range conform("", f.Shape, got, f.Optional) {
		t.Errorf("%s (%s): %s", name, f.Endpoint, d)
	}
}

// shapeWorkflow is pushed by TestMaestroResponseShapes: the properties
// and step of the workflow behind Maestro's create response, job.1
// sleeping long enough to be stopped while it runs.
const shapeWorkflow = `{
  "properties": {"owner": "tester", "run_strategy": {"rule": "PARALLEL", "workflow_concurrency": 5}, "step_concurrency": 10,
    "alerting": {"emails": ["tester@example.com"], "tct": {"completed_by_hour": 1, "tz": "UTC"}}},
  "workflow": {"id": "shape-wf", "name": "shapes", "description": "response shapes",
    "tags": [{"name": "team", "namespace": "PLATFORM"}],
    "params": {"foo": {"expression": "new DateTime(1569018000000).withZone(DateTimeZone.forID('UTC')).monthOfYear().getAsText();", "type": "STRING"}},
    "steps": [
      {"step": {"id": "job.1", "type": "Sleep", "failure_mode": "IGNORE_FAILURE",
        "transition": {"successors": {"job.2": "true"}},
        "retry_policy": {"error_retry_limit": 1, "platform_retry_limit": 1,
          "backoff": {"type": "FIXED_BACKOFF", "error_retry_backoff_in_secs": 1, "platform_retry_backoff_in_secs": 1}},
        "tags": [{"name": "sleepy", "namespace": "PLATFORM"}],
        "params": {"sleep_seconds": {"value": 30000, "type": "LONG"}}}},
      {"step": {"id": "job.2", "type": "NoOp"}}
    ]}}`

// TestMaestroResponseShapes calls every endpoint that has a Maestro
// response fixture and compares the answer, key by key and type by type,
// with Maestro's shape.
func TestMaestroResponseShapes(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	const wf = "/api/v3/workflows/shape-wf"
	created := e.send(http.MethodPost, "/api/v3/workflows", "tester", shapeWorkflow).expect(t, http.StatusOK)
	checkShape(t, "workflow-create-response", created)
	checkShape(t, "workflow-definition", e.send(http.MethodGet, wf+"/versions/1", "tester", "").expect(t, http.StatusOK))
	e.send(http.MethodPost, "/api/v3/workflows", "tester",
		strings.Replace(shapeWorkflow, `"response shapes"`, `"response shapes, version 2"`, 1)).expect(t, http.StatusOK)
	checkShape(t, "pagination-result", e.send(http.MethodGet, wf+"/versions/pagination?first=1", "tester", "").expect(t, http.StatusOK))
	checkShape(t, "workflow-properties-update-response", e.send(http.MethodPost, wf+"/properties", "tester",
		`{"owner": "tester", "run_strategy": {"rule": "PARALLEL"}, "step_concurrency": 10,
		  "alerting": {"emails": ["tester@example.com"], "tct": {"completed_by_hour": 1, "tz": "UTC"}}}`).expect(t, http.StatusOK))
	checkShape(t, "workflow-activate-response", e.send(http.MethodPut, wf+"/versions/1/actions/activate", "tester", "").expect(t, http.StatusOK))
	checkShape(t, "workflow-timeline", e.send(http.MethodGet, wf+"/timeline", "tester", "").expect(t, http.StatusOK))

	// Instance 1: job.1 stopped by a step action, then the step restarted.
	checkShape(t, "workflow-start-response", e.send(http.MethodPost, wf+"/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK))
	e.waitAttempt(wf+"/instances/1/runs/1/steps/job.1/attempts/latest", "RUNNING")
	checkShape(t, "step-stop-response", e.send(http.MethodPut, wf+"/instances/1/steps/job.1/actions/stop", "tester", "").expect(t, http.StatusOK))
	e.waitTerminalWithin(wf+"/instances/1", time.Minute)
	checkShape(t, "workflow-instance", e.send(http.MethodGet, wf+"/instances/1", "tester", "").expect(t, http.StatusOK))
	agg := e.send(http.MethodGet, wf+"/instances/1?aggregated=true", "tester", "").expect(t, http.StatusOK)
	if _, ok := agg.body["aggregated_info"]; !ok {
		t.Errorf("?aggregated=true has no aggregated_info: %s", agg.raw)
	} else {
		raw, _ := json.Marshal(agg.body["aggregated_info"])
		checkShape(t, "aggregated-info", response{raw: raw})
	}
	checkShape(t, "step-restart-response", e.send(http.MethodPost, wf+"/instances/1/steps/job.1/actions/restart", "tester", `{}`).expect(t, http.StatusOK))
	e.waitAttempt(wf+"/instances/1/runs/2/steps/job.1/attempts/latest", "RUNNING")
	checkShape(t, "workflow-instance-kill-response", e.send(http.MethodPut, wf+"/instances/1/actions/kill", "tester", "").expect(t, http.StatusOK))
	e.waitTerminalWithin(wf+"/instances/1", time.Minute)
	checkShape(t, "workflow-restart-response", e.send(http.MethodPost, wf+"/instances/1/actions/restart", "tester", `{}`).expect(t, http.StatusOK))

	// Instance 2: stopped as a whole.
	e.send(http.MethodPost, wf+"/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	e.waitAttempt(wf+"/instances/2/runs/1/steps/job.1/attempts/latest", "RUNNING")
	checkShape(t, "workflow-instance-stop-response", e.send(http.MethodPut, wf+"/instances/2/actions/stop", "tester", "").expect(t, http.StatusOK))
	e.send(http.MethodPost, "/api/v3/workflows", "tester", `{"workflow": {"id": "shape-fail", "steps": [
	  {"step": {"id": "job.1", "type": "Sleep", "params": {"sleep_seconds": {"expression": "'soon'", "type": "STRING"}}}}]}}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/shape-fail/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	if r := e.waitTerminalWithin("/api/v3/workflows/shape-fail/instances/1", time.Minute); r.body["status"] != "FAILED" {
		t.Fatalf("shape-fail ended %v", r.body["status"])
	}
	checkShape(t, "workflow-instance-unblock-response",
		e.send(http.MethodPut, "/api/v3/workflows/shape-fail/instances/1/actions/unblock", "tester", "").expect(t, http.StatusOK))
	checkShape(t, "workflow-overview-response", e.send(http.MethodGet, wf+"/overview", "tester", "").expect(t, http.StatusOK))

	// Breakpoints: set on job.2, a run pauses there, the delete resumes it.
	checkShape(t, "step-breakpoint", e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "tester",
		`{"workflow_id": "shape-wf", "step_id": "job.2"}`).expect(t, http.StatusOK))
	e.send(http.MethodPost, "/api/v3/workflows", "tester",
		`{"workflow": {"id": "shape-bp", "steps": [{"step": {"id": "job.2", "type": "NoOp", "tags": [{"name": "bp"}],
		  "transition": {"successors": {"job.3": "1 < 2"}}}}, {"step": {"id": "job.3", "type": "NoOp"}}]}}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "tester",
		`{"workflow_id": "shape-bp", "step_id": "job.2"}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/shape-bp/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	e.waitAttempt("/api/v3/workflows/shape-bp/instances/1/runs/1/steps/job.2/attempts/latest", "PAUSED")
	paused := e.send(http.MethodGet, "/api/v3/workflows/steps/breakpoints/paused-step-attempts?workflow_id=shape-bp&step_id=job.2", "tester", "").expect(t, http.StatusOK)
	if len(paused.list) != 1 {
		t.Fatalf("paused attempts: %s", paused.raw)
	}
	raw, _ := json.Marshal(paused.list[0])
	checkShape(t, "paused-step-attempt", response{raw: raw})
	checkShape(t, "breakpoint-delete-response", e.send(http.MethodDelete,
		"/api/v3/workflows/steps/breakpoints?workflow_id=shape-bp&step_id=job.2", "tester", "").expect(t, http.StatusOK))
	e.waitTerminalWithin("/api/v3/workflows/shape-bp/instances/1", time.Minute)
	checkShape(t, "step-instance", e.send(http.MethodGet,
		"/api/v3/workflows/shape-bp/instances/1/runs/1/steps/job.2/attempts/latest", "tester", "").expect(t, http.StatusOK))
	checkShape(t, "step-instance", e.send(http.MethodGet, // no breakpoint, no tags, no successors
		"/api/v3/workflows/shape-bp/instances/1/runs/1/steps/job.3/attempts/latest", "tester", "").expect(t, http.StatusOK))
	checkShape(t, "workflow-deactivate-response", e.send(http.MethodPut, wf+"/actions/deactivate", "tester", "").expect(t, http.StatusOK))

	// Signals, tag permits and job templates.
	checkShape(t, "signal-instance", e.send(http.MethodPost, "/api/v3/signals", "tester",
		`{"name": "shape-signal", "params": {"foo": "bar", "watermark": 1}, "payload": {"extra": {"source": {"id": "s3"}}}}`).expect(t, http.StatusOK))
	checkShape(t, "signal-instance", e.send(http.MethodGet, "/api/v3/signals/shape-signal/instances/1", "tester", "").expect(t, http.StatusOK))
	e.send(http.MethodPost, "/api/v3/tag-permits", "tester", `{"tag": "shape-tag", "max_allowed": 3, "source": "api"}`).expect(t, http.StatusOK)
	checkShape(t, "tag-permit", e.send(http.MethodGet, "/api/v3/tag-permits/shape-tag", "tester", "").expect(t, http.StatusOK))
	e.send(http.MethodPost, "/api/v3/job-templates", "tester", `{
	  "owner": "tester", "status": "alpha", "support": "#shapes", "test_workflows": ["shape-wf"],
	  "git_info": {"origin": "git@example.com:shapes.git", "branch": "main", "sha": "abc", "path": "t.json", "author": "tester", "timestamp": 1, "uncommitted_changes": false},
	  "definition": {"job_type": "shape-job", "step_type": "NoOp", "version": "v1", "description": "a template",
	    "tags": [{"name": "t", "namespace": "PLATFORM"}], "inherit_from": {}, "params": {"script": {"value": "echo", "type": "STRING"}}}}`).expect(t, http.StatusOK)
	checkShape(t, "job-template", e.send(http.MethodGet, "/api/v3/job-templates/shape-job?version=v1", "tester", "").expect(t, http.StatusOK))
}
