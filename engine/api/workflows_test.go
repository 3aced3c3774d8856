package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/webui"
)

// testEnv is an API server on its own database.
type testEnv struct {
	t    testing.TB
	pool *pgxpool.Pool
	defs *definition.Store
	h    http.Handler
}

const admin = "root"

func newTestServer(t testing.TB, opts ...definition.Option) *testEnv {
	t.Helper()
	return newTestServerOn(t, dbtest.Pool(t), opts...)
}

func newTestServerOn(t testing.TB, pool *pgxpool.Pool, opts ...definition.Option) *testEnv {
	t.Helper()
	defs := definition.NewStore(pool, opts...)
	srv, err := api.New(api.Config{
		DB: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Definitions: defs, Runs: execution.New(pool, defs, 0),
		Admins: []string{admin}, TrustUserHeader: true, UI: webui.Files{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, pool: pool, defs: defs, h: srv}
}

// response is a decoded answer: body when it is a JSON object, list when
// it is an array, str when it is a string.
type response struct {
	code int
	body map[string]any
	list []any
	str  string
	raw  []byte
}

// send calls the API as user ("" for no user header).
func (e *testEnv) send(method, path, user, body string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if user != "" {
		req.Header.Set("user", user)
	}
	return e.serve(req)
}

func (e *testEnv) serve(req *http.Request) response {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	r := response{code: rec.Code, raw: rec.Body.Bytes()}
	var v any
	if err := json.Unmarshal(r.raw, &v); err != nil {
		e.t.Fatalf("%s %s: body is not JSON: %q", req.Method, req.URL, r.raw)
	}
	switch x := v.(type) {
	case map[string]any:
		r.body = x
	case []any:
		r.list = x
	case string:
		r.str = x
	default:
		e.t.Fatalf("%s %s: body is neither an object, an array nor a string: %q", req.Method, req.URL, r.raw)
	}
	if rec.Code >= 400 {
		checkErrorBody(e.t, req, r)
	}
	return r
}

// checkErrorBody checks the shape every error shares.
func checkErrorBody(t testing.TB, req *http.Request, r response) {
	t.Helper()
	_, isString := r.body["status"].(string)
	_, hasMessage := r.body["message"].(string)
	_, isList := r.body["errors"].([]any)
	_, isBool := r.body["retryable"].(bool)
	if !isString || !hasMessage || !isList || !isBool {
		t.Fatalf("%s %s: error body %s lacks status, message, errors or retryable", req.Method, req.URL, r.raw)
	}
}

// expect fails unless the answer has the status code.
func (r response) expect(t testing.TB, code int) response {
	t.Helper()
	if r.code != code {
		t.Fatalf("got %d, want %d: %s", r.code, code, r.raw)
	}
	return r
}

// errorsText joins the errors list of an error body.
func (r response) errorsText() string {
	var parts []string
	for _, e := range r.body["errors"].([]any) {
		parts = append(parts, e.(string))
	}
	return strings.Join(parts, "\n")
}

// wd returns the WorkflowDefinition in an answer: a push's
// workflow_definition, else the answer itself (a version read).
func (r response) wd(t testing.TB) response {
	t.Helper()
	d, ok := r.body["workflow_definition"].(map[string]any)
	if !ok {
		return r
	}
	raw, _ := json.Marshal(d)
	return response{code: r.code, body: d, raw: raw}
}

// version is the version number of a push's or a version read's answer.
func (r response) version(t testing.TB) int64 {
	t.Helper()
	return r.wd(t).num(t, "metadata.workflow_version_id")
}

// num reads a JSON number at a dotted path.
func (r response) num(t testing.TB, path string) int64 {
	t.Helper()
	v := r.get(t, path)
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%s is %v (%T), not a number, in %s", path, v, v, r.raw)
	}
	return int64(f)
}

func (r response) get(t testing.TB, path string) any {
	t.Helper()
	var cur any = r.body
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object in %s", path, cur, r.raw)
		}
		cur = m[k]
	}
	return cur
}

