package api_test

import (
	"net/http"
	"testing"
)

// The seed's backfill workflow over REST: pushed as YAML, run, its
// iterations readable as instances of the foreach's workflow id, and the
// parent's rollup counting the step before the loop plus one leaf per
// iteration.
func TestForeachBackfillOverREST(t *testing.T) {
	t.Parallel()
	e := newTestServer(t)
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows/yaml", "alice", `
Workflow:
  id: backfill
  jobs:
    - job:
        id: dates
        type: NoOp
        '!days': return Util.intsBetween(20240101, 20240111, 1);
    - foreach:
        id: per-day
        concurrency: 4
        params:
          day: ${days@dates}
        jobs:
          - job:
              id: load
              type: NoOp
              arg1: $day
`).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/backfill/versions/latest/actions/start", "alice", "").expect(t, http.StatusOK)
	done := e.waitTerminal("/api/v3/workflows/backfill/instances/1")
	if done.body["status"] != "SUCCEEDED" {
		t.Fatalf("backfill ended %s", done.raw)
	}
	rollup := done.body["runtime_overview"].(map[string]any)["rollup_overview"].(map[string]any)
	if rollup["total_leaf_count"].(float64) != 11 {
		t.Errorf("rollup %v, want 11 leaves (dates + 10 days)", rollup)
	}
	it := e.send(http.MethodGet, "/api/v3/workflows/backfill:1:per-day/instances/10", "", "").expect(t, http.StatusOK)
	if it.body["status"] != "SUCCEEDED" {
		t.Fatalf("iteration 10: %s", it.raw)
	}
	params := it.body["params"].(map[string]any)
	if day := params["day"].(map[string]any)["value"].(float64); day != 20240110 {
		t.Errorf("iteration 10 day %v, want 20240110", day)
	}
	step := e.send(http.MethodGet, "/api/v3/workflows/backfill/instances/1/runs/1/steps/per-day/attempts/1", "", "").expect(t, http.StatusOK)
	data := step.body["runtime_state"].(map[string]any)["data"].(map[string]any)
	if data["foreach_workflow_id"] != "backfill:1:per-day" || data["foreach_total"].(float64) != 10 {
		t.Errorf("foreach step data %v", data)
	}
}
