package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
)

const strictWorkflow = `{"properties":{"owner":"alice","run_strategy":"STRICT_SEQUENTIAL"},
	"workflow":{"id":"strictapi","params":{"fail":{"type":"BOOLEAN","value":false}},"steps":[
	{"step":{"id":"nap","type":"Sleep","sleep_seconds":0.01,"transition":{"successors":{"boom":"fail == true"}}}},
	{"step":{"id":"boom","type":"Sleep","sleep_seconds":60,"timeout":"300ms","retry_policy":{"timeout_retry_limit":0}}}]}}`

// waitStepStatus polls a run's steps until step has status.
func (e *testEnv) waitStepStatus(path, step, status string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.send(http.MethodGet, path, "", "").expect(e.t, http.StatusOK)
		for _, s := range r.list {
			m := s.(map[string]any)
			if m["step_id"] == step && m["runtime_state"].(map[string]any)["status"] == status {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("step %s never reached %s: %s", step, status, r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestActionMaps(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	// At Maestro's paths (and this API's older ones), with Maestro's
	// action names.
	for _, prefix := range []string{"/api/v3/workflows", "/api/v3"} {
		im := e.send(http.MethodGet, prefix+"/instances/action-map", "", "").expect(t, http.StatusOK)
		if got := im.body["FAILED"].([]any); len(got) != 2 || got[0] != "RESTART" || got[1] != "UNBLOCK" {
			t.Errorf("instance action map %s", im.raw)
		}
		sm := e.send(http.MethodGet, prefix+"/steps/instances/action-map", "", "").expect(t, http.StatusOK)
		if got := sm.body["WAITING_FOR_SIGNALS"].([]any); len(got) != 4 || got[3] != "BYPASS_STEP_DEPENDENCIES" {
			t.Errorf("step action map %s", sm.raw)
		}
		if got := sm.body["SUCCEEDED"].([]any); len(got) != 1 || got[0] != "RESTART" {
			t.Errorf("step action map %s", sm.raw)
		}
	}
}

func TestUnblockAndRestartOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", strictWorkflow).expect(t, http.StatusOK)
	start := "/api/v3/workflows/strictapi/versions/latest/actions/start"
	e.send(http.MethodPost, start, "alice", `{"run_params":{"fail":{"type":"BOOLEAN","value":true}}}`).expect(t, http.StatusOK)
	if got := e.waitTerminal("/api/v3/workflows/strictapi/instances/1"); got.body["status"] != "FAILED" {
		t.Fatalf("run 1 %s", got.raw)
	}
	queued := e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusOK)
	if queued.body["status"] != "CREATED" || queued.num(t, "workflow_instance_id") != 2 {
		t.Fatalf("start behind a failed run %s", queued.raw)
	}
	if inst := e.send(http.MethodGet, "/api/v3/workflows/strictapi/instances/2", "", "").expect(t, http.StatusOK); inst.body["queued"] != true {
		t.Fatalf("run 2 should wait behind the failed run: %s", inst.raw)
	}
	// Unblocking a run that is not FAILED is refused (Maestro's invalid
	// status, a 400).
	e.send(http.MethodPut, "/api/v3/workflows/strictapi/instances/2/actions/unblock", "alice", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodPut, "/api/v3/workflows/strictapi/instances/9/actions/unblock", "alice", "").expect(t, http.StatusNotFound)
	e.send(http.MethodPut, "/api/v3/workflows/nope/actions/unblock", "alice", "").expect(t, http.StatusNotFound)
	time.Sleep(200 * time.Millisecond)
	if got := e.send(http.MethodGet, "/api/v3/workflows/strictapi/instances/2", "", "").expect(t, http.StatusOK); got.body["status"] != "CREATED" {
		t.Fatalf("run 2 ran while blocked: %s", got.raw)
	}
	r := e.send(http.MethodPut, "/api/v3/workflows/strictapi/actions/unblock", "alice", "").expect(t, http.StatusOK)
	if r.num(t, "info") != 1 || r.body["action"] != "UNBLOCK" {
		t.Errorf("unblock answered %s", r.raw)
	}
	if got := e.waitTerminal("/api/v3/workflows/strictapi/instances/2"); got.body["status"] != "SUCCEEDED" {
		t.Fatalf("run 2 %s", got.raw)
	}

	// Restart instance 1 from the beginning with the failure switched off.
	e.send(http.MethodPost, "/api/v3/workflows/strictapi/instances/1/actions/restart", "alice",
		`{"restart_policy":"NOPE"}`).expect(t, http.StatusBadRequest)
	e.send(http.MethodPost, "/api/v3/workflows/strictapi/instances/7/actions/restart", "alice", "").expect(t, http.StatusNotFound)
	rr := e.send(http.MethodPost, "/api/v3/workflows/strictapi/instances/1/actions/restart", "alice",
		`{"restart_config":{"restart_policy":"RESTART_FROM_BEGINNING"},"run_params":{"fail":{"type":"BOOLEAN","value":false}}}`).
		expect(t, http.StatusOK)
	if rr.num(t, "workflow_run_id") != 2 || rr.body["status"] != "CREATED" || rr.body["workflow_uuid"] == nil {
		t.Fatalf("restart answered %s", rr.raw)
	}
	done := e.waitTerminal("/api/v3/workflows/strictapi/instances/1")
	if done.body["status"] != "SUCCEEDED" || done.num(t, "workflow_run_id") != 2 {
		t.Fatalf("restarted run %s", done.raw)
	}
	agg := done.body["aggregated_info"].(map[string]any)
	views := agg["step_aggregated_views"].(map[string]any)
	if agg["workflow_instance_status"] != "SUCCEEDED" || views["nap"].(map[string]any)["workflow_run_id"].(float64) != 2 ||
		views["boom"].(map[string]any)["status"] != "UNSATISFIED" {
		t.Errorf("aggregated info %v", agg)
	}
	// A step action not allowed from the step's status is a clear 400
	// (Maestro's invalid status).
	c := e.send(http.MethodPost, "/api/v3/workflows/strictapi/instances/1/runs/2/steps/nap/actions/stop", "alice", "").
		expect(t, http.StatusBadRequest)
	if c.body["status"] != "BAD_REQUEST" || !strings.Contains(c.body["message"].(string), "not allowed") {
		t.Errorf("refusal body %s", c.raw)
	}
	e.send(http.MethodPut, "/api/v3/workflows/strictapi/instances/1/steps/nap/actions/stop", "alice", "").
		expect(t, http.StatusBadRequest)
	e.send(http.MethodPost, "/api/v3/workflows/strictapi/instances/1/runs/2/steps/ghost/actions/skip", "alice", "").
		expect(t, http.StatusNotFound)
	e.send(http.MethodPost, "/api/v3/workflows/strictapi/instances/1/runs/1/steps/nap/actions/restart", "alice", "").
		expect(t, http.StatusBadRequest) // not the latest run
}

func TestStepActionsOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"workflow":{"id":"napper","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/napper/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	e.waitStepStatus("/api/v3/workflows/napper/instances/1/runs/1/steps", "nap", "RUNNING")
	e.send(http.MethodPost, "/api/v3/workflows/napper/instances/1/steps/nap/actions/restart", "alice", "").
		expect(t, http.StatusBadRequest)
	// Maestro's step stop (the latest run) answers the attempt's state.
	r := e.send(http.MethodPut, "/api/v3/workflows/napper/instances/1/steps/nap/actions/stop", "alice", "").
		expect(t, http.StatusOK)
	if r.num(t, "step_attempt_id") != 1 || r.get(t, "timeline_event.message") != "User [alice] take action [STOP] on the step" ||
		r.get(t, "step_runtime_state.status") == nil {
		t.Errorf("stop answered %s", r.raw)
	}
	if got := e.waitTerminal("/api/v3/workflows/napper/instances/1"); got.body["status"] != "STOPPED" {
		t.Fatalf("run %s", got.raw)
	}
	// Restarting the stopped step of the ended run starts run 2.
	rr := e.send(http.MethodPost, "/api/v3/workflows/napper/instances/1/steps/nap/actions/restart", "alice", "").
		expect(t, http.StatusOK)
	if rr.body["status"] != "CREATED" || rr.num(t, "workflow_run_id") != 2 || rr.num(t, "workflow_version_id") != 1 {
		t.Fatalf("restart answered %s", rr.raw)
	}
	e.waitStepStatus("/api/v3/workflows/napper/instances/1/runs/2/steps", "nap", "RUNNING")
	e.send(http.MethodPost, "/api/v3/workflows/napper/instances/1/runs/2/steps/nap/actions/kill", "alice", "").
		expect(t, http.StatusOK)
	if got := e.waitTerminal("/api/v3/workflows/napper/instances/1"); got.body["status"] != "FAILED" {
		t.Fatalf("killed run %s", got.raw)
	}
	// Maestro's restart_path names the step to restart from.
	restart := "/api/v3/workflows/napper/instances/1/actions/restart"
	e.send(http.MethodPost, restart, "alice", `{"restart_config":{"restart_policy":"RESTART_FROM_SPECIFIC"}}`).
		expect(t, http.StatusBadRequest)
	e.send(http.MethodPost, restart, "alice", `{"restart_config":{"restart_policy":"RESTART_FROM_SPECIFIC","restart_path":[{"step_id":"ghost"}]}}`).
		expect(t, http.StatusNotFound)
	r3 := e.send(http.MethodPost, restart, "alice",
		`{"restart_config":{"restart_policy":"RESTART_FROM_SPECIFIC","restart_path":[{"workflow_id":"napper","instance_id":1,"step_id":"nap"}]}}`).
		expect(t, http.StatusOK)
	if r3.num(t, "workflow_run_id") != 3 {
		t.Fatalf("restart answered %s", r3.raw)
	}
	e.waitStepStatus("/api/v3/workflows/napper/instances/1/runs/3/steps", "nap", "RUNNING")
	e.send(http.MethodPut, "/api/v3/workflows/napper/instances/1/actions/stop", "alice", "").expect(t, http.StatusOK)
	e.waitTerminal("/api/v3/workflows/napper/instances/1")
}

// FIRST_ONLY over REST: a start while a run is in progress answers STOPPED
// with the dropped instance.
func TestFirstOnlyStartAnswersStopped(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"properties":{"owner":"alice","run_strategy":"FIRST_ONLY"},
		  "workflow":{"id":"firstapi","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`).expect(t, http.StatusOK)
	start := "/api/v3/workflows/firstapi/versions/latest/actions/start"
	if r := e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusOK); r.body["status"] != "CREATED" {
		t.Fatalf("first start %s", r.raw)
	}
	r := e.send(http.MethodPost, start, "alice", "").expect(t, http.StatusOK)
	if r.body["status"] != "STOPPED" || r.num(t, "workflow_instance_id") != 2 {
		t.Fatalf("second start %s", r.raw)
	}
	if inst := e.send(http.MethodGet, "/api/v3/workflows/firstapi/instances/2", "", "").expect(t, http.StatusOK); inst.body["status"] != "STOPPED" {
		t.Fatalf("the dropped run is %s", inst.raw)
	}
	e.send(http.MethodPut, "/api/v3/workflows/firstapi/actions/stop", "alice", "").expect(t, http.StatusAccepted)
	e.waitTerminal("/api/v3/workflows/firstapi/instances/1")
}

// Changing the run strategy applies to runs already queued at once, not at
// the next admission sweep (set to an hour here).
func TestPropertiesChangeReadmitsQueuedRuns(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	eng, err := flow.New(e.pool, flow.Config{Logger: discardLogger(), Lease: 2 * time.Second, AdmitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"workflow":{"id":"queued","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":30}}]}}`).expect(t, http.StatusOK)
	for range 3 {
		e.send(http.MethodPost, "/api/v3/workflows/queued/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	}
	running := func() int {
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM step_instance WHERE workflow_id = 'queued'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for running() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("sequential: %d runs started, want 1", running())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.send(http.MethodPost, "/api/v3/workflows/queued/properties", "alice",
		`{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":5}}`).expect(t, http.StatusOK)
	deadline = time.Now().Add(5 * time.Second)
	for running() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after switching to PARALLEL: %d runs started, want 3", running())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.send(http.MethodPut, "/api/v3/workflows/queued/actions/stop", "alice", "").expect(t, http.StatusAccepted)
}