// tenSteps is a realistic Maestro definition: a ten-step DAG with
// parameters, SEL expressions, conditions, retries and properties.
func tenSteps(id, owner, variant string) string {
	return fmt.Sprintf(`{
  "properties": {"owner": %q, "run_strategy": "sequential", "step_concurrency": 10, "alerting_disabled": false},
  "workflow": {
    "id": %q,
    "name": "Nightly sales pipeline",
    "description": "Extracts orders and customers, joins, aggregates and publishes the daily report (%s).",
    "tags": ["sales", {"name": "tier-1", "namespace": "USER_DEFINED"}],
    "timeout": "12h",
    "criticality": "HIGH",
    "params": {
      "run_month": {"expression": "new DateTime().monthOfYear().getAsText();", "type": "STRING"},
      "threshold": {"value": 1000, "type": "LONG"},
      "regions": {"value": ["us", "eu", "apac"], "type": "STRING_ARRAY"}
    },
    "steps": [
      {"step": {"id": "extract", "type": "NoOp", "tags": ["io"],
        "retry_policy": {"error_retry_limit": 3, "backoff": {"type": "EXPONENTIAL_BACKOFF", "error_retry_backoff_in_secs": 30, "error_retry_exponent": 2}},
        "transition": {"successors": {"clean.orders": "true", "clean.customers": "true"}}}},
      {"step": {"id": "clean.orders", "type": "NoOp", "params": {"table": {"value": "orders", "type": "STRING"}},
        "transition": {"successors": {"join": "true"}}}},
      {"step": {"id": "clean.customers", "type": "NoOp", "timeout": "2h",
        "transition": {"successors": {"join": "true"}}}},
      {"step": {"id": "join", "type": "NoOp", "failure_mode": "FAIL_IMMEDIATELY",
        "transition": {"successors": {"agg.region": "threshold > 0", "agg.product": "true"}}}},
      {"step": {"id": "agg.region", "type": "NoOp", "transition": {"successors": {"report": "true"}}}},
      {"step": {"id": "agg.product", "type": "NoOp", "transition": {"successors": {"report": "true", "audit": "true"}}}},
      {"step": {"id": "audit", "type": "NoOp", "failure_mode": "IGNORE_FAILURE"}},
      {"step": {"id": "report", "type": "Sleep", "sleep_seconds": 5, "transition": {"successors": {"publish": "true"}}}},
      {"step": {"id": "publish", "type": "NoOp",
        "params": {"target": {"expression": "'s3://reports/' + run_month", "type": "STRING"}},
        "transition": {"successors": {"notify": "true"}}}},
      {"step": {"id": "notify", "type": "NoOp"}}
    ]
  }
}`, owner, id, variant)
}

// simple is a one-step definition; variant changes its description.
func simple(id, variant string, extra ...string) string {
	tail := ""
	if len(extra) > 0 {
		tail = ", " + strings.Join(extra, ", ")
	}
	return fmt.Sprintf(`{"workflow": {"id": %q, "description": %q, "steps": [{"step": {"id": "s1", "type": "NoOp"}}]}%s}`,
		id, variant, tail)
}

func TestCreateWorkflow(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send("POST", "/api/v3/workflows", "alice", tenSteps("sales.nightly", "alice", "v1")).expect(t, 200)
	d := r.wd(t)
	if d.get(t, "metadata.workflow_id") != "sales.nightly" || r.version(t) != 1 || r.body["created"] != true ||
		d.body["is_active"] != true || d.body["is_latest"] != true || d.body["is_default"] != true ||
		r.num(t, "active_version_id") != 1 || r.num(t, "latest_version_id") != 1 ||
		d.get(t, "metadata.version_author") != "alice" || d.get(t, "activated_by") != "alice" {
		t.Fatalf("unexpected create response %s", r.raw)
	}
	if d.get(t, "workflow.id") != "sales.nightly" || len(d.get(t, "workflow.steps").([]any)) != 10 {
		t.Fatalf("definition not echoed: %s", r.raw)
	}
	if d.num(t, "properties_snapshot.snapshot_version") != 1 || d.get(t, "properties_snapshot.owner") != "alice" ||
		d.get(t, "properties_snapshot.run_strategy.rule") != "SEQUENTIAL" || d.get(t, "properties_snapshot.author") != "alice" {
		t.Fatalf("unexpected properties snapshot in %s", r.raw)
	}
	// Times are epoch milliseconds, as Maestro's.
	if ct := d.num(t, "metadata.create_time"); ct < time.Now().Add(-time.Hour).UnixMilli() || ct > time.Now().Add(time.Hour).UnixMilli() {
		t.Fatalf("create_time %d is not epoch milliseconds", ct)
	}
	got := e.send("GET", "/api/v3/workflows/sales.nightly/versions/1", "", "").expect(t, 200)
	if got.body["created"] != nil || got.body["workflow_definition"] != nil {
		t.Fatalf("GET answers the WorkflowDefinition itself: %s", got.raw)
	}
	if !jsonEqual(t, got.get(t, "workflow"), d.get(t, "workflow")) {
		t.Fatalf("stored definition differs:\n%s\n%s", got.raw, r.raw)
	}
	// The definition comes back in Maestro's field order, not JSONB's.
	if !bytes.Contains(got.raw, []byte(`"workflow":{"id":"sales.nightly","name":`)) {
		t.Fatalf("definition field order lost: %s", got.raw)
	}
}

