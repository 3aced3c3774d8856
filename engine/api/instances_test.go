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
	e.send(http.MethodPost, "/api/v3/workflows", "alice", runWorkflow).expect(t, http.StatusCreated)

	r := e.send(http.MethodPost, "/api/v3/workflows/runme/versions/latest/actions/start", "alice",
		`{"run_params":{"n":{"type":"LONG","value":21}},"request_id":"req-1"}`).expect(t, http.StatusCreated)
	if r.body["status"] != "CREATED" {
		t.Fatalf("start answered %s", r.raw)
	}
	inst := r.body["workflow_instance"].(map[string]any)
	iid := int64(inst["workflow_instance_id"].(float64))

	// The same request id is a duplicate of the same run.
	dup := e.send(http.MethodPost, "/api/v3/workflows/runme/versions/latest/actions/start", "alice",
		`{"request_id":"req-1"}`).expect(t, http.StatusOK)
	if dup.body["status"] != "DUPLICATED" || dup.body["workflow_instance"].(map[string]any)["workflow_instance_id"].(float64) != float64(iid) {
		t.Fatalf("repeat answered %s", dup.raw)
	}

	done := e.waitTerminal(fmt.Sprintf("/api/v3/workflows/runme/instances/%d", iid))
	if done.body["status"] != "SUCCEEDED" {
		t.Fatalf("run ended %s", done.raw)
	}
	ov := done.body["runtime_overview"].(map[string]any)
	if ov["total_step_count"].(float64) != 2 || ov["step_overview"].(map[string]any)["SUCCEEDED"].(float64) != 2 {
		t.Errorf("overview %v", ov)
	}
	steps := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps", iid), "", "").expect(t, http.StatusOK)
	if n := len(steps.body["steps"].([]any)); n != 2 {
		t.Errorf("%d steps listed", n)
	}
	att := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps/second/attempts/latest", iid), "", "").expect(t, http.StatusOK)
	if att.body["status"] != "SUCCEEDED" || att.body["params"].(map[string]any)["doubled"].(map[string]any)["value"].(float64) != 42 {
		t.Errorf("attempt %s", att.raw)
	}
	if tl := att.body["timeline"].([]any); len(tl) < 8 {
		t.Errorf("timeline has %d events, want every transition", len(tl))
	}
	e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps/second/attempts/1", iid), "", "").expect(t, http.StatusOK)
	e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/runs/1/steps/second/attempts/9", iid), "", "").expect(t, http.StatusNotFound)

	// A stop of a finished run is a conflict.
	e.send(http.MethodPut, fmt.Sprintf("/api/v3/workflows/runme/instances/%d/actions/stop", iid), "alice", "").expect(t, http.StatusConflict)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.send(http.MethodPost, "/api/v3/workflows", "alice", runWorkflow).expect(t, http.StatusCreated)
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
		`{"workflow":{"id":"slow","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`).expect(t, http.StatusCreated)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.send(http.MethodPost, "/api/v3/workflows/slow/versions/latest/actions/start", "alice", "").expect(t, http.StatusCreated)
		}()
	}
	wg.Wait()
	page := e.send(http.MethodGet, "/api/v3/workflows/slow/instances?limit=3", "", "").expect(t, http.StatusOK)
	items := page.body["items"].([]any)
	if len(items) != 3 || page.body["next_cursor"] == nil {
		t.Fatalf("first page %s", page.raw)
	}
	next := e.send(http.MethodGet, fmt.Sprintf("/api/v3/workflows/slow/instances?limit=3&cursor=%v", page.body["next_cursor"]), "", "").expect(t, http.StatusOK)
	if len(next.body["items"].([]any)) != 2 || next.body["next_cursor"] != nil {
		t.Fatalf("second page %s", next.raw)
	}

	e.send(http.MethodPut, "/api/v3/workflows/slow/instances/1/actions/kill", "alice", "").expect(t, http.StatusAccepted)
	if got := e.waitTerminal("/api/v3/workflows/slow/instances/1"); got.body["status"] != "FAILED" {
		t.Errorf("killed run is %v", got.body["status"])
	}
	all := e.send(http.MethodPut, "/api/v3/workflows/slow/actions/stop", "alice", "").expect(t, http.StatusAccepted)
	if all.body["instances"].(float64) != 4 {
		t.Errorf("stop all acted on %v runs, want 4", all.body["instances"])
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
		  "steps":[{"step":{"id":"s","type":"NoOp"}}]}}`).expect(t, http.StatusCreated)
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
