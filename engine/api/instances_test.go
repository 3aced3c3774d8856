package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
)

// withEngine starts an engine on the test server's database.
func (e *testEnv) withEngine() {
	e.t.Helper()
	eng, err := flow.New(e.pool, flow.Config{Logger: discardLogger(), Lease: 2 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(eng.Stop)
}

// waitStatus polls an instance until its status is terminal.
func (e *testEnv) waitTerminal(path string) response {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.send(http.MethodGet, path, "", "").expect(e.t, http.StatusOK)
		switch r.body["status"] {
		case "SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT":
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s still %v", path, r.body["status"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const runWorkflow = `{"workflow":{"id":"runme","params":{"n":{"type":"LONG","value":1}},"steps":[
	{"step":{"id":"first","type":"NoOp","transition":{"successors":{"second":"n > 0"}}}},
	{"step":{"id":"second","type":"NoOp","params":{"doubled":{"type":"LONG","expression":"n * 2"}}}}]}}`

func TestStartRunAndReadIt(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", runWorkflow).expect(t, http.StatusOK)

	// Maestro's WorkflowStartResponse: the run's ids and a timeline event.
	r := e.send(http.MethodPost, "/api/v3/workflows/runme/versions/latest/actions/start", "alice",
		`{"run_params":{"n":{"type":"LONG","value":21}},"request_id":"req-1"}`).expect(t, http.StatusOK)
	if r.body["status"] != "CREATED" || r.num(t, "workflow_version_id") != 1 || r.num(t, "workflow_run_id") != 1 ||
		r.body["workflow_uuid"] == nil || r.get(t, "timeline_event.message") != "Manually run a new workflow instance by a user [alice]" {
		t.Fatalf("start answered %s", r.raw)
	}
	iid := r.num(t, "workflow_instance_id")

	// The same request id is a duplicate of the same run.
	dup := e.send(http.MethodPost, "/api/v3/workflows/runme/versions/latest/actions/start", "alice",
		`{"request_id":"req-1"}`).expect(t, http.StatusOK)
	if dup.body["status"] != "DUPLICATED" || dup.num(t, "workflow_instance_id") != iid || dup.body["workflow_uuid"] != r.body["workflow_uuid"] {
		t.Fatalf("repeat answered %s", dup.raw)
	}

	done := e.waitTerminal(fmt.Sprintf("/api/v3/workflows/runme/instances/%d", iid))
	if done.body["status"] != "SUCCEEDED" {
		t.Fatalf("run ended %s", done.raw)
	}
	// Maestro's runtime overview: each status with its steps as
	// [ordinal, start, end].
	if done.num(t, "runtime_overview.total_step_count") != 2 || done.num(t, "runtime_overview.step_overview.SUCCEEDED.cnt") != 2 {
		t.Errorf("overview %s", done.raw)
	}
	ordered := done.get(t, "runtime_overview.step_overview.SUCCEEDED.steps").([]any)
	if len(ordered) != 2 || ordered[0].([]any)[0] != 1.0 || ordered[1].([]any)[0] != 2.0 || ordered[0].([]any)[1] == nil {
		t.Errorf("step overview %s", done.raw)
	}
	if done.get(t, "runtime_dag.first.successors.second") != "n > 0" || done.get(t, "run_config.policy") != "START_FRESH_NEW_RUN" ||
		done.get(t, "params.n.evaluated_result") != 21.0 {
		t.Errorf("instance %s", done.raw)
	}
	steps := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps", iid), "", "").expect(t, http.StatusOK)
	if len(steps.list) != 2 || steps.list[0].(map[string]any)["step_id"] != "first" || steps.list[1].(map[string]any)["step_instance_id"] != 2.0 {
		t.Errorf("steps listed %s", steps.raw)
	}
	att := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps/second/attempts/latest", iid), "", "").expect(t, http.StatusOK)
	if stepStatus(att) != "SUCCEEDED" || att.get(t, "params.doubled.evaluated_result").(float64) != 42 ||
		att.get(t, "params.doubled.expression") != "n * 2" || att.get(t, "definition.step.id") != "second" {
		t.Errorf("attempt %s", att.raw)
	}
	rs := att.body["runtime_state"].(map[string]any)
	for _, k := range []string{"create_time", "initialize_time", "evaluate_param_time", "start_time", "end_time", "modify_time"} {
		if _, ok := rs[k].(float64); !ok {
			t.Errorf("runtime_state.%s missing: %s", k, att.raw)
		}
	}
	if tl := att.body["timeline"].([]any); len(tl) < 8 {
		t.Errorf("timeline has %d events, want every transition", len(tl))
	}
	e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps/second/attempts/1", iid), "", "").expect(t, http.StatusOK)
	e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps/second/attempts/9", iid), "", "").expect(t, http.StatusNotFound)

	// A stop of a finished run is refused (Maestro's invalid status, 400).
	e.send(http.MethodPut, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/actions/stop", iid), "alice", "").expect(t, http.StatusBadRequest)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", runWorkflow).expect(t, http.StatusOK)
	tests := []struct {
		name, path, body string
		code             int
	}{
		{"unknown workflow", "/api/v3/workflows/nope/versions/latest/actions/start", `{}`, http.StatusNotFound},
		{"unknown version", "/api/v3/workflows/runme/versions/7/actions/start", `{}`, http.StatusNotFound},
		{"bad version selector", "/api/v3/workflows/runme/versions/newest/actions/start", `{}`, http.StatusBadRequest},
		{"malformed body", "/api/v3/workflows/runme/versions/latest/actions/start", `{"run_params":`, http.StatusBadRequest},
		{"unknown field in run params", "/api/v3/workflows/runme/versions/latest/actions/start",
			`{"run_params":{"n":{"type":"LONG","value":1,"colour":"red"}}}`, http.StatusBadRequest},
		{"run param of the wrong type", "/api/v3/workflows/runme/versions/latest/actions/start",
			`{"run_params":{"n":{"type":"LONG","value":"many"}}}`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.send(http.MethodPost, tt.path, "alice", tt.body).expect(t, tt.code)
		})
	}
	// Nothing half written: no instance exists.
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d instances after rejected starts (err %v)", n, err)
	}
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/x", "", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/5", "", "").expect(t, http.StatusNotFound)
}

func TestStopAndListInstances(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"workflow":{"id":"slow","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`).expect(t, http.StatusOK)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.send(http.MethodPost, "/api/v3/workflows/slow/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
		}()
	}
	wg.Wait()
	// Maestro's pagination: first from the newest, then from end_cursor.
	page := e.send(http.MethodGet, "/api/v3/workflows/slow/instances?first=3", "", "").expect(t, http.StatusOK)
	items := page.body["elements"].([]any)
	if len(items) != 3 || page.get(t, "page_info.has_next_page") != true || page.get(t, "page_info.end_cursor") != "3" ||
		page.num(t, "total_count") != 5 || items[0].(map[string]any)["workflow_instance_id"] != 5.0 {
		t.Fatalf("first page %s", page.raw)
	}
	next := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/slow/instances?first=3&cursor=%v", page.get(t, "page_info.end_cursor")), "", "").expect(t, http.StatusOK)
	if len(next.body["elements"].([]any)) != 2 || next.get(t, "page_info.has_next_page") != false || next.get(t, "page_info.has_previous_page") != true {
		t.Fatalf("second page %s", next.raw)
	}
	back := e.send(http.MethodGet, "/api/v3/workflows/slow/instances?last=2&cursor=3", "", "").expect(t, http.StatusOK)
	if els := back.body["elements"].([]any); len(els) != 2 || els[0].(map[string]any)["workflow_instance_id"] != 5.0 {
		t.Fatalf("backward page %s", back.raw)
	}
	// This API's limit pages forward too.
	if l := e.send(http.MethodGet, "/api/v3/workflows/slow/instances?limit=2", "", "").expect(t, http.StatusOK); len(l.body["elements"].([]any)) != 2 {
		t.Fatalf("limit page %s", l.raw)
	}
	e.send(http.MethodGet, "/api/v3/workflows/slow/instances?first=2&last=2", "", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodGet, "/api/v3/workflows/slow/instances?first=201", "", "").expect(t, http.StatusBadRequest)

	kill := e.send(http.MethodPut, "/api/v3/workflows/slow/instances/1/actions/kill", "alice", "").expect(t, http.StatusOK)
	if kill.body["completed"] != false || kill.body["info"] != "The action is accepted and is still running. Please check it again." {
		t.Errorf("kill answered %s", kill.raw)
	}
	if got := e.waitTerminal("/api/v3/workflows/slow/instances/1"); got.body["status"] != "FAILED" {
		t.Errorf("killed run is %v", got.body["status"])
	}
	// Killing it again is done already (Maestro's no-op answer).
	again := e.send(http.MethodPut, "/api/v3/workflows/slow/instances/1/runs/1/actions/kill", "alice", "").expect(t, http.StatusOK)
	if again.body["completed"] != true || again.body["workflow_instance_status"] != "FAILED" {
		t.Errorf("second kill answered %s", again.raw)
	}
	e.send(http.MethodPut, "/api/v3/workflows/slow/instances/2/runs/2/actions/stop", "alice", "").expect(t, http.StatusBadRequest)
	all := e.send(http.MethodPut, "/api/v3/workflows/slow/actions/stop", "alice", "").expect(t, http.StatusAccepted)
	if all.num(t, "info") != 4 || all.body["action"] != "STOP" {
		t.Errorf("stop all acted on %v runs, want 4", all.body["info"])
	}
	for i := 2; i <= 5; i++ {
		if got := e.waitTerminal(fmt.Sprintf("/api/v3/workflows/slow/instances/%d", i)); got.body["status"] != "STOPPED" {
			t.Errorf("run %d is %v", i, got.body["status"])
		}
	}
	e.send(http.MethodPut, "/api/v3/workflows/nope/actions/stop", "alice", "").expect(t, http.StatusNotFound)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A run param that its mode forbids overriding is refused at the API with
// nothing written.
func TestStartRefusesForbiddenOverrides(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice",
		`{"workflow":{"id":"modes","params":{"fixed":{"type":"LONG","value":1,"mode":"CONSTANT"}},
		  "steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, http.StatusOK)
	r := e.send(http.MethodPost, "/api/v3/workflows/modes/versions/latest/actions/start", "alice",
		`{"run_params":{"fixed":{"type":"LONG","value":2}}}`).expect(t, http.StatusBadRequest)
	if !strings.Contains(r.body["message"].(string), "fixed") {
		t.Errorf("message does not name the param: %s", r.raw)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d instances after a refused start (err %v)", n, err)
	}
}
