package params

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// TestKeptProgramsServeOnlyTheirFunctions: a workflow's expression
// compiled for its dry run at push (params.getFromSignal answering the
// dry run's value) is kept, and the run that a signal starts later still
// reads the signal: programs compiled with other functions than the
// workflow params' are neither kept nor served from what was kept.
func TestKeptProgramsServeOnlyTheirFunctions(t *testing.T) {
	ctx := context.Background()
	wf := &workflow.Workflow{ID: "wf", Params: workflow.Params{
		"day":   workflow.ExpressionParam(workflow.ParamTypeLong, `params.getFromSignal("day")`),
		"label": workflow.ExpressionParam(workflow.ParamTypeString, `"run-" + day`),
	}, SignalTriggers: []workflow.SignalTrigger{{Params: workflow.Params{"day": workflow.LiteralParam(workflow.ParamTypeLong, int64(1))}}}}
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	dry, err := EvaluateWorkflow(ctx, WorkflowInput{Workflow: wf, DryRun: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := dry["day"].Value; got != DryRunSignalValue {
		t.Fatalf("dry run: day = %v, want %v", got, DryRunSignalValue)
	}
	compiled.mu.RLock()
	kept := compiled.progs[`"run-" + day`] != nil && compiled.progs[`params.getFromSignal("day")`] != nil
	compiled.mu.RUnlock()
	if !kept {
		t.Fatal("the workflow params' programs were not kept")
	}
	signalled, err := EvaluateWorkflow(ctx, WorkflowInput{Workflow: wf, Now: now,
		Signals: &SignalSource{Trigger: true, TriggerParams: map[string]any{"day": int64(20260301)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := signalled["day"].Value; got != int64(20260301) {
		t.Fatalf("a run started by a signal: day = %v, want the signal's 20260301", got)
	}
	if got := signalled["label"].Value; got != "run-20260301" {
		t.Fatalf("label = %v", got)
	}
}
