package e2e_test

import (
	"fmt"
	"testing"
	"time"
)

// scenarioBackfill: a backfill started through the signed API Gateway is
// driven by the deployed engine to SUCCEEDED, one run per date with the
// date as its TARGET_RUN_DATE, and the runs its output signals trigger in
// a downstream workflow count as its downstream; a repeated request id
// returns the same backfill, and an action its status refuses is a
// Maestro-style 409.
func scenarioBackfill(t *testing.T, d *Deployment) {
	id := uniqueID("backfill")
	name := "table." + id
	d.push(t, map[string]any{"properties": map[string]any{"run_strategy": map[string]any{"rule": "PARALLEL", "workflow_concurrency": 10}},
		"workflow": map[string]any{"id": id, "steps": []any{map[string]any{"step": map[string]any{"id": "load", "type": "NoOp",
			"signal_outputs": []any{map[string]any{"name": name,
				"params": map[string]any{"dt": map[string]any{"type": "STRING", "value": "${TARGET_RUN_DATE}"}}}}}}}}})
	down := id + "-report"
	d.push(t, map[string]any{"workflow": map[string]any{"id": down,
		"signal_triggers": []any{map[string]any{"definitions": map[string]any{name: map[string]any{}}}},
		"steps":           []any{map[string]any{"step": map[string]any{"id": "use", "type": "NoOp"}}}}})

	req := map[string]any{"param": "TARGET_RUN_DATE", "from": "20240101", "to": "20240104", "concurrency": 2,
		"downstream": true, "request_id": "e2e-" + id}
	code, created := d.CallAPI(t, "POST", "/api/v3/workflows/"+id+"/backfills", req)
	bid, _ := created["backfill_id"].(string)
	if code != 200 || bid == "" || created["partitions"] != float64(4) || created["status"] != "RUNNING" {
		t.Fatalf("start backfill: %d %v", code, created)
	}
	if code, again := d.CallAPI(t, "POST", "/api/v3/workflows/"+id+"/backfills", req); code != 200 || again["backfill_id"] != bid {
		t.Fatalf("repeated request id: %d %v", code, again)
	}
	var last map[string]any
	waitFor(t, "the backfill to end", 3*time.Minute, func() (bool, string) {
		code, body := d.CallAPI(t, "GET", "/api/v3/backfills/"+bid, nil)
		last = body
		return code == 200 && body["status"] != "RUNNING", fmt.Sprintf("%d %v", code, body["counts"])
	})
	counts, _ := last["counts"].(map[string]any)
	ds, _ := last["downstream"].(map[string]any)
	report, _ := ds[down].(map[string]any)
	if last["status"] != "SUCCEEDED" || counts["SUCCEEDED"] != float64(4) || report == nil ||
		report["counts"].(map[string]any)["SUCCEEDED"] != float64(4) {
		t.Fatalf("backfill ended %v", last)
	}
	for i, p := range last["partitions"].([]any) {
		part := p.(map[string]any)
		want := fmt.Sprintf("2024010%d", i+1)
		iid := int(part["workflow_instance_id"].(float64))
		run := d.waitForInstance(t, id, iid, "SUCCEEDED", time.Minute)
		if part["value"] != want || run.Status != "SUCCEEDED" || run.InitiatorType != "BACKFILL" {
			t.Fatalf("partition %d: %v, run %+v", i, part, run)
		}
	}
	code, refused := d.CallAPI(t, "POST", "/api/v3/backfills/"+bid+"/actions/pause", nil)
	if code != 409 || refused["status"] != "CONFLICT" || refused["retryable"] != false {
		t.Fatalf("pause of an ended backfill: %d %v", code, refused)
	}
	if code, list := d.CallAPI(t, "GET", "/api/v3/workflows/"+id+"/backfills", nil); code != 200 || len(list["backfills"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, list)
	}
}
