package api_test

import (
	"net/http"
	"testing"
)

// A breakpoint on a step inside a foreach pauses it in every iteration;
// the paused attempts are listed under the workflow with the iterations'
// workflow ids, resume one by one, and all resume when the breakpoint goes.
func TestBreakpointInsideForeach(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"bplp","steps":[
	    {"foreach":{"id":"loop","params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1,2,3]}}}},
	        "steps":[{"step":{"id":"body","type":"NoOp"}}]}}]}}`).expect(t, http.StatusOK)
	// A workflow whose id extends bplp's must not be mistaken for it.
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice"},"workflow":{"id":"bplp2","steps":[
	    {"step":{"id":"body","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"bplp","step_id":"body"}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"bplp2","step_id":"body"}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/bplp2/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	e.waitPaused("workflowId=bplp2&stepId=body", 1)

	e.send(http.MethodPost, "/api/v3/workflows/bplp/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	paused := e.waitPaused("workflowId=bplp&stepId=body", 3)
	for i, p := range paused.list {
		p := p.(map[string]any)
		if p["workflow_id"] != "bplp:1:loop" || p["workflow_instance_id"].(float64) != float64(i+1) {
			t.Fatalf("paused attempts %s", paused.raw)
		}
	}
	if st := e.send(http.MethodGet, "/api/v3/workflows/bplp/instances/1", "", "").expect(t, http.StatusOK); st.body["status"] != "IN_PROGRESS" {
		t.Fatalf("parent is %s", st.raw)
	}

	e.send(http.MethodPut, "/api/v3/workflows/steps/breakpoints/bplp:1:loop/instances/2/runs/1/steps/body/attempts/1/actions/resume",
		"alice", "").expect(t, http.StatusOK)
	if done := e.waitTerminal("/api/v3/workflows/bplp:1:loop/instances/2"); done.body["status"] != "SUCCEEDED" {
		t.Fatalf("resumed iteration ended %s", done.raw)
	}
	e.waitPaused("workflowId=bplp&stepId=body", 2)

	del := e.send(http.MethodDelete, "/api/v3/workflows/steps/breakpoints?workflowId=bplp&stepId=body", "alice", "").expect(t, http.StatusOK)
	if del.body["resumed"].(float64) != 2 || del.body["deleted"].(float64) != 1 {
		t.Fatalf("deleted %s", del.raw)
	}
	if done := e.waitTerminal("/api/v3/workflows/bplp/instances/1"); done.body["status"] != "SUCCEEDED" {
		t.Fatalf("parent ended %s", done.raw)
	}
	// bplp2's paused attempt was not bplp's to resume.
	e.waitPaused("workflowId=bplp2&stepId=body", 1)
}
