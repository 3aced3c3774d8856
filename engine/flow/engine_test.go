package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func TestDAGExecution(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		def        string
		wantStatus instance.WorkflowStatus
		wantSteps  map[string]instance.StepStatus
	}{
		{
			name: "chain",
			def: `{"workflow":{"id":"chain","steps":[
				{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
				{"step":{"id":"b","type":"NoOp","transition":{"successors":{"c":"true"}}}},
				{"step":{"id":"c","type":"NoOp"}}]}}`,
			wantStatus: instance.WorkflowSucceeded,
			wantSteps:  map[string]instance.StepStatus{"a": "SUCCEEDED", "b": "SUCCEEDED", "c": "SUCCEEDED"},
		},
		{
			name: "conditional branches and unsatisfied propagation",
			def: `{"workflow":{"id":"cond","params":{"x":{"type":"LONG","value":3}},"steps":[
				{"step":{"id":"a","type":"NoOp","transition":{"successors":{"big":"x > 2","small":"x <= 2"}}}},
				{"step":{"id":"big","type":"NoOp"}},
				{"step":{"id":"small","type":"NoOp","transition":{"successors":{"after_small":"true"}}}},
				{"step":{"id":"after_small","type":"NoOp"}}]}}`,
			wantStatus: instance.WorkflowSucceeded,
			wantSteps:  map[string]instance.StepStatus{"a": "SUCCEEDED", "big": "SUCCEEDED", "small": "UNSATISFIED", "after_small": "UNSATISFIED"},
		},
		{
			name: "join runs if any incoming edge is true and waits for all",
			def: `{"workflow":{"id":"join","steps":[
				{"step":{"id":"a","type":"NoOp","transition":{"successors":{"j":"false"}}}},
				{"step":{"id":"b","type":"Sleep","sleep_seconds":0.2,"transition":{"successors":{"j":"true"}}}},
				{"step":{"id":"j","type":"NoOp"}}]}}`,
			wantStatus: instance.WorkflowSucceeded,
			wantSteps:  map[string]instance.StepStatus{"a": "SUCCEEDED", "b": "SUCCEEDED", "j": "SUCCEEDED"},
		},
		{
			name: "disconnected sub-graphs both run",
			def: `{"workflow":{"id":"islands","steps":[
				{"step":{"id":"a1","type":"NoOp","transition":{"successors":{"a2":"true"}}}},
				{"step":{"id":"a2","type":"NoOp"}},
				{"step":{"id":"b1","type":"NoOp"}}]}}`,
			wantStatus: instance.WorkflowSucceeded,
			wantSteps:  map[string]instance.StepStatus{"a1": "SUCCEEDED", "a2": "SUCCEEDED", "b1": "SUCCEEDED"},
		},
		{
			name: "FAIL_AFTER_RUNNING lets the other branch finish and blocks downstream",
			def: `{"workflow":{"id":"far","steps":[
				{"step":{"id":"bad","type":"Fail","transition":{"successors":{"after":"true"}}}},
				{"step":{"id":"after","type":"NoOp"}},
				{"step":{"id":"other","type":"Sleep","sleep_seconds":0.3}}]}}`,
			wantStatus: instance.WorkflowFailed,
			wantSteps:  map[string]instance.StepStatus{"bad": "FATALLY_FAILED", "other": "SUCCEEDED"},
		},
		{
			name: "FAIL_IMMEDIATELY stops the running siblings",
			def: `{"workflow":{"id":"fi","steps":[
				{"step":{"id":"bad","type":"Fail","failure_mode":"FAIL_IMMEDIATELY"}},
				{"step":{"id":"other","type":"Sleep","sleep_seconds":30}}]}}`,
			wantStatus: instance.WorkflowFailed,
			wantSteps:  map[string]instance.StepStatus{"bad": "FATALLY_FAILED", "other": "STOPPED"},
		},
		{
			name: "IGNORE_FAILURE completes with error and downstream runs",
			def: `{"workflow":{"id":"ign","steps":[
				{"step":{"id":"bad","type":"Fail","failure_mode":"IGNORE_FAILURE","transition":{"successors":{"after":"true"}}}},
				{"step":{"id":"after","type":"NoOp"}}]}}`,
			wantStatus: instance.WorkflowSucceeded,
			wantSteps:  map[string]instance.StepStatus{"bad": "COMPLETED_WITH_ERROR", "after": "SUCCEEDED"},
		},
		{
			name: "a runtime panic is a platform failure, not a crash",
			def: `{"workflow":{"id":"panics","steps":[
				{"step":{"id":"p","type":"Panic","retry_policy":{"platform_retry_limit":0}}}]}}`,
			wantStatus: instance.WorkflowFailed,
			wantSteps:  map[string]instance.StepStatus{"p": "FATALLY_FAILED"},
		},
		{
			name: "runaway SEL in step params hits a limit and fails only the step",
			def: `{"workflow":{"id":"runaway","steps":[
				{"step":{"id":"spin","type":"NoOp","retry_policy":{"error_retry_limit":0},"failure_mode":"IGNORE_FAILURE",
				  "transition":{"successors":{"after":"true"}},
				  "params":{"p":{"type":"LONG","expression":"long s = 0; while (true) { s++; } return s;"}}}},
				{"step":{"id":"after","type":"NoOp"}}]}}`,
			wantStatus: instance.WorkflowSucceeded,
			wantSteps:  map[string]instance.StepStatus{"spin": "COMPLETED_WITH_ERROR", "after": "SUCCEEDED"},
		},
		{
			name: "SEL throw in step params fails the step as a user error",
			def: `{"workflow":{"id":"throws","steps":[
				{"step":{"id":"s","type":"NoOp","retry_policy":{"error_retry_limit":0},
				  "params":{"p":{"type":"STRING","expression":"throw \"bad input\";"}}}}]}}`,
			wantStatus: instance.WorkflowFailed,
			wantSteps:  map[string]instance.StepStatus{"s": "FATALLY_FAILED"},
		},
	}
	e := newEnv(t)
	e.engine(flow.Config{})
	for _, tt := range tests {
		e.push(tt.def)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := workflow.DecodeJSON([]byte(tt.def))
			inst := e.wait(e.start(d.Workflow.ID, nil), 20*time.Second)
			if inst.Status != tt.wantStatus {
				t.Errorf("status = %s, want %s; timeline %s", inst.Status, tt.wantStatus, inst.Timeline)
			}
			got := e.stepStatuses(inst)
			for id, want := range tt.wantSteps {
				if got[id] != want {
					t.Errorf("step %s = %q, want %s", id, got[id], want)
				}
			}
			if len(got) != len(tt.wantSteps) {
				t.Errorf("steps with attempts = %v, want exactly %v", got, tt.wantSteps)
			}
		})
	}
}

func TestRetriesCreateNewAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"retry","steps":[
		{"step":{"id":"user","type":"Flaky","failures":2,
		  "retry_policy":{"error_retry_limit":2,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":0}}}},
		{"step":{"id":"platform","type":"Flaky","failures":1,"fail_with":"platform",
		  "retry_policy":{"platform_retry_limit":1,"backoff":{"type":"FIXED_BACKOFF","platform_retry_backoff_in_secs":0}}}},
		{"step":{"id":"exhausted","type":"Flaky","failures":5,
		  "retry_policy":{"error_retry_limit":1,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":0}}}}]}}`)
	inst := e.wait(e.start("retry", nil), 20*time.Second)
	if inst.Status != instance.WorkflowFailed {
		t.Fatalf("status %s", inst.Status)
	}
	want := map[string][]instance.StepStatus{
		"user":      {"USER_FAILED", "USER_FAILED", "SUCCEEDED"},
		"platform":  {"PLATFORM_FAILED", "SUCCEEDED"},
		"exhausted": {"USER_FAILED", "FATALLY_FAILED"},
	}
	for step, w := range want {
		if got := e.attempts(inst, step); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s attempts = %v, want %v", step, got, w)
		}
	}
	a, err := e.runs.Attempt(context.Background(), "retry", inst.InstanceID, 1, "user", 0)
	if err != nil {
		t.Fatal(err)
	}
	var retry instance.RetryInfo
	if err := json.Unmarshal(a.RetryInfo, &retry); err != nil {
		t.Fatal(err)
	}
	if a.AttemptID != 3 || retry.ErrorRetries != 2 || retry.ErrorRetryLimit != 2 {
		t.Errorf("latest attempt %d retry %s", a.AttemptID, a.RetryInfo)
	}
}

func TestStopAndKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"long","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`)
	for _, tc := range []struct {
		action run.Action
		want   instance.WorkflowStatus
	}{{run.ActionStop, instance.WorkflowStopped}, {run.ActionKill, instance.WorkflowFailed}} {
		inst := e.start("long", nil)
		e.waitStep(inst, "nap", instance.StepRunning)
		if _, err := e.runs.Act(context.Background(), "long", inst.InstanceID, 0, tc.action); err != nil {
			t.Fatal(err)
		}
		got := e.wait(inst, 10*time.Second)
		if got.Status != tc.want || e.stepStatuses(got)["nap"] != instance.StepStopped {
			t.Errorf("%s: instance %s, step %s", tc.action, got.Status, e.stepStatuses(got)["nap"])
		}
		if _, err := e.runs.Act(context.Background(), "long", inst.InstanceID, 0, tc.action); err == nil {
			t.Errorf("%s of a finished run was accepted", tc.action)
		}
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"step_timeout","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60,"timeout":"1s"}}]}}`)
	e.push(`{"workflow":{"id":"wf_timeout","timeout":"1s","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":60}}]}}`)

	inst := e.wait(e.start("step_timeout", nil), 10*time.Second)
	if inst.Status != instance.WorkflowFailed || e.stepStatuses(inst)["nap"] != instance.StepTimedOut {
		t.Errorf("step timeout: instance %s step %s", inst.Status, e.stepStatuses(inst)["nap"])
	}
	inst = e.wait(e.start("wf_timeout", nil), 10*time.Second)
	if inst.Status != instance.WorkflowTimedOut || e.stepStatuses(inst)["nap"] != instance.StepTimedOut {
		t.Errorf("workflow timeout: instance %s step %s", inst.Status, e.stepStatuses(inst)["nap"])
	}
}

func TestInstanceStepConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var maxRunning int
	running := map[string]bool{}
	mu := make(chan struct{}, 1)
	e.engine(flow.Config{Observer: func(ref run.Ref, step string, _ int64, st instance.StepStatus, _ time.Time) {
		mu <- struct{}{}
		if st == instance.StepStarting {
			running[step] = true
		}
		if st.IsTerminal() {
			delete(running, step)
		}
		maxRunning = max(maxRunning, len(running))
		<-mu
	}})
	e.push(`{"workflow":{"id":"capped","instance_step_concurrency":2,"steps":[
		{"step":{"id":"s1","type":"Sleep","sleep_seconds":0.2}},
		{"step":{"id":"s2","type":"Sleep","sleep_seconds":0.2}},
		{"step":{"id":"s3","type":"Sleep","sleep_seconds":0.2}},
		{"step":{"id":"s4","type":"Sleep","sleep_seconds":0.2}},
		{"step":{"id":"s5","type":"Sleep","sleep_seconds":0.2}}]}}`)
	inst := e.wait(e.start("capped", nil), 10*time.Second)
	if inst.Status != instance.WorkflowSucceeded {
		t.Fatalf("status %s", inst.Status)
	}
	mu <- struct{}{}
	defer func() { <-mu }()
	if maxRunning != 2 {
		t.Errorf("at most %d steps ran at once, want 2", maxRunning)
	}
}

func TestParamsAndRunParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"params","params":{
		"base":{"type":"LONG","value":20},
		"derived":{"type":"LONG","expression":"base * 2 + 2"}},
	  "steps":[{"step":{"id":"s","type":"NoOp","params":{"msg":{"type":"STRING","expression":"'v' + derived"}}}}]}}`)
	inst := e.wait(e.start("params", workflow.Params{"base": workflow.LiteralParam(workflow.ParamTypeLong, 5)}), 10*time.Second)
	if inst.Status != instance.WorkflowSucceeded {
		t.Fatalf("status %s %s", inst.Status, inst.Timeline)
	}
	var got params.Values
	if err := json.Unmarshal(inst.Params, &got); err != nil {
		t.Fatal(err)
	}
	if got["derived"].Value != int64(12) || got["base"].Value != int64(5) {
		t.Errorf("params %s", inst.Params)
	}
	a, err := e.runs.Attempt(context.Background(), "params", inst.InstanceID, 1, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	var stepParams params.Values
	if err := json.Unmarshal(a.Params, &stepParams); err != nil {
		t.Fatal(err)
	}
	if stepParams["msg"].Value != "v12" {
		t.Errorf("step params %s", a.Params)
	}
}

// waitStep polls until a step's latest attempt has status.
func (e *env) waitStep(inst *execution.Instance, step string, status instance.StepStatus) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.stepStatuses(inst)[step] != status {
		if time.Now().After(deadline) {
			e.t.Fatalf("step %s never reached %s (now %s)", step, status, e.stepStatuses(inst)[step])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
