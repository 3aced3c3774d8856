package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// Every step status has an entry, live statuses may be stopped, killed and
// skipped, and only WAITING_FOR_SIGNALS may bypass dependencies.
func TestStepActionMap(t *testing.T) {
	t.Parallel()
	m := run.StepActionMap()
	all := []instance.StepStatus{"CREATED", "INITIALIZED", "PAUSED", "WAITING_FOR_SIGNALS", "EVALUATING_PARAMS",
		"WAITING_FOR_PERMITS", "STARTING", "RUNNING", "FINISHING", "DISABLED", "UNSATISFIED", "SKIPPED", "SUCCEEDED",
		"COMPLETED_WITH_ERROR", "USER_FAILED", "PLATFORM_FAILED", "TIMEOUT_FAILED", "FATALLY_FAILED", "INTERNALLY_FAILED",
		"STOPPED", "TIMED_OUT"}
	actions := []run.Action{run.StepRestart, run.StepSkip, run.StepStop, run.StepKill, run.StepBypassDependencies}
	for _, st := range all {
		if len(m[st]) == 0 {
			t.Errorf("%s allows no action", st)
		}
		for _, a := range actions {
			err := run.CheckStepAction(st, a)
			if allowed := slices.Contains(m[st], a); allowed != (err == nil) {
				t.Errorf("%s %s: map says %v, check says %v", st, a, allowed, err)
			}
			if err != nil && !errors.Is(err, run.ErrActionNotAllowed) {
				t.Errorf("%s %s: %v", st, a, err)
			}
			live := !st.IsTerminal()
			if live && (a == run.StepStop || a == run.StepKill || a == run.StepSkip) && err != nil {
				t.Errorf("live %s must allow %s", st, a)
			}
			if a == run.StepBypassDependencies && (err == nil) != (st == instance.StepWaitingForSignals) {
				t.Errorf("bypass-dependencies from %s: %v", st, err)
			}
		}
	}
	if err := run.CheckStepAction("NOT_CREATED", run.StepStop); err == nil {
		t.Error("an action on a step with no attempt was allowed")
	}
	im := run.InstanceActionMap()
	for st, want := range map[instance.WorkflowStatus]run.Action{
		instance.WorkflowInProgress: run.ActionStop, instance.WorkflowFailed: run.ActionUnblock,
		instance.WorkflowStopped: run.ActionRestart, instance.WorkflowSucceeded: run.ActionRestart,
	} {
		if !slices.Contains(im[st], want) {
			t.Errorf("instance %s does not allow %s", st, want)
		}
	}
	if err := run.CheckInstanceAction(instance.WorkflowSucceeded, run.ActionUnblock); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Errorf("unblock of a succeeded run: %v", err)
	}
}

func (e *env) stepAct(inst *execution.Instance, step string, action run.Action) (*execution.StepActionResult, error) {
	return e.runs.StepAct(context.Background(), inst.WorkflowID, inst.InstanceID, 0, step, action)
}

func (e *env) mustStepAct(inst *execution.Instance, step string, action run.Action) *execution.StepActionResult {
	e.t.Helper()
	res, err := e.stepAct(inst, step, action)
	if err != nil {
		e.t.Fatalf("%s %s: %v", action, step, err)
	}
	return res
}

// Actions on a RUNNING step: stop, kill and skip.
func TestStepActionsOnRunningStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(`{"workflow":{"id":"running","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":60,"transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}}]}}`, `"PARALLEL"`))
	for _, tc := range []struct {
		action    run.Action
		step      instance.StepStatus
		run       instance.WorkflowStatus
		afterRuns bool
	}{
		{run.StepStop, instance.StepStopped, instance.WorkflowStopped, false},
		{run.StepKill, instance.StepFatallyFailed, instance.WorkflowFailed, false},
		{run.StepSkip, instance.StepSkipped, instance.WorkflowSucceeded, true},
	} {
		inst := e.start("running", nil)
		e.waitStep(inst, "nap", instance.StepRunning)
		// Not allowed from RUNNING: a clear conflict.
		for _, bad := range []run.Action{run.StepRestart, run.StepBypassDependencies} {
			if _, err := e.stepAct(inst, "nap", bad); !errors.Is(err, execution.ErrConflict) || !errors.Is(err, run.ErrActionNotAllowed) {
				t.Errorf("%s of a RUNNING step: %v", bad, err)
			}
		}
		if res := e.mustStepAct(inst, "nap", tc.action); res.Status != "ACCEPTED" {
			t.Errorf("%s answered %+v", tc.action, res)
		}
		got := e.wait(inst, 10*time.Second)
		st := e.stepStatuses(got)
		if got.Status != tc.run || st["nap"] != tc.step || (st["after"] == instance.StepSucceeded) != tc.afterRuns {
			t.Errorf("%s: run %s, steps %v", tc.action, got.Status, st)
		}
		if _, err := e.stepAct(got, "nap", run.StepStop); !errors.Is(err, execution.ErrConflict) {
			t.Errorf("stop of a %s step: %v", st["nap"], err)
		}
	}
}

