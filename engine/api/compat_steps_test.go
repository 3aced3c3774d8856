package api_test

import (
	"net/http"
	"testing"
	"time"
)

// A step instance carries Maestro's timeout_in_millis (the step's
// effective timeout, one written with params resolved) and signal_outputs
// (the output signals its attempt announced: name, params, signal_id,
// announce_time), and its timeline has Maestro's events: STATUS with the
// status alone, the reason in a LOG event with a level.
func TestStepInstanceTimeoutSignalOutputsAndTimeline(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "tester", `{"workflow": {"id": "step-fields",
	  "params": {"mins": {"value": 5, "type": "LONG"}},
	  "steps": [
	    {"step": {"id": "a", "type": "NoOp", "timeout": "1h", "transition": {"successors": {"b": "true"}},
	      "signal_outputs": [
	        {"name": "out/first", "params": {"rows": {"expression": "mins * 2", "type": "LONG"}}},
	        {"name": "out/second", "params": {"who": {"value": "a", "type": "STRING"}}}]}},
	    {"step": {"id": "b", "type": "NoOp", "timeout": "${mins}m", "transition": {"successors": {"c": "true"}}}},
	    {"step": {"id": "c", "type": "Sleep", "params": {"sleep_seconds": {"value": "oops", "type": "STRING"}}}}
	  ]}}`).expect(t, http.StatusOK)
	start := time.Now().UnixMilli()
	e.send(http.MethodPost, "/api/v3/workflows/step-fields/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	const path = "/api/v3/workflows/step-fields/instances/1"
	if r := e.waitTerminalWithin(path, time.Minute); r.body["status"] != "FAILED" {
		t.Fatalf("run ended %v, want FAILED (step c's sleep_seconds is not a number): %s", r.body["status"], r.raw)
	}

	a := e.send(http.MethodGet, path+"/runs/1/steps/a/attempts/1", "tester", "").expect(t, http.StatusOK)
	checkShape(t, "step-instance", a)
	if a.body["timeout_in_millis"] != float64(3600000) {
		t.Errorf("a: timeout_in_millis %v, want 3600000", a.body["timeout_in_millis"])
	}
	so, _ := a.body["signal_outputs"].(map[string]any)
	outs, _ := so["outputs"].([]any)
	if len(outs) != 2 {
		t.Fatalf("a: signal_outputs %v, want two outputs", a.body["signal_outputs"])
	}
	first, _ := outs[0].(map[string]any)
	second, _ := outs[1].(map[string]any)
	p, _ := first["params"].(map[string]any)
	if first["name"] != "out/first" || p["rows"] != float64(10) || second["name"] != "out/second" {
		t.Errorf("a: signal_outputs %v, want out/first (rows 10) then out/second", outs)
	}
	id, _ := first["signal_id"].(float64)
	at, _ := first["announce_time"].(float64)
	if id <= 0 || int64(at) < start {
		t.Errorf("a: signal_id %v, announce_time %v, want a seq and a time after the start", first["signal_id"], first["announce_time"])
	}
	sig := e.send(http.MethodGet, "/api/v3/signals/out%2Ffirst/instances/latest", "tester", "").expect(t, http.StatusOK)
	if sig.body["seq_id"] != first["signal_id"] {
		t.Errorf("signal_id %v is not the announced signal's seq_id %v", first["signal_id"], sig.body["seq_id"])
	}

	b := e.send(http.MethodGet, path+"/runs/1/steps/b/attempts/1", "tester", "").expect(t, http.StatusOK)
	if b.body["timeout_in_millis"] != float64(300000) {
		t.Errorf("b: timeout_in_millis %v, want 300000 (${mins}m with mins 5)", b.body["timeout_in_millis"])
	}
	if _, ok := b.body["signal_outputs"]; ok {
		t.Errorf("b announced no signal but has signal_outputs: %v", b.body["signal_outputs"])
	}
	c := e.send(http.MethodGet, path+"/runs/1/steps/c/attempts/1", "tester", "").expect(t, http.StatusOK)
	if _, ok := c.body["timeout_in_millis"]; ok {
		t.Errorf("c has no timeout but timeout_in_millis %v", c.body["timeout_in_millis"])
	}

	// Timelines: STATUS events carry the status alone; reasons are LOG
	// events with a level, WARN for a failure.
	run := e.send(http.MethodGet, path, "tester", "").expect(t, http.StatusOK)
	for who, r := range map[string]response{"run": run, "step c": c} {
		events, _ := r.body["timeline"].([]any)
		var warn bool
		for _, ev := range events {
			m := ev.(map[string]any)
			switch m["type"] {
			case "STATUS":
				if _, has := m["message"]; has || m["status"] == nil {
					t.Errorf("%s: STATUS event %v, want the status alone, as Maestro's TimelineStatusEvent", who, m)
				}
			case "LOG":
				if m["level"] == nil || m["message"] == nil {
					t.Errorf("%s: LOG event %v without level or message", who, m)
				}
				warn = warn || m["level"] == "WARN"
			}
		}
		if !warn {
			t.Errorf("%s: no WARN LOG event says why it failed: %v", who, events)
		}
	}
}