func TestCreateWithoutCallerIsAnonymous(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send("POST", "/api/v3/workflows", "", simple("anon", "a")).expect(t, 200).wd(t)
	if r.get(t, "metadata.version_author") != definition.Anonymous || r.get(t, "properties_snapshot.author") != definition.Anonymous {
		t.Fatalf("caller should be anonymous: %s", r.raw)
	}
	o := e.send("GET", "/api/v3/workflows/anon/overview", "", "").expect(t, 200)
	if o.body["owner"] != definition.Anonymous {
		t.Fatalf("owner should fall back to the creator: %s", o.raw)
	}
}

func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestUnchangedPushReturnsSameVersion(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v1")).expect(t, 200)
	// Same definition with keys reordered and whitespace changed.
	var generic map[string]any
	if err := json.Unmarshal([]byte(tenSteps("wf", "alice", "v1")), &generic); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(generic)
	// Only the owner may push, even an unchanged definition.
	e.send("POST", "/api/v3/workflows", "bob", string(compact)).expect(t, 403)
	r := e.send("POST", "/api/v3/workflows", "alice", string(compact)).expect(t, 200)
	if r.body["created"] != false || r.version(t) != 1 || r.wd(t).get(t, "metadata.version_author") != "alice" {
		t.Fatalf("unchanged push should return version 1: %s", r.raw)
	}
	page := e.send("GET", "/api/v3/workflows/wf/versions", "", "").expect(t, 200)
	if n := len(page.body["items"].([]any)); n != 1 {
		t.Fatalf("want 1 version, got %d: %s", n, page.raw)
	}
	// A change makes version 2; pushing version 1's content again is a
	// change too (it is compared with the latest version) and makes 3.
	e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v2")).expect(t, 200)
	r = e.send("POST", "/api/v3/workflows", "alice", tenSteps("wf", "alice", "v1")).expect(t, 200)
	if r.version(t) != 3 || r.num(t, "active_version_id") != 3 || r.body["created"] != true {
		t.Fatalf("revert should be version 3: %s", r.raw)
	}
}

func TestIsActiveFalseKeepsActiveVersion(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send("POST", "/api/v3/workflows", "alice", simple("wf", "one")).expect(t, 200)
	r := e.send("POST", "/api/v3/workflows", "alice", simple("wf", "two", `"is_active": false`)).expect(t, 200)
	if r.version(t) != 2 || r.wd(t).body["is_active"] != false || r.num(t, "active_version_id") != 1 ||
		r.wd(t).body["is_default"] != false || r.wd(t).body["is_latest"] != true || r.wd(t).body["activate_time"] != nil {
		t.Fatalf("inactive push changed the active version: %s", r.raw)
	}
	for sel, want := range map[string]int64{"active": 1, "default": 1, "latest": 2, "2": 2} {
		got := e.send("GET", "/api/v3/workflows/wf/versions/"+sel, "", "").expect(t, 200)
		if got.version(t) != want {
			t.Fatalf("versions/%s = %d, want %d", sel, got.version(t), want)
		}
	}
	// Pushing version 2 unchanged without is_active changes nothing;
	// with is_active true it activates it.
	r = e.send("POST", "/api/v3/workflows", "alice", simple("wf", "two")).expect(t, 200)
	if r.num(t, "active_version_id") != 1 {
		t.Fatalf("unchanged push without is_active activated: %s", r.raw)
	}
	r = e.send("POST", "/api/v3/workflows", "alice", simple("wf", "two", `"is_active": true`)).expect(t, 200)
	if r.body["created"] != false || r.wd(t).body["is_active"] != true || r.num(t, "active_version_id") != 2 ||
		r.wd(t).body["activate_time"] == nil {
		t.Fatalf("unchanged push with is_active true should activate version 2: %s", r.raw)
	}
	// A first version pushed inactive leaves the workflow inactive.
	r = e.send("POST", "/api/v3/workflows", "alice", simple("staged", "x", `"is_active": false`)).expect(t, 200)
	if r.body["active_version_id"] != nil || r.wd(t).body["is_active"] != false || r.wd(t).body["is_default"] != true {
		t.Fatalf("want no active version: %s", r.raw)
	}
	e.send("GET", "/api/v3/workflows/staged/versions/active", "", "").expect(t, 404)
	if e.send("GET", "/api/v3/workflows/staged/versions/default", "", "").expect(t, 200).version(t) != 1 {
		t.Fatal("default must fall back to the latest version")
	}
}

