package params_test

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// BenchmarkEvaluateWorkflow: a run's workflow params evaluated at its
// start, as the engine does for every run an API call, a trigger or a
// signal starts (Maestro's ~24 default params, most of them date
// expressions, and a few of the definition's own). Each run gets a RUN_TS
// a millisecond later than the one before, as a burst of starts does.
func BenchmarkEvaluateWorkflow(b *testing.B) {
	ctx := context.Background()
	wf := &workflow.Workflow{ID: "calls", Params: workflow.Params{
		"region": str("us-east-1"),
		"limit":  lit(workflow.ParamTypeLong, int64(10)),
		"target": expr(workflow.ParamTypeString, `"s3://bucket/" + RUN_DATE + "/" + region`),
	}}
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	initiator := map[string]any{"type": "MANUAL", "user": "tester"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		in := params.WorkflowInput{Workflow: wf, InstanceID: int64(i), RunID: 1, Owner: "tester",
			Now: start.Add(time.Duration(i) * time.Millisecond), Initiator: initiator}
		if _, err := params.EvaluateWorkflow(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