// A run carries Maestro's internal_id (its workflow's, the same for every
// run of the workflow) and execution_id (the run's uuid once an engine
// started it; absent while it waits in its run strategy's queue).
func TestInstanceInternalAndExecutionID(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	for _, id := range []string{"ids-a", "ids-b"} {
		e.send(http.MethodPost, "/api/v3/workflows", "tester", `{"properties": {"run_strategy": "SEQUENTIAL"},
		  "workflow": {"id": "`+id+`", "steps": [{"step": {"id": "s", "type": "Sleep",
		    "params": {"sleep_seconds": {"value": 1500, "type": "LONG"}}}}]}}`).expect(t, http.StatusOK)
	}
	for range 2 {
		e.send(http.MethodPost, "/api/v3/workflows/ids-a/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	}
	e.send(http.MethodPost, "/api/v3/workflows/ids-b/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	e.waitAttempt("/api/v3/workflows/ids-a/instances/1/runs/1/steps/s/attempts/latest", "RUNNING")
	first := e.send(http.MethodGet, "/api/v3/workflows/ids-a/instances/1", "tester", "").expect(t, http.StatusOK)
	queued := e.send(http.MethodGet, "/api/v3/workflows/ids-a/instances/2", "tester", "").expect(t, http.StatusOK)
	other := e.send(http.MethodGet, "/api/v3/workflows/ids-b/instances/1", "tester", "").expect(t, http.StatusOK)
	if first.body["execution_id"] == nil || first.body["execution_id"] != first.body["workflow_uuid"] {
		t.Errorf("a started run: execution_id %v, want its workflow_uuid %v", first.body["execution_id"], first.body["workflow_uuid"])
	}
	if queued.body["status"] != "CREATED" {
		t.Fatalf("the second run of a SEQUENTIAL workflow is %v, want CREATED (queued)", queued.body["status"])
	}
	if _, ok := queued.body["execution_id"]; ok {
		t.Errorf("a queued run has execution_id %v; Maestro sets it when the run is launched", queued.body["execution_id"])
	}
	a1, _ := first.body["internal_id"].(float64)
	a2, _ := queued.body["internal_id"].(float64)
	b1, _ := other.body["internal_id"].(float64)
	if a1 <= 0 || a1 != a2 || b1 <= 0 || a1 == b1 {
		t.Errorf("internal_id: ids-a runs %v and %v (want one number), ids-b %v (want another)", a1, a2, b1)
	}
	page := e.send(http.MethodGet, "/api/v3/workflows/ids-a/instances?first=10", "tester", "").expect(t, http.StatusOK)
	for _, el := range page.body["elements"].([]any) {
		if el.(map[string]any)["internal_id"] != a1 {
			t.Errorf("listed run has internal_id %v, want %v", el.(map[string]any)["internal_id"], a1)
		}
	}
	e.send(http.MethodPut, "/api/v3/workflows/ids-a/actions/kill", "tester", "").expect(t, http.StatusAccepted)
	e.send(http.MethodPut, "/api/v3/workflows/ids-b/actions/kill", "tester", "").expect(t, http.StatusAccepted)
}

// A start request's runtime_tags and artifacts are taken as Maestro takes
// them: the tags join the run's workflow tags (runtime_workflow) and its
// run_config.runtime_tags, the artifacts are the run's artifacts.
func TestStartWithRuntimeTagsAndArtifacts(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withSampleEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "tester", `{"workflow": {"id": "rt-tags", "tags": ["team", {"name": "tier", "namespace": "PLATFORM"}],
	  "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/rt-tags/versions/latest/actions/start", "tester", `{"initiator": {"type": "manual"},
	  "runtime_tags": [{"name": "backfill", "namespace": "RUNTIME"}, "tier"],
	  "artifacts": {"lineage": {"type": "DEFAULT", "data": {"source": "s3://bucket/key"}}}}`).expect(t, http.StatusOK)
	done := e.waitTerminalWithin("/api/v3/workflows/rt-tags/instances/1", time.Minute)
	if done.body["status"] != "SUCCEEDED" {
		t.Fatalf("run ended %v: %s", done.body["status"], done.raw)
	}
	names := map[string]bool{}
	rw, _ := done.body["runtime_workflow"].(map[string]any)
	tags, _ := rw["tags"].([]any)
	for _, tg := range tags {
		switch x := tg.(type) {
		case string:
			names[x] = true
		case map[string]any:
			names[x["name"].(string)] = true
		}
	}
	if len(tags) != 3 || !names["team"] || !names["tier"] || !names["backfill"] {
		t.Errorf("runtime_workflow.tags = %v, want team, tier and backfill (tier once)", tags)
	}
	rc, _ := done.body["run_config"].(map[string]any)
	if rt, _ := rc["runtime_tags"].([]any); len(rt) != 2 {
		t.Errorf("run_config = %v, want its runtime_tags", rc)
	}
	art, _ := done.body["artifacts"].(map[string]any)
	lineage, _ := art["lineage"].(map[string]any)
	data, _ := lineage["data"].(map[string]any)
	if lineage["type"] != "DEFAULT" || data["source"] != "s3://bucket/key" {
		t.Errorf("artifacts = %v, want the start's", done.body["artifacts"])
	}
	// The version's own tags are unchanged; a run started without runtime
	// tags has the version's.
	v := e.send(http.MethodGet, "/api/v3/workflows/rt-tags/versions/latest", "tester", "").expect(t, http.StatusOK)
	if w, _ := v.body["workflow"].(map[string]any); len(w["tags"].([]any)) != 2 {
		t.Errorf("the version's tags changed: %v", w["tags"])
	}
	e.send(http.MethodPost, "/api/v3/workflows/rt-tags/versions/latest/actions/start", "tester", `{}`).expect(t, http.StatusOK)
	second := e.waitTerminalWithin("/api/v3/workflows/rt-tags/instances/2", time.Minute)
	if rw, _ := second.body["runtime_workflow"].(map[string]any); len(rw["tags"].([]any)) != 2 {
		t.Errorf("a run without runtime tags has tags %v", rw["tags"])
	}
	if _, ok := second.body["artifacts"]; ok {
		t.Errorf("a run started without artifacts has %v", second.body["artifacts"])
	}
}
