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

// BenchmarkEvaluateStep: an attempt's params evaluated as the engine does
// for every attempt it starts, for a step of a typical data pipeline: a
// query built from a workflow param and an upstream step's output
// (params.getFromStep), a threshold computed from another, and a
// validator that reads the upstream too. Each evaluation is a new attempt
// with its own upstream values.
func BenchmarkEvaluateStep(b *testing.B) {
	ctx := context.Background()
	defs := workflow.Params{
		"table": str("events"),
		"query": expr(workflow.ParamTypeString,
			`"SELECT * FROM " + table + " WHERE dt = '" + run_date + "' AND batch = " + params.getFromStep("extract", "batch")`),
		"limit": {Type: workflow.ParamTypeLong, Expression: ptr(`rows * 2 + params.getFromStep("extract", "batch")`),
			Validator: `param >= params.getFromStep("extract", "batch")`},
		"label": expr(workflow.ParamTypeString, `step_id + "-" + workflow_instance_id`),
	}
	wfVals := map[string]any{"run_date": "20261129", "rows": int64(500)}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		batch := i
		in := params.StepInput{WorkflowID: "pipeline", InstanceID: i, RunID: 1, StepID: "load", StepType: "NoOp",
			AttemptID: 1, UUID: "7d1c5f8e-0000-4000-8000-000000000001", Defs: defs, Workflow: wfVals,
			Steps: func(step, name string) (any, bool) {
				if step == "extract" && name == "batch" {
					return batch, true
				}
				return nil, false
			}}
		vals, err := params.EvaluateStep(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		if got := vals["limit"].Value; got != 1000+batch {
			b.Fatalf("limit = %v, want %d", got, 1000+batch)
		}
	}
}

func ptr(s string) *string { return &s }