func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for name, body := range map[string]string{
		"truncated":    `{"workflow": {"id": "wf", "steps": [`,
		"trailing":     `{"workflow": {"id": "wf", "steps": []}} {}`,
		"not object":   `[1, 2]`,
		"bad literal":  `{"workflow": {"id": wf}}`,
		"wrong type":   `{"workflow": {"id": 12, "steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`,
		"steps object": `{"workflow": {"id": "wf", "steps": {"step": {"id": "a"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := e.send("POST", "/api/v3/workflows", "alice", body).expect(t, 400)
			if r.body["status"] != "BAD_REQUEST" || r.body["retryable"] != false || len(r.body["errors"].([]any)) == 0 {
				t.Fatalf("bad error body: %s", r.raw)
			}
		})
	}
	r := e.send("POST", "/api/v3/workflows", "alice", "{\n  \"workflow\": {\n    \"id\": \"wf\",,\n  }\n}").expect(t, 400)
	if !strings.Contains(r.errorsText(), "line 3") {
		t.Fatalf("malformed JSON should be located by line: %s", r.raw)
	}
	e.send("GET", "/api/v3/workflows/wf/versions/latest", "", "").expect(t, 404)
}

func TestEmptyBody(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for _, path := range []string{"/api/v3/workflows", "/api/v3/workflows/yaml"} {
		r := e.send("POST", path, "alice", "").expect(t, 400)
		if !strings.Contains(r.body["message"].(string), "empty") {
			t.Fatalf("%s: %s", path, r.raw)
		}
	}
}

func TestUnknownFieldsAreListed(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	// A top-level field is the version's metadata, as in Maestro; inside
	// properties and workflow every field is checked.
	body := `{"properties": {"owner": "alice", "colour": "red"}, "is_activ": true,
	  "workflow": {"id": "wf", "nmae": "typo", "steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`
	r := e.send("POST", "/api/v3/workflows", "alice", body).expect(t, 400)
	errs := r.errorsText()
	for _, want := range []string{"properties.colour", "workflow.nmae"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors should name %s:\n%s", want, errs)
		}
	}
	if !strings.Contains(r.body["message"].(string), "2 problems") {
		t.Errorf("message should count the problems: %s", r.body["message"])
	}
	// Fields a typed step does not define are checked against its type.
	body = `{"workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "NoOp", "retry_polcy": {}}},
	  {"step": {"id": "b", "type": "Sleep", "sleep_seconds": 5, "sleep_minutes": 1}}]}}`
	r = e.send("POST", "/api/v3/workflows", "alice", body).expect(t, 400)
	for _, want := range []string{"workflow.steps[0].step.retry_polcy", "workflow.steps[1].step.sleep_minutes"} {
		if !strings.Contains(r.errorsText(), want) {
			t.Errorf("errors should name %s:\n%s", want, r.errorsText())
		}
	}
}

func TestCyclicDAGIsRejected(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	body := `{"workflow": {"id": "cyclic", "steps": [
	  {"step": {"id": "a", "type": "NoOp", "transition": {"successors": {"b": "true"}}}},
	  {"step": {"id": "b", "type": "NoOp", "transition": {"successors": {"c": "true"}}}},
	  {"step": {"id": "c", "type": "NoOp", "transition": {"successors": {"a": "true"}}}}]}}`
	for _, path := range []string{"/api/v3/workflows", "/api/v3/workflows/actions/validate"} {
		method := "POST"
		if strings.Contains(path, "validate") {
			method = "PUT"
		}
		r := e.send(method, path, "alice", body).expect(t, 400)
		if !strings.Contains(strings.ToLower(r.errorsText()), "cycle") {
			t.Fatalf("%s: cycle not reported: %s", path, r.raw)
		}
	}
	e.send("GET", "/api/v3/workflows/cyclic/overview", "", "").expect(t, 404)
}

// TestInvalidDefinitions rejects Maestro-style definitions that break a
// rule, naming the offending element.
func TestInvalidDefinitions(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	cases := []struct {
		name, body string
		want       []string
	}{
		{"missing id", `{"workflow": {"steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`, []string{"workflow.id"}},
		{"no steps", `{"workflow": {"id": "wf", "steps": []}}`, []string{"workflow.steps"}},
		{"duplicate step ids", `{"workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "NoOp"}}, {"step": {"id": "a", "type": "NoOp"}}]}}`,
			[]string{"workflow.steps[1]"}},
		{"unknown successor", `{"workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "NoOp", "transition": {"successors": {"ghost": "true"}}}}]}}`,
			[]string{"ghost"}},
		{"bad SEL", `{"workflow": {"id": "wf", "params": {"p": {"expression": "1 +* 2", "type": "LONG"}}, "steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`,
			[]string{"workflow.params.p"}},
		{"bad condition", `{"workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "NoOp", "transition": {"successors": {"b": "x >"}}}}, {"step": {"id": "b", "type": "NoOp"}}]}}`,
			[]string{"workflow.steps[0].step.transition.successors"}},
		{"unknown step type", `{"workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "Teleport"}}]}}`,
			[]string{"workflow.steps[0].step.type"}},
		{"bad param type", `{"workflow": {"id": "wf", "params": {"p": {"value": 1, "type": "COMPLEX"}}, "steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`,
			[]string{"workflow.params.p"}},
		{"bad run strategy", `{"properties": {"run_strategy": "sometimes"}, "workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`,
			[]string{"properties.run_strategy"}},
		{"two wrappers", `{"workflow": {"id": "wf", "steps": [{"step": {"id": "a", "type": "NoOp"}, "foreach": {"id": "b", "steps": []}}]}}`,
			[]string{"workflow.steps[0]"}},
		{"several problems", `{"workflow": {"id": "wf", "criticality": "URGENT", "steps": [{"step": {"id": "a", "type": "NoOp", "failure_mode": "PANIC"}}]}}`,
			[]string{"workflow.criticality", "workflow.steps[0].step.failure_mode"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/api/v3/workflows", "/api/v3/workflows/actions/validate"} {
				method := map[bool]string{true: "PUT", false: "POST"}[strings.Contains(path, "validate")]
				r := e.send(method, path, "alice", c.body).expect(t, 400)
				for _, w := range c.want {
					if !strings.Contains(r.errorsText(), w) {
						t.Errorf("%s: errors should mention %s: %s", path, w, r.raw)
					}
				}
			}
		})
	}
	// Nothing was stored.
	e.send("GET", "/api/v3/workflows/wf/versions/latest", "", "").expect(t, 404)
}

