package api_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestMaestroMapParamsFixture pushes Maestro's sample-wf-map-params.json
// (a parameter deserialization fixture) unchanged and runs it. A member of
// a MAP param is evaluated as Maestro's ParamEvaluator does, against the
// params of the enclosing scope and never its siblings: p1.l10.e2 is
// `e1.get('bar')`, which reads the top-level MAP e1 (123), not the sibling
// p1.l10.e1 ('bar').
func TestMaestroMapParamsFixture(t *testing.T) {
	repo := referenceRepo(t)
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	body := referenceFile(t, repo, "maestro-common/src/testFixtures/resources/fixtures/parameters/sample-wf-map-params.json")
	e.send(http.MethodPost, "/api/v3/workflows", "demo", body).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/sample-wf-map-params/versions/latest/actions/start", "demo",
		`{"initiator": {"type": "manual"}}`).expect(t, http.StatusOK)
	done := e.waitTerminalWithin("/api/v3/workflows/sample-wf-map-params/instances/1", 2*time.Minute)
	if done.body["status"] != "SUCCEEDED" {
		t.Fatalf("run ended %v: %s", done.body["status"], done.raw)
	}
	params, _ := done.body["params"].(map[string]any)
	p1, _ := params["p1"].(map[string]any)
	v, _ := p1["evaluated_result"].(map[string]any)
	l10, _ := v["l10"].(map[string]any)
	for key, want := range map[string]any{
		"e2": float64(123),           // top-level e1.get('bar')
		"e7": []any{1.0, 2.0, 3.0},   // top-level e1.get('bat').get('baz')
		"e1": "bar",                  // its own expression
		"l2": float64(1598399975650), // a literal
	} {
		if !reflect.DeepEqual(l10[key], want) {
			t.Errorf("p1.l10.%s = %#v, want %#v", key, l10[key], want)
		}
	}
	if v["e2"] != float64(2) || v["e1"] != "bar" {
		t.Errorf("p1.e1, p1.e2 = %#v, %#v; want bar, 2", v["e1"], v["e2"])
	}
}
