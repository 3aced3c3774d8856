package signals_test

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/tracing"
)

// A run a signal triggers is in the trace of the invocation that handled
// the signal (tracing.Lambda gives the handler's context that trace): the
// run stores it (workflow_instance.trace_context), and the engine's work on
// the run and its events continue it (docs/tracing.md).
func TestTriggeredRunIsInTheHandlersTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "on-orders",
		"signal_triggers": [{"definitions": {"landed/orders": {}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	ctx := tracing.WithTraceparent(context.Background(), "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
	res, err := e.h.Handle(ctx, batch(s3Event("sales/orders/part+0001.parquet", "0055AED6DCD90281E5")))
	if err != nil || len(res.BatchItemFailures) != 0 {
		t.Fatalf("handle: %v %v", res.BatchItemFailures, err)
	}
	var tc string
	if err := e.Pool.QueryRow(context.Background(), `SELECT COALESCE(trace_context, '') FROM workflow_instance WHERE workflow_id = 'on-orders'`).Scan(&tc); err != nil {
		t.Fatal(err)
	}
	if len(tc) != 55 || tc[3:35] != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("run trace context %q, want trace 5759e988bd862e3fe1be46a994272793", tc)
	}
}
