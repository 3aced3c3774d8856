package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// evilParent is mallory's workflow with a subworkflow step (nested in a
// foreach too) that starts target.
func evilParent(id, target, owner string) string {
	props := ""
	if owner != "" {
		props = `"properties":{"owner":"` + owner + `"},`
	}
	return `{` + props + `"workflow":{"id":"` + id + `","steps":[
	  {"subworkflow":{"id":"sw","params":{"subworkflow_id":{"type":"STRING","value":"` + target + `"},"target":{"type":"STRING","value":"evil"}}}},
	  {"foreach":{"id":"loop","params":{"loop_params":{"value":{"i":{"value":[1,2],"type":"LONG_ARRAY"}},"type":"MAP"}},
	    "steps":[{"subworkflow":{"id":"inner","params":{"subworkflow_id":{"type":"STRING","value":"` + target + `"}}}}]}}]}}`
}

// A subworkflow step acts for its workflow's owner: pushing a workflow
// whose steps start a workflow its owner may not start directly is a 403
// naming the target, and nothing is stored; the target's owner, an
// administrator, a workflow an administrator owns and a target that does
// not exist yet pass.
func TestPushRefusesSubworkflowOfAnotherOwner(t *testing.T) {
	t.Parallel()
	e, h := authzFixture(t) // wf is alice's
	before := e.fingerprint(t)
	code, body := call(t, h, "mallory", "POST", "/api/v3/workflows", evilParent("evil", "wf", ""))
	if code != http.StatusForbidden || !strings.Contains(body, "starts workflow wf, owned by alice") ||
		!strings.Contains(body, "workflow.steps[0] (sw)") || !strings.Contains(body, "workflow.steps[1].foreach.steps[0] (inner)") {
		t.Fatalf("mallory's push: %d %s", code, body)
	}
	// Naming alice as owner hands the workflow to her, so it may; but
	// mallory naming herself while pushing as root's workflow may not.
	if code, body := call(t, h, admin, "POST", "/api/v3/workflows", evilParent("evil2", "wf", "mallory")); code != http.StatusForbidden {
		t.Fatalf("admin pushing mallory's workflow: %d %s", code, body)
	}
	if after := e.fingerprint(t); after != before {
		t.Fatal("a refused push changed something")
	}
	for _, c := range []struct{ caller, id, target, owner string }{
		{"alice", "alices", "wf", ""},
		{admin, "roots", "wf", ""},
		{"mallory", "for-alice", "wf", "alice"},
		{"mallory", "later", "not-yet", ""},
	} {
		if code, body := call(t, h, c.caller, "POST", "/api/v3/workflows", evilParent(c.id, c.target, c.owner)); code != http.StatusOK {
			t.Errorf("%s pushing %s: %d %s", c.caller, c.id, code, body)
		}
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow WHERE workflow_id IN ('evil', 'evil2')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d refused workflows stored (%v)", n, err)
	}
}

// A push that hands the workflow to another owner says so in its answer;
// one that keeps the pusher as owner does not (issue 27).
func TestPushThatHandsOverWarns(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	r := e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"bob"},"workflow":{"id":"gift","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	if w, _ := r.body["warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "now owned by bob") {
		t.Fatalf("handing over at the first push: %s", r.raw)
	}
	e.send(http.MethodPost, "/api/v3/workflows/gift/versions/latest/actions/start", "alice", "").expect(t, http.StatusForbidden)
	r = e.send(http.MethodPost, "/api/v3/workflows", "carol", `{"workflow":{"id":"kept","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	if _, ok := r.body["warnings"]; ok {
		t.Fatalf("a push keeping its pusher as owner warns: %s", r.raw)
	}
	r = e.send(http.MethodPost, "/api/v3/workflows", "carol", `{"properties":{"owner":"dave"},"workflow":{"id":"kept","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	if w, _ := r.body["warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "now owned by dave") {
		t.Fatalf("handing over a workflow: %s", r.raw)
	}
}
