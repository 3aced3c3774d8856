package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// waitPaused polls until n attempts of the step are paused.
func (e *testEnv) waitPaused(query string, n int) response {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.send(http.MethodGet, "/api/v3/workflows/steps/breakpoints/paused-step-attempts?"+query, "", "").expect(e.t, http.StatusOK)
		if len(r.list) == n {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("paused attempts %s, want %d", r.raw, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBreakpointPauseResumeDelete(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice","run_strategy":"PARALLEL"},"workflow":{"id":"dbg","steps":[
	    {"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
	    {"step":{"id":"b","type":"NoOp"}}]}}`).expect(t, http.StatusOK)

	e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"nope","step_id":"b"}`).expect(t, http.StatusNotFound)
	e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"dbg"}`).expect(t, http.StatusBadRequest)
	bp := e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"dbg","step_id":"b"}`).expect(t, http.StatusOK)
	again := e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"dbg","step_id":"b"}`).expect(t, http.StatusOK)
	if bp.body["breakpoint_id"] != again.body["breakpoint_id"] || bp.body["created_by"] != "alice" {
		t.Fatalf("set twice: %s then %s", bp.raw, again.raw)
	}
	list := e.send(http.MethodGet, "/api/v3/workflows/steps/breakpoints?workflowId=dbg&stepId=b", "", "").expect(t, http.StatusOK)
	if len(list.list) != 1 {
		t.Fatalf("listed %s", list.raw)
	}

	for range 3 {
		e.send(http.MethodPost, "/api/v3/workflows/dbg/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	}
	e.waitPaused("workflowId=dbg&stepId=b", 3)
	for i := 1; i <= 3; i++ {
		a := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/dbg/instances/%d/runs/1/steps/b/attempts/latest", i), "", "").expect(t, http.StatusOK)
		if stepStatus(a) != "PAUSED" {
			t.Fatalf("run %d: b is %s", i, a.raw)
		}
	}

	// Resuming one attempt wakes it at once (well before the fallback
	// recheck), and only it.
	began := time.Now()
	e.send(http.MethodPut, "/api/v3/workflows/steps/breakpoints/dbg/instances/2/runs/1/steps/b/attempts/1/actions/resume", "alice", "").expect(t, http.StatusOK)
	if done := e.waitTerminal("/api/v3/workflows/dbg/instances/2"); done.body["status"] != "SUCCEEDED" {
		t.Fatalf("resumed run ended %s", done.raw)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("resume took %s", took)
	}
	e.send(http.MethodPut, "/api/v3/workflows/steps/breakpoints/dbg/instances/2/runs/1/steps/b/attempts/1/actions/resume", "alice", "").expect(t, http.StatusNotFound)
	paused := e.waitPaused("workflowId=dbg&stepId=b", 2)
	for _, p := range paused.list {
		if p.(map[string]any)["workflow_instance_id"].(float64) == 2 {
			t.Fatalf("run 2 still listed as paused: %s", paused.raw)
		}
	}

	// Deleting the breakpoint resumes the others.
	del := e.send(http.MethodDelete, "/api/v3/workflows/steps/breakpoints?workflowId=dbg&stepId=b", "alice", "").expect(t, http.StatusOK)
	if del.body["resumed"].(float64) != 2 || del.body["deleted"].(float64) != 1 {
		t.Fatalf("deleted %s", del.raw)
	}
	for _, i := range []int{1, 3} {
		if done := e.waitTerminal(fmt.Sprintf("/api/v3/workflows/dbg/instances/%d", i)); done.body["status"] != "SUCCEEDED" {
			t.Fatalf("run %d ended %s", i, done.raw)
		}
	}
	e.send(http.MethodDelete, "/api/v3/workflows/steps/breakpoints?workflowId=dbg&stepId=b", "alice", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/workflows/steps/breakpoints", "", "").expect(t, http.StatusBadRequest)

	// A breakpoint on one instance pauses only that instance.
	e.send(http.MethodPost, "/api/v3/workflows/steps/breakpoints", "alice", `{"workflow_id":"dbg","step_id":"a","workflow_instance_id":5}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/dbg/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	if done := e.waitTerminal("/api/v3/workflows/dbg/instances/4"); done.body["status"] != "SUCCEEDED" {
		t.Fatalf("run 4 ended %s", done.raw)
	}
	e.send(http.MethodPost, "/api/v3/workflows/dbg/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	e.waitPaused("workflowId=dbg&stepId=a", 1)
	// A stopped run ends its paused step.
	e.send(http.MethodPut, "/api/v3/workflows/dbg/instances/5/actions/stop", "alice", "").expect(t, http.StatusOK)
	if done := e.waitTerminal("/api/v3/workflows/dbg/instances/5"); done.body["status"] != "STOPPED" {
		t.Fatalf("run 5 ended %s", done.raw)
	}
}
