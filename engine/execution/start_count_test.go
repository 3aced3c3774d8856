package execution

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// MaxStatementsPerStart is what a start admitted at once may cost the API
// side (issue 28): BEGIN, the statement that locks the workflow, allocates
// the instance id, reads the version (and finds a repeated request id),
// the statement that checks admission, inserts the run and enqueues its
// start message, and COMMIT.
const MaxStatementsPerStart = 4

// A start admitted at once costs at most MaxStatementsPerStart
// statements, with or without a request id, by a version number or by
// name; a repeat of the same version does not read its definition again.
func TestStartStatementCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, stmts := dbtest.CountingPool(t)
	defs := definition.NewStore(pool)
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"o","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},` +
		`"workflow":{"id":"w","params":{"p":{"type":"STRING","value":"x"}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(ctx, d, "o"); err != nil {
		t.Fatal(err)
	}
	svc := New(pool, defs, 4)
	for i, req := range []StartRequest{
		{WorkflowID: "w", Version: "latest"},
		{WorkflowID: "w", Version: "latest"},
		{WorkflowID: "w", Version: "1", RequestID: "r-1"},
		{WorkflowID: "w", Version: "default", RequestID: "r-2", RunParams: workflow.Params{"p": {Type: "STRING", Value: "y"}}},
	} {
		stmts.Reset()
		res, err := svc.Start(ctx, req)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if res.Duplicated || res.Instance.Queued {
			t.Fatalf("start %d: duplicated %v queued %v, want a run admitted at once", i, res.Duplicated, res.Instance.Queued)
		}
		if n := stmts.Total(); n > MaxStatementsPerStart {
			t.Errorf("start %d (%+v) sent %d statements, want at most %d: %s", i, req, n, MaxStatementsPerStart, heads(stmts.BySQL()))
		}
	}
}

// heads names statements by their first 60 characters, for a failure
// message.
func heads(bySQL map[string]int64) string {
	var out []string
	for sql, n := range bySQL {
		out = append(out, fmt.Sprintf("%d× %.60s", n, sql))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}