// samples are Maestro-shaped definitions of each kind, in Maestro's JSON.
var samples = map[string]string{
	"dag": `{
  "properties": {"owner": "tester", "run_strategy": "sequential"},
  "workflow": {
    "id": "sample-dag-test-1", "name": "Test workflow 01", "description": "a DAG",
    "params": {"foo": {"expression": "new DateTime().monthOfYear().getAsText();", "type": "STRING"}},
    "steps": [
      {"step": {"id": "job.1", "type": "NoOp", "transition": {"successors": {"job.5": "true", "job.2": "true"}}}},
      {"step": {"id": "job.2", "type": "NoOp", "transition": {"successors": {"job.3": "true"}}}},
      {"step": {"id": "job.3", "type": "NoOp", "transition": {"successors": {"job.4": "true"}}}},
      {"step": {"id": "job.4", "type": "NoOp", "transition": {}}},
      {"step": {"id": "job.5", "type": "NoOp", "transition": {"successors": {"job.3": "true"}}}}
    ]}}`,
	"foreach": `{
  "properties": {"owner": "ml", "run_strategy": {"rule": "PARALLEL", "workflow_concurrency": 4}},
  "workflow": {
    "id": "sample-foreach", "instance_step_concurrency": 20,
    "steps": [
      {"step": {"id": "prepare", "type": "NoOp", "transition": {"successors": {"sweep": "true"}}}},
      {"foreach": {"id": "sweep", "concurrency": 3,
        "params": {"loop_params": {"type": "MAP", "value": {
          "day": {"expression": "Util.dateIntsBetween(20240101, 20240108, 1);", "type": "LONG_ARRAY"},
          "lr": {"value": [0.1, 0.01], "type": "DOUBLE_ARRAY"}}}},
        "steps": [
          {"step": {"id": "train", "type": "NoOp", "retry_policy": {"error_retry_limit": 2, "platform_retry_limit": 5},
            "transition": {"successors": {"evaluate": "true"}}}},
          {"step": {"id": "evaluate", "type": "NoOp"}}]}}
    ]}}`,
	"subworkflow": `{
  "properties": {"owner": "etl"},
  "workflow": {
    "id": "sample-parent",
    "steps": [
      {"subworkflow": {"id": "call-child", "sync": true,
        "params": {"subworkflow_id": {"value": "child-workflow", "type": "STRING"},
                   "subworkflow_version": {"value": "latest", "type": "STRING"}}}}
    ]}}`,
	"while": `{
  "workflow": {
    "id": "sample-while",
    "steps": [
      {"while": {"id": "poll", "condition": "n < 10", "params": {"n": {"value": 0, "type": "LONG"}},
        "steps": [{"step": {"id": "check", "type": "Sleep", "sleep_seconds": 60}}]}}
    ]}}`,
	"conditional": `{
  "properties": {"owner": "analytics", "run_strategy": "last_only", "step_concurrency": 5},
  "workflow": {
    "id": "sample-conditional", "timeout": "2h", "criticality": "LOW",
    "params": {"threshold": {"value": 42, "type": "LONG"}, "rows": {"value": 7, "type": "LONG"}},
    "steps": [
      {"step": {"id": "check", "type": "NoOp", "transition": {"successors": {"remediate": "rows < threshold", "publish": "rows >= threshold"}}}},
      {"step": {"id": "remediate", "type": "NoOp", "failure_mode": "IGNORE_FAILURE", "transition": {"successors": {"publish": "true"}}}},
      {"step": {"id": "publish", "type": "NoOp"}}
    ]}}`,
	"triggers": `{
  "properties": {"owner": "ops", "time_trigger_disabled": false},
  "workflow": {
    "id": "sample-triggers",
    "time_triggers": [{"type": "CRON", "cron": "0 3 * * *", "timezone": "UTC"}],
    "signal_triggers": [{"definitions": {"table_updated": {"match_params": {"db": {"value": "sales", "operator": "="}}}}}],
    "steps": [{"step": {"id": "run", "type": "NoOp"}}]}}`,
}

