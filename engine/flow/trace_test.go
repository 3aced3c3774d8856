package flow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// traceSeen is a runtime that records, per node, the trace of each call's
// context. Its Execute keeps the attempt running on node-a and finishes it
// anywhere else.
type traceSeen struct {
	mu     sync.Mutex
	byNode map[string][]trace.TraceID
}

func (s *traceSeen) record(ctx context.Context, a *stepruntime.Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNode[a.Node] = append(s.byNode[a.Node], trace.SpanContextFromContext(ctx).TraceID())
}

func (s *traceSeen) seen(node string) []trace.TraceID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]trace.TraceID(nil), s.byNode[node]...)
}

func (s *traceSeen) Start(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	s.record(ctx, a)
	return stepruntime.Result{State: stepruntime.Done}
}

func (s *traceSeen) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	s.record(ctx, a)
	if a.Node == "node-a" {
		return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: 20 * time.Millisecond}
	}
	return stepruntime.Result{State: stepruntime.Done}
}

func (s *traceSeen) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// A run whose node dies mid-step is rebuilt by the node that takes its
// group over from the database, and its work there continues the trace
// the run was started in (workflow_instance.trace_context): the step's
// runtime calls on both nodes see that trace id.
func TestAdoptedRunContinuesItsTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := &traceSeen{byNode: map[string][]trace.TraceID{}}
	rts := testRuntimes()
	rts["Exclusive"] = seen // a step type the test validator knows, run by the recorder
	e.push(`{"workflow":{"id":"traced","steps":[{"step":{"id":"s","type":"Exclusive"}}]}}`)
	a := e.engine(flow.Config{NodeID: "node-a", Runtimes: rts, Lease: time.Second})

	const tp = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	want := trace.SpanContextFromContext(tracing.WithTraceparent(context.Background(), tp)).TraceID()
	res, err := e.runs.Start(tracing.WithTraceparent(context.Background(), tp), execution.StartRequest{WorkflowID: "traced", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen.seen("node-a")) < 2 { // Start and a first Execute
		if time.Now().After(deadline) {
			t.Fatal("the step never ran on node-a")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.Crash()
	e.engine(flow.Config{NodeID: "node-b", Runtimes: rts, Lease: time.Second})
	if got := e.wait(res.Instance, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run %s, want SUCCEEDED", got.Status)
	}
	onB := seen.seen("node-b")
	if len(onB) == 0 {
		t.Fatal("node-b never called the step's runtime")
	}
	for node, ids := range map[string][]trace.TraceID{"node-a": seen.seen("node-a"), "node-b": onB} {
		for i, id := range ids {
			if id != want {
				t.Errorf("%s call %d ran in trace %s, want the run's %s", node, i, id, want)
			}
		}
	}
}
