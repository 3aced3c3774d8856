package params

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// TestRememberedDefaultsAreThoseEvaluated: runs that share some inputs of
// the default params and differ in others (the initiator's zone, the
// owner, the first trigger's zone, RUN_TS by an hour or by a millisecond, a
// run param overriding RUN_TS or WORKFLOW_CRON_TIMEZONE) get, with values
// remembered from the runs before them, exactly the values an evaluation
// with nothing remembered gives. A memo key that left out an input (the
// owner, a zone read through params.getFromInstance) fails here.
func TestRememberedDefaultsAreThoseEvaluated(t *testing.T) {
	ctx := context.Background()
	hour := time.Date(2026, 3, 8, 9, 59, 59, 999e6, time.UTC) // a DST change in Los Angeles that day
	plain := &workflow.Workflow{ID: "wf"}
	triggered := &workflow.Workflow{ID: "wf", TimeTriggers: []workflow.TimeTrigger{{Cron: "0 * * * *", Timezone: "Asia/Kolkata"}}}
	long := func(v int64) workflow.Param { return workflow.LiteralParam(workflow.ParamTypeLong, v) }
	str := func(v string) workflow.Param { return workflow.LiteralParam(workflow.ParamTypeString, v) }
	var runs []WorkflowInput
	for _, wf := range []*workflow.Workflow{plain, triggered} {
		for _, now := range []time.Time{hour, hour.Add(time.Millisecond), hour.Add(time.Hour)} {
			for _, initiator := range []map[string]any{nil, {"type": "TIME", "timezone": "America/Los_Angeles"}, {"type": "TIME", "timezone": "Pacific/Chatham"}} {
				for _, owner := range []string{"alice", "bob"} {
					runs = append(runs, WorkflowInput{Workflow: wf, Now: now, Initiator: initiator, Owner: owner, InstanceID: 1, RunID: 1})
				}
			}
		}
		runs = append(runs,
			WorkflowInput{Workflow: wf, Now: hour, Owner: "alice", RunParams: workflow.Params{RunTS: long(hour.Add(-48 * time.Hour).UnixMilli())}},
			WorkflowInput{Workflow: wf, Now: hour, Owner: "alice", RunParams: workflow.Params{WorkflowCronTimezone: str("Europe/Berlin")}})
	}
	evaluate := func(in WorkflowInput) Values {
		t.Helper()
		got, err := EvaluateWorkflow(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	fresh := make([]Values, len(runs))
	for i, in := range runs {
		clear(defaultMemo.vals)
		fresh[i] = evaluate(in)
	}
	clear(defaultMemo.vals)
	for round := range 2 {
		for i, in := range runs {
			if got := evaluate(in); !reflect.DeepEqual(got, fresh[i]) {
				t.Fatalf("round %d, run %d (%+v): with values remembered\n%v\nwith none\n%v", round, i, in, got, fresh[i])
			}
		}
	}
	if len(defaultMemo.vals) == 0 {
		t.Fatal("no default value was remembered")
	}
	// The owner and the zones differ between these runs: each is part of
	// what its params were remembered by.
	a, b := fresh[0], fresh[1]
	if a[Owner].Value == b[Owner].Value {
		t.Fatalf("two owners, one owner param: %v", a[Owner])
	}
}

// TestDefaultInputsNameTheRunsFieldsRead: every params.getFromInstance a
// default expression calls is among the inputs it is remembered by.
func TestDefaultInputsNameTheRunsFieldsRead(t *testing.T) {
	want := map[string][]string{DSLDefaultTZ: {FirstTimeTriggerTimezone}, WorkflowCronTimezone: {InitiatorTimezone}, Owner: {Owner}}
	for name := range defaultExpressions {
		if got := defaultInputs()[name].fields; !reflect.DeepEqual(got, want[name]) {
			t.Errorf("%s reads the run's fields %v, want %v", name, got, want[name])
		}
	}
}