func TestMaestroSamplesAreAccepted(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	for name, body := range samples {
		t.Run(name, func(t *testing.T) {
			v := e.send("PUT", "/api/v3/workflows/actions/validate", "alice", body).expect(t, 200)
			if v.body["type"] != "ACTION" || v.body["action"] != "VALIDATE" || v.body["author"] != "alice" {
				t.Fatalf("validate: %s", v.raw)
			}
			r := e.send("POST", "/api/v3/workflows", "alice", body).expect(t, 200).wd(t)
			id := r.get(t, "metadata.workflow_id").(string)
			got := e.send("GET", "/api/v3/workflows/"+id+"/versions/latest", "", "").expect(t, 200)
			if !jsonEqual(t, got.get(t, "workflow"), r.get(t, "workflow")) {
				t.Fatalf("read back differs:\n%s\n%s", got.raw, r.raw)
			}
			// Pushing what was read back is not a change.
			again := e.send("POST", "/api/v3/workflows", admin, fmt.Sprintf(`{"workflow": %s}`, mustJSON(t, got.get(t, "workflow")))).expect(t, 200)
			if again.body["created"] != false {
				t.Fatalf("pushing what was read back made a version: %s", again.raw)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidateWritesNothing(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send("PUT", "/api/v3/workflows/actions/validate", "alice", tenSteps("dry", "alice", "x")).expect(t, 200)
	if r.body["action"] != "VALIDATE" || r.body["message"] != "the workflow definition is valid." {
		t.Fatalf("validate: %s", r.raw)
	}
	e.send("GET", "/api/v3/workflows/dry/versions/latest", "", "").expect(t, 404)
	e.send("GET", "/api/v3/workflows/dry/timeline", "", "").expect(t, 404)
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_timeline`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("validate wrote a timeline (%d, %v)", n, err)
	}
}

const yamlDefinition = `
Workflow:
  id: sales.dsl
  name: Sales from the DSL
  owner: alice
  run_strategy: sequential
  threshold: 42
  '!month': "new DateTime().monthOfYear().getAsText();"
  jobs:
    - job:
        id: extract
        type: NoOp
        rows: 1200
    - job:
        id: check
        type: NoOp
        transition:
          - IF rows < threshold THEN remediate
          - OTHERWISE publish
    - job:
        id: remediate
        type: Sleep
        sleep_seconds: 10
        transition: [publish]
    - job:
        id: publish
        type: NoOp
`

func TestYAMLPush(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	v := e.send("PUT", "/api/v3/workflows/actions/validate/yaml", "alice", yamlDefinition).expect(t, 200)
	if v.body["action"] != "VALIDATE" {
		t.Fatalf("validate yaml: %s", v.raw)
	}
	r := e.send("POST", "/api/v3/workflows/yaml", "alice", yamlDefinition).expect(t, 200)
	if r.wd(t).get(t, "metadata.workflow_id") != "sales.dsl" || r.version(t) != 1 ||
		r.wd(t).get(t, "properties_snapshot.owner") != "alice" {
		t.Fatalf("yaml push: %s", r.raw)
	}
	if steps := r.wd(t).get(t, "workflow.steps").([]any); len(steps) != 4 {
		t.Fatalf("want 4 steps: %s", r.raw)
	}
	// The same document again is unchanged.
	if again := e.send("POST", "/api/v3/workflows/yaml", "alice", yamlDefinition).expect(t, 200); again.body["created"] != false {
		t.Fatalf("unchanged yaml push: %s", again.raw)
	}
	// is_active in the DSL.
	r = e.send("POST", "/api/v3/workflows/yaml", "alice", strings.Replace(yamlDefinition, "threshold: 42", "threshold: 43\n  is_active: false", 1)).expect(t, 200)
	if r.version(t) != 2 || r.num(t, "active_version_id") != 1 {
		t.Fatalf("is_active false in yaml: %s", r.raw)
	}
	// Bad YAML and DSL problems are 400s with DSL paths.
	e.send("POST", "/api/v3/workflows/yaml", "alice", "Workflow:\n  id: [unclosed\n").expect(t, 400)
	bad := e.send("POST", "/api/v3/workflows/yaml", "alice", "Workflow:\n  id: x\n  jobs:\n    - job: {id: a, type: Teleport}\n").expect(t, 400)
	if !strings.Contains(bad.errorsText(), "jobs[0]") && !strings.Contains(bad.errorsText(), "steps[0]") {
		t.Fatalf("problem should point at the job: %s", bad.raw)
	}
	e.send("PUT", "/api/v3/workflows/actions/validate/yaml", "alice", "Workflow:\n  id: x\n").expect(t, 400)
}

func TestOversizedBodies(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	big := `{"workflow": {"id": "big", "description": "` + strings.Repeat("a", api.MaxBodyBytes) + `", "steps": []}}`
	for _, path := range []string{"/api/v3/workflows", "/api/v3/workflows/yaml", "/api/v3/workflows/big/properties"} {
		// Declared length: refused before reading.
		e.send("POST", path, "alice", big).expect(t, 413)
		// Unknown length (chunked): refused while reading.
		req := httptest.NewRequest("POST", path, io.MultiReader(strings.NewReader(big)))
		req.ContentLength = -1
		req.Header.Set("user", "alice")
		r := e.serve(req).expect(t, 413)
		if r.body["status"] != "PAYLOAD_TOO_LARGE" {
			t.Fatalf("%s: %s", path, r.raw)
		}
	}
	req := httptest.NewRequest("PUT", "/api/v3/workflows/actions/validate", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	e.serve(req).expect(t, 413)
}