// Actions on a failed step waiting for its automatic retry (USER_FAILED
// with a long backoff): restart retries at once, skip, stop and kill end
// the step with a new attempt.
func TestStepActionsOnRetryingStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(`{"workflow":{"id":"retrying","steps":[
		{"step":{"id":"flaky","type":"Flaky","failures":1,
		  "retry_policy":{"error_retry_limit":3,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":600}},
		  "transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}}]}}`, `"PARALLEL"`))
	for _, tc := range []struct {
		action run.Action
		step   instance.StepStatus
		run    instance.WorkflowStatus
	}{
		{run.StepRestart, instance.StepSucceeded, instance.WorkflowSucceeded},
	} {
		inst := e.start("retrying", nil)
		e.waitStep(inst, "flaky", instance.StepUserFailed)
		e.mustStepAct(inst, "flaky", tc.action)
		got := e.wait(inst, 10*time.Second)
		if got.Status != tc.run || e.stepStatuses(got)["flaky"] != tc.step {
			t.Errorf("%s: run %s, steps %v", tc.action, got.Status, e.stepStatuses(got))
		}
		a, err := e.runs.Attempt(context.Background(), "retrying", inst.InstanceID, 1, "flaky", 0)
		if err != nil || a.AttemptID != 2 {
			t.Fatalf("latest attempt %+v %v", a, err)
		}
	}
}

// Skip, stop and kill of a step waiting for its retry, using a step that
// always fails.
func TestStepActionsEndRetryingStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(`{"workflow":{"id":"always","steps":[
		{"step":{"id":"bad","type":"Flaky","failures":1000,
		  "retry_policy":{"error_retry_limit":3,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":600}},
		  "transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}}]}}`, `"PARALLEL"`))
	for _, tc := range []struct {
		action run.Action
		step   instance.StepStatus
		run    instance.WorkflowStatus
	}{
		{run.StepSkip, instance.StepSkipped, instance.WorkflowSucceeded},
		{run.StepStop, instance.StepStopped, instance.WorkflowStopped},
		{run.StepKill, instance.StepFatallyFailed, instance.WorkflowFailed},
	} {
		inst := e.start("always", nil)
		e.waitStep(inst, "bad", instance.StepUserFailed)
		e.mustStepAct(inst, "bad", tc.action)
		got := e.wait(inst, 10*time.Second)
		if got.Status != tc.run || e.stepStatuses(got)["bad"] != tc.step {
			t.Errorf("%s: run %s, steps %v", tc.action, got.Status, e.stepStatuses(got))
		}
		if at := e.attempts(got, "bad"); len(at) != 2 || at[0] != instance.StepUserFailed || at[1] != tc.step {
			t.Errorf("%s: attempts %v", tc.action, at)
		}
	}
}

