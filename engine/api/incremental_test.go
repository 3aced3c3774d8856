package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/wire"
)

const incrementalAPIWorkflow = `{"properties":{"owner":"alice"},"workflow":{"id":"incr-api",
	"signal_triggers":[{"incremental":true,"definitions":{"sales.orders":{}}}],
	"steps":[{"step":{"id":"work","type":"NoOp"}}]}}`

// An incremental trigger with two signal definitions is refused with the
// JSON error naming the field; a valid one renders back with
// "incremental": true. A table change announced over REST starts a run
// whose range GET .../watermarks shows with the watermark; the watermark
// cannot be reset while the run is in flight (409, retryable); once the
// run is stopped (before any engine started it) the sweep ends its range
// and a reset to the table's beginning makes the sweep start one run for
// the same range again. Malformed resets are JSON 400s, unknown tables
// and workflows 404s.
func TestWatermarksOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	bad := e.send(http.MethodPost, "/api/v3/workflows", "alice", `{"properties":{"owner":"alice"},"workflow":{"id":"incr-bad",
		"signal_triggers":[{"incremental":true,"definitions":{"a.b":{},"a.c":{}}}],
		"steps":[{"step":{"id":"work","type":"NoOp"}}]}}`).expect(t, http.StatusBadRequest)
	if bad.body["status"] != "BAD_REQUEST" || bad.body["retryable"] != false ||
		!strings.Contains(string(bad.raw), "workflow.signal_triggers[0].definitions") ||
		!strings.Contains(string(bad.raw), "an incremental trigger needs exactly one signal definition") {
		t.Fatalf("invalid incremental trigger answered %s", bad.raw)
	}

	e.send(http.MethodPost, "/api/v3/workflows", "alice", incrementalAPIWorkflow).expect(t, http.StatusOK)
	def := e.send(http.MethodGet, "/api/v3/workflows/incr-api/versions/latest", "alice", "").expect(t, http.StatusOK)
	if !strings.Contains(strings.ReplaceAll(string(def.raw), " ", ""), `"incremental":true`) {
		t.Fatalf("the trigger does not render incremental: %s", def.raw)
	}

	e.send(http.MethodPost, "/api/v3/signals", "", `{"name":"sales.orders","params":{"catalog":"","namespace":"sales",
		"table":"sales.orders","snapshot_id":4611686018427387905,"parent_snapshot_id":0,"commit_time":1790000000000,
		"operation":"append"}}`).expect(t, http.StatusOK)
	wm := watermarks(t, e, "incr-api")
	if len(wm.Watermarks) != 1 || len(wm.Runs) != 1 {
		t.Fatalf("watermarks %+v", wm)
	}
	w, r := wm.Watermarks[0], wm.Runs[0]
	if w.Table != "sales.orders" || w.SnapshotID != 0 || w.LatestSnapshotID != 4611686018427387905 ||
		w.InFlightInstanceID == nil || *w.InFlightInstanceID != 1 || w.PendingChanges != 1 || w.RunsStarted != 1 {
		t.Errorf("watermark %+v", w)
	}
	if r.WorkflowInstanceID != 1 || r.FromSnapshotID != 0 || r.ToSnapshotID != 4611686018427387905 ||
		r.ToCommitTime != 1790000000000 || r.SnapshotCount != 1 || r.State != "RUNNING" {
		t.Errorf("range %+v", r)
	}
	got := e.send(http.MethodGet, "/api/v3/workflows/incr-api/instances/1", "alice", "").expect(t, http.StatusOK)
	if !strings.Contains(string(got.raw), `"to_snapshot_id"`) || !strings.Contains(string(got.raw), "4611686018427387905") {
		t.Errorf("the run does not carry its range: %s", got.raw)
	}

	reset := e.send(http.MethodPost, "/api/v3/workflows/incr-api/watermarks/reset", "alice", `{"table":"sales.orders","snapshot_id":0}`).
		expect(t, http.StatusConflict)
	if reset.body["retryable"] != true || !strings.Contains(reset.body["message"].(string), "in flight") {
		t.Errorf("reset in flight answered %s", reset.raw)
	}
	// Stopped before an engine started it, as the engine stops a CREATED
	// run (run.StopCreated): not through the flow's end, so the sweep ends
	// its range.
	if ok, err := run.StopCreated(context.Background(), e.pool, nil, run.Ref{WorkflowID: "incr-api", InstanceID: 1, RunID: 1},
		instance.WorkflowStopped, "stopped by the test"); err != nil || !ok {
		t.Fatalf("stop the created run: %v %v", ok, err)
	}
	defs := definition.NewStore(e.pool)
	broker := signalbroker.New(e.pool, execution.New(e.pool, defs, 0), nil)
	if _, _, err := broker.ProcessIncremental(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	wm = watermarks(t, e, "incr-api")
	if wm.Watermarks[0].InFlightInstanceID != nil || wm.Runs[0].State != "STOPPED" || wm.Watermarks[0].SnapshotID != 0 {
		t.Fatalf("after the stop: %+v", wm)
	}

	for body, code := range map[string]int{
		``:                         http.StatusBadRequest,
		`{"table":"sales.orders"}`: http.StatusBadRequest,
		`{"snapshot_id":1}`:        http.StatusBadRequest,
		`{"table":"sales.orders","snapshot_id":-1}`:      http.StatusBadRequest,
		`{"table":"sales.orders","snapshot_id":1,"x":1}`: http.StatusBadRequest,
		`{"table":"sales.orders","snapshot_id":77}`:      http.StatusBadRequest, // never announced, no commit_time
		`{"table":"sales.items","snapshot_id":0}`:        http.StatusNotFound,
	} {
		got := e.send(http.MethodPost, "/api/v3/workflows/incr-api/watermarks/reset", "alice", body)
		if got.code != code || got.body["status"] == nil || got.body["message"] == nil {
			t.Errorf("reset %s: %d %s, want %d with a JSON error", body, got.code, got.raw, code)
		}
	}
	e.send(http.MethodPost, "/api/v3/workflows/nope/watermarks/reset", "admin", `{"table":"a.b","snapshot_id":0}`).expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/workflows/nope/watermarks", "", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/workflows/incr-api/watermarks?limit=0", "", "").expect(t, http.StatusBadRequest)
	// Only the owner moves a watermark.
	e.send(http.MethodPost, "/api/v3/workflows/incr-api/watermarks/reset", "mallory", `{"table":"sales.orders","snapshot_id":0}`).
		expect(t, http.StatusForbidden)

	// The stopped run's range is due again only once reset: the reset
	// makes the sweep start one run for it.
	if started, _, err := broker.ProcessIncremental(context.Background(), 10); err != nil || started != 0 {
		t.Fatalf("sweep before the reset started %d: %v", started, err)
	}
	e.send(http.MethodPost, "/api/v3/workflows/incr-api/watermarks/reset", "alice", `{"table":"sales.orders","snapshot_id":0}`).
		expect(t, http.StatusOK)
	if started, _, err := broker.ProcessIncremental(context.Background(), 10); err != nil || started != 1 {
		t.Fatalf("sweep after the reset started %d: %v", started, err)
	}
	wm = watermarks(t, e, "incr-api")
	if r := wm.Runs[0]; r.WorkflowInstanceID != 2 || r.FromSnapshotID != 0 || r.ToSnapshotID != 4611686018427387905 || r.State != "RUNNING" {
		t.Errorf("range after the reset %+v", r)
	}
}

func watermarks(t *testing.T, e *testEnv, id string) wire.Watermarks {
	t.Helper()
	got := e.send(http.MethodGet, "/api/v3/workflows/"+id+"/watermarks", "", "").expect(t, http.StatusOK)
	var out wire.Watermarks
	if err := json.Unmarshal(got.raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
