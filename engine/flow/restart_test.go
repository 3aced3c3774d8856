package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// branchDef: a, then b (fails) when fail is true, or c (sleeps) when not.
const branchDef = `{"workflow":{"id":"%s","params":{"fail":{"type":"BOOLEAN","value":false}},"steps":[
	{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"fail == true","c":"fail == false"}}}},
	{"step":{"id":"b","type":"Fail"}},
	{"step":{"id":"c","type":"Sleep","sleep_seconds":%g}}]}}`

func boolParam(v bool) workflow.Params {
	return workflow.Params{"fail": workflow.LiteralParam(workflow.ParamTypeBoolean, v)}
}

// carriedFrom returns the run a step row of run was carried over from (0
// when it ran in run itself).
func (e *env) carriedFrom(inst *execution.Instance, run int64, step string) int64 {
	e.t.Helper()
	a, err := e.runs.Attempt(context.Background(), inst.WorkflowID, inst.InstanceID, run, step, 0)
	if err != nil {
		e.t.Fatalf("step %s of run %d: %v", step, run, err)
	}
	var rs struct {
		CarriedFrom *struct {
			Run int64 `json:"workflow_run_id"`
		} `json:"carried_from"`
	}
	_ = json.Unmarshal(a.RuntimeState, &rs)
	if rs.CarriedFrom == nil {
		return 0
	}
	return rs.CarriedFrom.Run
}

func TestRestartFromIncomplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"incomplete","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
		{"step":{"id":"b","type":"Flaky","failures":1,"retry_policy":{"error_retry_limit":0},"transition":{"successors":{"c":"true"}}}},
		{"step":{"id":"c","type":"NoOp"}},
		{"step":{"id":"d","type":"NoOp"}}]}}`)
	first := e.wait(e.start("incomplete", nil), 10*time.Second)
	if first.Status != instance.WorkflowFailed {
		t.Fatalf("run 1 ended %s", first.Status)
	}
	ctx := context.Background()
	if _, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "incomplete", InstanceID: first.InstanceID,
		Policy: "RESTART_FROM_BEGINNING_TYPO"}); !errors.Is(err, execution.ErrInvalid) {
		t.Errorf("unknown policy: %v", err)
	}
	second, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "incomplete", InstanceID: first.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if second.RunID != 2 {
		t.Fatalf("restart created run %d", second.RunID)
	}
	got := e.wait(second, 10*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 2 ended %s: %s", got.Status, got.Timeline)
	}
	for step, want := range map[string]int64{"a": 1, "d": 1, "b": 0, "c": 0} {
		if from := e.carriedFrom(got, 2, step); from != want {
			t.Errorf("step %s of run 2 carried from run %d, want %d", step, from, want)
		}
	}
	if st := e.stepStatuses(got); st["a"] != instance.StepSucceeded || st["b"] != instance.StepSucceeded || st["c"] != instance.StepSucceeded {
		t.Errorf("run 2 steps %v", st)
	}
	// The aggregated view merges the runs: a and d from run 1, b and c from
	// run 2.
	agg := e.detail(got).AggregatedInfo
	if agg == nil || agg.WorkflowInstanceStatus != instance.WorkflowSucceeded {
		t.Fatalf("aggregated info %+v", agg)
	}
	for step, run := range map[string]int64{"a": 1, "d": 1, "b": 2, "c": 2} {
		if v := agg.StepAggregatedViews[step]; v.WorkflowRunID != run || v.Status != instance.StepSucceeded {
			t.Errorf("aggregated %s = %+v, want SUCCEEDED in run %d", step, v, run)
		}
	}
	// Run 1 read alone still shows its failure.
	old, err := e.runs.Detail(ctx, "incomplete", first.InstanceID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v := old.AggregatedInfo.StepAggregatedViews["c"]; v.Status != "NOT_CREATED" || old.AggregatedInfo.WorkflowInstanceStatus != instance.WorkflowFailed {
		t.Errorf("run 1 aggregated %+v", old.AggregatedInfo)
	}
	// Nothing is incomplete any more.
	if _, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "incomplete", InstanceID: first.InstanceID}); !errors.Is(err, execution.ErrConflict) {
		t.Errorf("restart from incomplete of a succeeded instance: %v", err)
	}
}

func TestRestartFromBeginningWithRunParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(fmtDef(branchDef, "beginning", 0.01))
	first := e.wait(e.start("beginning", boolParam(true)), 10*time.Second)
	if first.Status != instance.WorkflowFailed {
		t.Fatalf("run 1 ended %s", first.Status)
	}
	second, err := e.runs.Restart(context.Background(), execution.RestartRequest{WorkflowID: "beginning",
		InstanceID: first.InstanceID, Policy: execution.RestartFromBeginning, RunParams: boolParam(false)})
	if err != nil {
		t.Fatal(err)
	}
	got := e.wait(second, 10*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 2 ended %s", got.Status)
	}
	for _, step := range []string{"a", "c"} {
		if from := e.carriedFrom(got, 2, step); from != 0 {
			t.Errorf("step %s carried from run %d on a restart from the beginning", step, from)
		}
	}
	if st := e.stepStatuses(got); st["b"] != instance.StepUnsatisfied || st["c"] != instance.StepSucceeded {
		t.Errorf("run 2 steps %v", st)
	}
	var params map[string]struct {
		Value any `json:"value"`
	}
	_ = json.Unmarshal(got.Params, &params)
	if params["fail"].Value != false {
		t.Errorf("run 2 params %s", got.Params)
	}
}

func TestRestartOfLiveRunIsConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(fmtDef(branchDef, "live", 60))
	inst := e.start("live", nil)
	e.waitStep(inst, "c", instance.StepRunning)
	ctx := context.Background()
	if _, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "live", InstanceID: inst.InstanceID}); !errors.Is(err, execution.ErrConflict) {
		t.Errorf("restart of a live run: %v", err)
	}
	if _, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "live", InstanceID: 99}); !errors.Is(err, execution.ErrNotFound) {
		t.Errorf("restart of an unknown instance: %v", err)
	}
	if _, err := e.runs.Act(ctx, "live", inst.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.wait(inst, 10*time.Second)
}

// A restarted run survives an engine crash: the new node resumes it, the
// carried-over steps stay done and the rest runs once.
func TestRestartAcrossEngineRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.engine(flow.Config{NodeID: "node-a", Lease: time.Second})
	e.push(fmtDef(branchDef, "crashy", 1))
	first := e.wait(e.start("crashy", boolParam(true)), 10*time.Second)
	second, err := e.runs.Restart(context.Background(), execution.RestartRequest{WorkflowID: "crashy",
		InstanceID: first.InstanceID, RunParams: boolParam(false)})
	if err != nil {
		t.Fatal(err)
	}
	e.waitStep(second, "c", instance.StepRunning)
	a.Crash()
	e.engine(flow.Config{NodeID: "node-b", Lease: time.Second})
	got := e.wait(second, 30*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 2 ended %s: %s", got.Status, got.Timeline)
	}
	if from := e.carriedFrom(got, 2, "a"); from != 1 {
		t.Errorf("a carried from run %d", from)
	}
	if at := e.attempts(got, "c"); len(at) != 1 || at[0] != instance.StepSucceeded {
		t.Errorf("c attempts %v", at)
	}
}

func fmtDef(format, id string, secs float64) string { return fmt.Sprintf(format, id, secs) }

// Restart params are subject to param modes: MUTABLE_ON_START may not
// change on a restart.
func TestRestartParamsFollowModes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"modes","params":{
		"once":{"type":"LONG","value":1,"mode":"MUTABLE_ON_START"},
		"free":{"type":"LONG","value":1}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	inst := e.wait(e.start("modes", nil), 10*time.Second)
	ctx := context.Background()
	_, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "modes", InstanceID: inst.InstanceID,
		Policy: execution.RestartFromBeginning, RunParams: workflow.Params{"once": workflow.LiteralParam(workflow.ParamTypeLong, 2)}})
	if !errors.Is(err, execution.ErrInvalid) {
		t.Fatalf("override of a MUTABLE_ON_START param on restart: %v", err)
	}
	// The engine's own defaults keep their modes too: RUN_TS may be set at
	// start only.
	_, err = e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "modes", InstanceID: inst.InstanceID,
		Policy: execution.RestartFromBeginning, RunParams: workflow.Params{"RUN_TS": workflow.LiteralParam(workflow.ParamTypeLong, 5)}})
	if !errors.Is(err, execution.ErrInvalid) {
		t.Fatalf("override of RUN_TS on restart: %v", err)
	}
	again, err := e.runs.Restart(ctx, execution.RestartRequest{WorkflowID: "modes", InstanceID: inst.InstanceID,
		Policy: execution.RestartFromBeginning, RunParams: workflow.Params{"free": workflow.LiteralParam(workflow.ParamTypeLong, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(again, 10*time.Second); got.Status != instance.WorkflowSucceeded || got.RunID != 2 {
		t.Errorf("restart run %d ended %s", got.RunID, got.Status)
	}
}

// detail reads a run with its aggregated view.
func (e *env) detail(inst *execution.Instance) *execution.Instance {
	e.t.Helper()
	d, err := e.runs.Detail(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}
