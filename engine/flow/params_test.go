package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// emitter returns output params: those of its STRING_MAP param "emit",
// and "answer" = 42. It runs steps of type Exclusive.
type emitter struct{}

func (emitter) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (emitter) Execute(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	out := map[string]any{"answer": int64(42)}
	if m, ok := a.Params["emit"].(map[string]string); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	return stepruntime.Result{State: stepruntime.Done, Outputs: out}
}

func (emitter) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// InjectParams injects "region" and "cluster" from the step's schema; a
// definition param of the same name wins.
func (emitter) InjectParams(a *stepruntime.Attempt) workflow.Params {
	return workflow.Params{
		"region":  workflow.LiteralParam(workflow.ParamTypeString, "injected"),
		"cluster": workflow.LiteralParam(workflow.ParamTypeString, "c-"+a.StepID),
	}
}

func emitterRuntimes() stepruntime.Registry {
	r := testRuntimes()
	r["Exclusive"] = emitter{}
	return r
}

// stepParams reads the stored params of a step's latest attempt.
func (e *env) stepParams(inst *execution.Instance, stepID string) map[string]any {
	e.t.Helper()
	var raw []byte
	if err := e.pool.QueryRow(context.Background(), `SELECT params FROM step_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 ORDER BY attempt_id DESC LIMIT 1`,
		inst.WorkflowID, inst.InstanceID, inst.RunID, stepID).Scan(&raw); err != nil {
		e.t.Fatal(err)
	}
	var vals map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(raw, &vals); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]any{}
	for k, v := range vals {
		out[k] = v.Value
	}
	return out
}

func expectParams(t *testing.T, step string, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, _ := json.Marshal(got[k])
		wj, _ := json.Marshal(w)
		if string(g) != string(wj) {
			t.Errorf("%s: %s = %s, want %s", step, k, g, wj)
		}
	}
}

func TestStepParamsMergeInterpolationAndUpstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"pm","params":{
	    "n":{"type":"LONG","value":1},
	    "region":{"type":"STRING","value":"us","mode":"MUTABLE_ON_START"},
	    "label":{"type":"STRING","value":"$region-${n}"}},
	  "steps":[
	    {"step":{"id":"first","type":"NoOp","transition":{"successors":{"second":"true"}},"params":{
	        "file":{"type":"STRING","value":"data-${label}_$n.csv costs $$5"},
	        "doubled":{"type":"LONG","expression":"n * 2"},
	        "me":{"type":"STRING","expression":"step_id + '#' + step_attempt_id + '@' + workflow_id"}}}},
	    {"step":{"id":"second","type":"NoOp","params":{
	        "from_at":{"type":"STRING","value":"got ${file@first}"},
	        "from_underscores":{"type":"LONG","expression":"first__doubled + 1"},
	        "from_func":{"type":"STRING","expression":"params.getFromStep('first', 'me')"},
	        "first_uuid":{"type":"STRING","value":"${first__step_instance_uuid}"}}}}]}}`)
	inst := e.start("pm", workflow.Params{
		"n":      workflow.LiteralParam(workflow.ParamTypeLong, json.Number("5")),
		"region": workflow.LiteralParam(workflow.ParamTypeString, "eu"),
	})
	if got := e.wait(inst, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	first := e.stepParams(inst, "first")
	expectParams(t, "first", first, map[string]any{
		"file": "data-eu-5_5.csv costs $5", "doubled": 10, "me": "first#1@pm",
		"workflow_id": "pm", "workflow_instance_id": inst.InstanceID, "workflow_run_id": 1,
		"step_id": "first", "step_attempt_id": 1, "step_type": "NoOp",
	})
	if u, _ := first["step_instance_uuid"].(string); len(u) != 36 {
		t.Errorf("step_instance_uuid = %v", first["step_instance_uuid"])
	}
	expectParams(t, "second", e.stepParams(inst, "second"), map[string]any{
		"from_at": "got data-eu-5_5.csv costs $5", "from_underscores": 11, "from_func": "first#1@pm",
		"first_uuid": first["step_instance_uuid"],
	})
	// The run's params carry the workflow defaults.
	got, err := e.runs.Instance(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	for _, want := range []string{`"RUN_TS"`, `"FIRST_TIME_TRIGGER_TIMEZONE"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("instance params lack %s: %s", want, raw)
		}
	}
}

