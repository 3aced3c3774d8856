package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/functions/timetrigger/internal/timetriggerenv"
)

// A run a time trigger starts is in the invocation's trace: the handler
// as main wires it (tracing.Lambda) continues the X-Ray trace header Lambda
// passes, and the run stores it (workflow_instance.trace_context), which
// the engine's work on the run and its events continue (docs/tracing.md).
func TestTriggeredRunIsInTheInvocationsTrace(t *testing.T) {
	ctx := context.Background()
	pool, _ := dueTrigger(t)
	s, err := timetriggerenv.Scheduler(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	handle := tracingHandler(nil, s)
	// aws-lambda-go puts the invocation's trace header in the context
	// under this key (and in _X_AMZN_TRACE_ID).
	//lint:ignore SA1029 the string key is aws-lambda-go's own
	ictx := context.WithValue(ctx, "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	ictx, cancel := context.WithTimeout(ictx, time.Minute)
	defer cancel()
	if st, err := handle(ictx, json.RawMessage(`{"scheduled_time":"2024-05-01T10:00:00Z","execution_id":"e","attempt":"1"}`)); err != nil || st.Started != 1 {
		t.Fatalf("invocation: %+v %v", st, err)
	}
	var tc string
	if err := pool.QueryRow(ctx, `SELECT COALESCE(trace_context, '') FROM workflow_instance WHERE workflow_id = 'wf'`).Scan(&tc); err != nil {
		t.Fatal(err)
	}
	if len(tc) != 55 || tc[3:35] != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("run trace context %q, want trace 5759e988bd862e3fe1be46a994272793", tc)
	}
}