// Restart and skip of a FATALLY_FAILED step while its run is still live
// (another branch runs, FAIL_AFTER_RUNNING).
func TestStepActionsOnFailedStepOfLiveRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(`{"workflow":{"id":"branchy","steps":[
		{"step":{"id":"flaky","type":"Flaky","failures":1,"retry_policy":{"error_retry_limit":0},
		  "transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}},
		{"step":{"id":"slow","type":"Sleep","sleep_seconds":1.5}},
		{"step":{"id":"bad","type":"Fail","transition":{"successors":{"after_bad":"true"}}}},
		{"step":{"id":"after_bad","type":"NoOp"}}]}}`, `"PARALLEL"`))
	inst := e.start("branchy", nil)
	e.waitStep(inst, "flaky", instance.StepFatallyFailed)
	e.waitStep(inst, "bad", instance.StepFatallyFailed)
	e.mustStepAct(inst, "flaky", run.StepRestart)
	e.mustStepAct(inst, "bad", run.StepSkip)
	got := e.wait(inst, 10*time.Second)
	st := e.stepStatuses(got)
	if got.Status != instance.WorkflowSucceeded || st["flaky"] != instance.StepSucceeded || st["after"] != instance.StepSucceeded ||
		st["bad"] != instance.StepSkipped || st["after_bad"] != instance.StepSucceeded {
		t.Errorf("run %s, steps %v", got.Status, st)
	}
	a, err := e.runs.Attempt(context.Background(), "branchy", inst.InstanceID, 1, "flaky", 0)
	if err != nil || a.AttemptID != 2 {
		t.Fatalf("restarted attempt %+v %v", a, err)
	}
	var retry instance.RetryInfo
	if err := json.Unmarshal(a.RetryInfo, &retry); err != nil || retry.ManualRetries != 1 {
		t.Errorf("restarted attempt retry %s", a.RetryInfo)
	}
}

// On an ended run, restart of a step starts a new run from that step and
// skip of a failed step a new run with it SKIPPED; stop and kill are
// conflicts.
func TestStepActionsOnEndedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(`{"workflow":{"id":"ended","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
		{"step":{"id":"b","type":"Fail","transition":{"successors":{"c":"true"}}}},
		{"step":{"id":"c","type":"NoOp"}},
		{"step":{"id":"d","type":"NoOp"}}]}}`, `"PARALLEL"`))
	inst := e.wait(e.start("ended", nil), 10*time.Second)
	if inst.Status != instance.WorkflowFailed {
		t.Fatalf("run 1 ended %s", inst.Status)
	}
	for _, bad := range []run.Action{run.StepStop, run.StepKill, run.StepBypassDependencies} {
		if _, err := e.stepAct(inst, "b", bad); !errors.Is(err, execution.ErrConflict) {
			t.Errorf("%s of a FATALLY_FAILED step of an ended run: %v", bad, err)
		}
	}
	if _, err := e.stepAct(inst, "c", run.StepRestart); !errors.Is(err, execution.ErrNotFound) {
		t.Errorf("restart of a step with no attempt: %v", err)
	}
	// Skip b: run 2 carries a and d, records b SKIPPED, runs c.
	res := e.mustStepAct(inst, "b", run.StepSkip)
	if res.Status != "RESTARTED" || res.Restarted == nil || res.Restarted.RunID != 2 {
		t.Fatalf("skip answered %+v", res)
	}
	run2 := e.wait(res.Restarted, 10*time.Second)
	if st := e.stepStatuses(run2); run2.Status != instance.WorkflowSucceeded || st["b"] != instance.StepSkipped || st["c"] != instance.StepSucceeded {
		t.Fatalf("run 2 %s, steps %v", run2.Status, st)
	}
	if e.carriedFrom(run2, 2, "a") != 1 || e.carriedFrom(run2, 2, "d") != 1 {
		t.Error("run 2 did not carry a and d")
	}
	if v := e.detail(run2).AggregatedInfo.StepAggregatedViews["b"]; v.Status != instance.StepSkipped || v.WorkflowRunID != 2 {
		t.Errorf("aggregated b %+v", v)
	}
	// Restart a (SUCCEEDED) of the ended run 2: run 3 runs a and everything
	// downstream of it; d is carried from run 1.
	res = e.mustStepAct(run2, "a", run.StepRestart)
	if res.Restarted == nil || res.Restarted.RunID != 3 {
		t.Fatalf("restart answered %+v", res)
	}
	run3 := e.wait(res.Restarted, 10*time.Second)
	if run3.Status != instance.WorkflowFailed { // b runs again and fails
		t.Errorf("run 3 ended %s", run3.Status)
	}
	if e.carriedFrom(run3, 3, "a") != 0 || e.carriedFrom(run3, 3, "d") != 1 {
		t.Errorf("run 3: a carried from %d, d from %d", e.carriedFrom(run3, 3, "a"), e.carriedFrom(run3, 3, "d"))
	}
	// An action on an earlier run is a conflict.
	if _, err := e.runs.StepAct(context.Background(), "ended", inst.InstanceID, 1, "a", run.StepRestart); !errors.Is(err, execution.ErrConflict) {
		t.Errorf("action on run 1 of 3: %v", err)
	}
}