func TestRunParamModesAreEnforced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"modes","params":{
	    "fixed":{"type":"STRING","value":"a","mode":"CONSTANT"},
	    "free":{"type":"STRING","value":"a"}},
	  "steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	ok := e.start("modes", workflow.Params{"free": workflow.LiteralParam(workflow.ParamTypeString, "b")})
	if got := e.wait(ok, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run with a MUTABLE override ended %s", got.Status)
	}
	// Overriding a CONSTANT param is refused before any run is created.
	_, err := e.runs.Start(context.Background(), execution.StartRequest{WorkflowID: "modes", Version: "latest",
		RunParams: workflow.Params{"fixed": workflow.LiteralParam(workflow.ParamTypeString, "b")}})
	if !errors.Is(err, execution.ErrInvalid) || !strings.Contains(err.Error(), "CONSTANT") {
		t.Fatalf("start overriding a CONSTANT param: err = %v, want ErrInvalid naming the mode", err)
	}
}

func TestParamErrorsFailTheStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"perr","steps":[
	    {"step":{"id":"s","type":"NoOp","retry_policy":{"error_retry_limit":0},"params":{
	        "x":{"type":"STRING","value":"${nope@gone}"}}}}]}}`)
	inst := e.start("perr", nil)
	if got := e.wait(inst, 20*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
}

func TestOutputParamsFromTheRuntime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{Runtimes: emitterRuntimes()})
	e.push(`{"workflow":{"id":"outs","steps":[
	    {"step":{"id":"emit","type":"Exclusive","transition":{"successors":{"use":"answer == 42"}},"params":{
	        "emit":{"type":"STRING_MAP","value":{"greeting":"hello"}},
	        "region":{"type":"STRING","value":"defined"},
	        "greeting":{"type":"STRING","value":"unset"}}}},
	    {"step":{"id":"use","type":"NoOp","params":{
	        "a":{"type":"LONG","expression":"params.getFromStep('emit', 'answer') + 1"},
	        "g":{"type":"STRING","value":"${greeting@emit}!"}}}}]}}`)
	inst := e.start("outs", nil)
	if got := e.wait(inst, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", got.Status)
	}
	expectParams(t, "emit", e.stepParams(inst, "emit"), map[string]any{"answer": 42, "greeting": "hello",
		"region": "defined", "cluster": "c-emit"})
	expectParams(t, "use", e.stepParams(inst, "use"), map[string]any{"a": 43, "g": "hello!"})
	var outputs []byte
	if err := e.pool.QueryRow(context.Background(), `SELECT outputs FROM step_instance WHERE workflow_id = 'outs' AND step_id = 'emit'`).Scan(&outputs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(outputs), `"answer"`) {
		t.Errorf("outputs column %s", outputs)
	}
}

func TestOutputParamsRespectModes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{Runtimes: emitterRuntimes()})
	e.push(`{"workflow":{"id":"outmode","steps":[
	    {"step":{"id":"emit","type":"Exclusive","params":{
	        "emit":{"type":"STRING_MAP","value":{"greeting":"hello"}},
	        "greeting":{"type":"STRING","value":"fixed","mode":"MUTABLE_ON_START"}}}}]}}`)
	inst := e.start("outmode", nil)
	if got := e.wait(inst, 20*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
	if st := e.stepStatuses(inst)["emit"]; st != instance.StepFatallyFailed {
		t.Fatalf("step ended %s", st)
	}
}

// A step timeout written with params is resolved from the step's params.
func TestTimeoutFromParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"pto","params":{"unit":{"type":"STRING","value":"s"}},"steps":[
	    {"step":{"id":"nap","type":"Sleep","sleep_seconds":30,"timeout":"${limit}$unit","params":{
	        "limit":{"type":"LONG","value":1}}}}]}}`)
	inst := e.start("pto", nil)
	got := e.wait(inst, 20*time.Second)
	if got.Status != instance.WorkflowFailed {
		t.Fatalf("run ended %s", got.Status)
	}
	if st := e.stepStatuses(inst)["nap"]; st != instance.StepTimedOut {
		t.Fatalf("step ended %s", st)
	}
}
