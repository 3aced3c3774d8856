package backfill

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// pushAndBackfill stores a workflow and a backfill of two values on it.
func pushAndBackfill(t *testing.T, pool *pgxpool.Pool, defs *definition.Store, runs *execution.Service) {
	t.Helper()
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"o","run_strategy":"PARALLEL"},
		"workflow":{"id":"wf","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := defs.Create(ctx, d, "o"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := backfill.NewStore(pool, defs, runs).Create(ctx, backfill.CreateRequest{WorkflowID: "wf", Param: "P",
		Spec: backfill.Spec{Values: []string{"a", "b"}}, Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
}
