package api_test

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A start through the REST API costs its caller's authorization (the
// workflow's owner and operators, one statement) and the start's four
// (execution.MaxStatementsPerStart; issue 28): five for a lone start.
func TestStartThroughTheAPIStatementCount(t *testing.T) {
	t.Parallel()
	pool, stmts := dbtest.CountingPool(t)
	e := newTestServerOn(t, pool)
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"alice","run_strategy":"PARALLEL"},` +
		`"workflow":{"id":"wf","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.defs.Create(context.Background(), d, "alice"); err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{"", `{"request_id":"r-1"}`, `{"run_params":{"x":{"type":"STRING","value":"y"}}}`} {
		stmts.Reset()
		r := e.send("POST", "/api/v3/workflows/wf/versions/latest/actions/start", "alice", body).expect(t, 200)
		if r.body["status"] != "CREATED" {
			t.Fatalf("start %d: %s", i, r.raw)
		}
		if n := stmts.Total(); n > 5 {
			t.Errorf("start %d through the API sent %d statements, want at most 5: %v", i, n, stmts.BySQL())
		}
	}
}
