package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// whileDef is a workflow whose while step "loop" runs one step "body" of
// the given type (with extra fields) while cond holds; stepParams are
// extra params of the while step.
func whileDef(id, cond, stepParams, bodyType, bodyExtra string) string {
	if stepParams != "" {
		stepParams = "," + stepParams
	}
	return fmt.Sprintf(`{"workflow":{"id":%q,"params":{"p1":{"type":"STRING","value":"from parent"}},"steps":[
	{"while":{"id":"loop","condition":%q,"params":{"limit":{"type":"LONG","value":5}%s},"steps":[
	    {"step":{"id":"body","type":%q%s,"params":{"twice":{"type":"LONG","expression":"loop_index * 2"}}}}]}}]}}`,
		id, cond, stepParams, bodyType, bodyExtra)
}

// loopIndexes reads the loop_index run param of each iteration run.
func loopIndexes(t *testing.T, cs []childRow) []int64 {
	t.Helper()
	var out []int64
	for _, c := range cs {
		var p struct {
			Value int64 `json:"value"`
		}
		if err := json.Unmarshal(c.RunParams["loop_index"], &p); err != nil {
			t.Fatalf("loop_index of %v: %v", c.Ref, err)
		}
		out = append(out, p.Value)
	}
	return out
}

func TestWhileCounterLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(whileDef("wh-count", "loop_index < limit", "", "NoOp", ""))
	e.engine(flow.Config{})
	parent := e.start("wh-count", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if got := loopIndexes(t, cs); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("iterations loop_index %v, want [0 1 2 3 4]", got)
	}
	for i, c := range cs {
		if c.Status != instance.WorkflowSucceeded || c.WorkflowID != "wh-count:loop" || c.Parent.Iteration != int64(i+1) || c.Depth != 1 {
			t.Errorf("iteration %d: %+v", i, c)
		}
		if !strings.Contains(string(c.RunParams["p1"]), "from parent") {
			t.Errorf("iteration %d lost p1: %s", i, c.RunParams["p1"])
		}
	}
	body := e.stepAttempt(e.asInstance(cs[4]), "body")
	if !strings.Contains(string(body.Params), `"twice": {"type": "LONG", "value": 8}`) &&
		!strings.Contains(string(body.Params), `"twice":{"type":"LONG","value":8}`) {
		t.Errorf("body params of the last iteration: %s", body.Params)
	}
	step := e.stepAttempt(parent, "loop")
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(step.Params, &ps); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ps["loop_index"].Value) != "5" || fmt.Sprint(ps["while_iterations"].Value) != "5" {
		t.Errorf("loop outputs loop_index=%v while_iterations=%v", ps["loop_index"].Value, ps["while_iterations"].Value)
	}
}

func TestWhileZeroIterations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(whileDef("wh-zero", "loop_index > limit", "", "NoOp", ""))
	e.engine(flow.Config{})
	parent := e.start("wh-zero", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	if cs := e.children(parent); len(cs) != 0 {
		t.Errorf("%d iterations, want none", len(cs))
	}
}

func TestWhileIterationLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(whileDef("wh-limit", "true", `"max_iterations":{"type":"LONG","value":3}`, "NoOp", ""))
	e.engine(flow.Config{})
	parent := e.start("wh-limit", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	if got := loopIndexes(t, e.children(parent)); fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("iterations %v, want [0 1 2]", got)
	}
	step := e.stepAttempt(parent, "loop")
	if step.Status != instance.StepFatallyFailed || !strings.Contains(string(step.Timeline), "iteration limit of 3") {
		t.Errorf("loop %s %s", step.Status, step.Timeline)
	}
}

func TestWhileFailingIteration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(whileDef("wh-fail", "loop_index < limit", "", "Fail", ""))
	e.engine(flow.Config{})
	parent := e.start("wh-fail", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if len(cs) != 1 || cs[0].Status != instance.WorkflowFailed {
		t.Fatalf("iterations %+v, want one FAILED", cs)
	}
	step := e.stepAttempt(parent, "loop")
	if step.Status != instance.StepFatallyFailed || !strings.Contains(string(step.Timeline), "while iteration 0") {
		t.Errorf("loop %s %s", step.Status, step.Timeline)
	}
}

// Stopping the parent run stops the running iteration; killing it kills it.
func TestWhileStopAndKillPropagate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action            run.Action
		parent, iteration instance.WorkflowStatus
	}{
		{run.ActionStop, instance.WorkflowStopped, instance.WorkflowStopped},
		{run.ActionKill, instance.WorkflowFailed, instance.WorkflowFailed},
	}
	for _, tc := range cases {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.push(whileDef("wh-stop", "loop_index < limit", "", "Sleep", `,"sleep_seconds":3600`))
			e.engine(flow.Config{})
			parent := e.start("wh-stop", nil)
			c := e.waitChild(parent, instance.WorkflowInProgress)
			e.waitRunning(e.asInstance(c))
			if _, err := e.runs.Act(context.Background(), parent.WorkflowID, parent.InstanceID, 0, tc.action); err != nil {
				t.Fatal(err)
			}
			if got := e.wait(parent, 30*time.Second); got.Status != tc.parent {
				t.Errorf("parent %s, want %s", got.Status, tc.parent)
			}
			if got := e.wait(e.asInstance(c), 30*time.Second); got.Status != tc.iteration {
				t.Errorf("iteration %s, want %s", got.Status, tc.iteration)
			}
			if cs := e.children(parent); len(cs) != 1 {
				t.Errorf("%d iterations, want 1", len(cs))
			}
		})
	}
}

// The engine dies while an iteration runs: the node that takes over goes
// on with the same iteration and creates every later one once.
func TestWhileSurvivesCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(whileDef("wh-crash", "loop_index < 3", "", "Sleep", `,"sleep_seconds":0.3`))
	a := e.engine(flow.Config{NodeID: "node-a", Lease: time.Second})
	parent := e.start("wh-crash", nil)
	e.waitChild(parent, "")
	e.engine(flow.Config{NodeID: "node-b", Lease: time.Second})
	a.Crash()
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if got := loopIndexes(t, cs); fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("iterations %v, want [0 1 2] once each", got)
	}
	for _, c := range cs {
		if c.Status != instance.WorkflowSucceeded {
			t.Errorf("iteration %v %s", c.Ref, c.Status)
		}
	}
	if at := e.attempts(parent, "loop"); len(at) != 1 || at[0] != instance.StepSucceeded {
		t.Errorf("loop attempts %v, want one SUCCEEDED", at)
	}
}

// loop_params entries are in the condition's scope and reach the first
// iteration as run params, which later iterations carry on.
func TestWhileLoopParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(whileDef("wh-lp", "loop_index < 2 && counter == 10",
		`"loop_params":{"type":"MAP","value":{"counter":{"type":"LONG","value":10}}}`, "NoOp", ""))
	e.engine(flow.Config{})
	parent := e.start("wh-lp", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if len(cs) != 2 {
		t.Fatalf("%d iterations, want 2", len(cs))
	}
	for i, c := range cs {
		var p struct {
			Value int64 `json:"value"`
		}
		if err := json.Unmarshal(c.RunParams["counter"], &p); err != nil || p.Value != 10 {
			t.Errorf("iteration %d counter %s (%v)", i, c.RunParams["counter"], err)
		}
	}
}

// runParamValues lists a run param's value in each iteration run.
func runParamValues(t *testing.T, cs []childRow, name string) string {
	t.Helper()
	var out []any
	for _, c := range cs {
		var p struct {
			Value any `json:"value"`
		}
		if err := json.Unmarshal(c.RunParams[name], &p); err != nil {
			t.Fatalf("%s of %v: %v", name, c.Ref, err)
		}
		out = append(out, p.Value)
	}
	return fmt.Sprint(out)
}

// A step param computed by SEL under a loop param's name is carried to the
// condition and the next iteration; a loop param no step sets is carried
// unchanged.
func TestWhileCarriesStepParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"wh-carry","steps":[
	{"while":{"id":"loop","condition":"counter < 3","params":{"loop_params":{"type":"MAP","value":{
	    "counter":{"type":"LONG","value":0},"untouched":{"type":"LONG","value":7}}}},"steps":[
	    {"step":{"id":"body","type":"NoOp","params":{"counter":{"type":"LONG","expression":"counter + 1"}}}}]}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("wh-carry", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if got := runParamValues(t, cs, "counter"); got != "[0 1 2]" {
		t.Errorf("iterations' counter %s, want [0 1 2]", got)
	}
	if got := runParamValues(t, cs, "untouched"); got != "[7 7 7]" {
		t.Errorf("iterations' untouched %s, want [7 7 7]", got)
	}
	expectParams(t, "body", e.stepParams(e.asInstance(cs[len(cs)-1]), "body"), map[string]any{"counter": 3})
	expectParams(t, "loop", e.stepParams(parent, "loop"), map[string]any{"loop_index": 3, "while_iterations": 3})
}

// An output param the step runtime returns is carried and ends the loop.
func TestWhileCarriesRuntimeOutputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"wh-out","steps":[
	{"while":{"id":"loop","condition":"state == 'start' && loop_index < 5","params":{"loop_params":{"type":"MAP","value":{
	    "state":{"type":"STRING","value":"start"}}}},"steps":[
	    {"step":{"id":"body","type":"Exclusive","params":{"emit":{"type":"STRING_MAP","value":{"state":"done"}}}}}]}}]}}`)
	e.engine(flow.Config{Runtimes: emitterRuntimes()})
	parent := e.start("wh-out", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if got := runParamValues(t, cs, "state"); got != "[start]" {
		t.Errorf("iterations' state %s, want [start]: the output should end the loop", got)
	}
	expectParams(t, "loop", e.stepParams(parent, "loop"), map[string]any{"while_iterations": 1})
}

// When several steps of an iteration set a name, the last in topological
// order wins (definition order among steps ready together), not the one
// that ended last; workflow params the iteration inherited are carried
// like loop params.
func TestWhileCarryLastInTopologicalOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// slow ends last but comes first in topological order; fast wins.
	e.push(`{"workflow":{"id":"wh-order","params":{"p1":{"type":"STRING","value":"from parent"}},"steps":[
	{"while":{"id":"loop","condition":"counter < 2","params":{"loop_params":{"type":"MAP","value":{
	    "counter":{"type":"LONG","value":0}}}},"steps":[
	    {"step":{"id":"slow","type":"Sleep","sleep_seconds":0.3,"transition":{"successors":{"after":"true"}},
	        "params":{"counter":{"type":"LONG","expression":"counter + 100"}}}},
	    {"step":{"id":"fast","type":"NoOp","params":{"counter":{"type":"LONG","expression":"counter + 1"}}}},
	    {"step":{"id":"after","type":"NoOp","params":{"p1":{"type":"STRING","expression":"'set by after'"}}}}]}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("wh-order", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	cs := e.children(parent)
	if got := runParamValues(t, cs, "counter"); got != "[0 1]" {
		t.Errorf("iterations' counter %s, want [0 1]", got)
	}
	if got := runParamValues(t, cs, "p1"); got != "[from parent set by after]" {
		t.Errorf("iterations' p1 %s, want [from parent set by after]", got)
	}
}

// TestWhileRestartResumesAtTheFailedIteration: a restart from incomplete
// runs the failed iteration again with the loop params it had, and goes
// on from there: iterations that succeeded before do not run again, and
// the restart's changed run params apply.
func TestWhileRestartResumesAtTheFailedIteration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"wh-resume","params":{"broken":{"type":"BOOLEAN","value":true,"mode":"MUTABLE"}},"steps":[
	  {"while":{"id":"loop","condition":"counter < 5",
	    "params":{"loop_params":{"type":"MAP","value":{"counter":{"type":"LONG","value":0}}}},
	    "steps":[
	      {"step":{"id":"body","type":"NoOp","params":{"counter":{"type":"LONG","expression":"counter + 1"}}}},
	      {"step":{"id":"check","type":"NoOp","retry_policy":{"error_retry_limit":0},"params":{
	        "ok":{"type":"BOOLEAN","expression":"if (broken && counter == 2) { throw 'two is broken'; } return true;"}}}}]}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("wh-resume", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("run 1 %s: %s", got.Status, got.Timeline)
	}
	res, err := e.runs.Restart(context.Background(), execution.RestartRequest{WorkflowID: parent.WorkflowID,
		InstanceID: parent.InstanceID, RunParams: workflow.Params{"broken": workflow.LiteralParam(workflow.ParamTypeBoolean, false)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(res, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 2 %s: %s", got.Status, got.Timeline)
	}
	var first, second []childRow
	for _, c := range e.children(parent) {
		if c.Parent.RunID == 1 {
			first = append(first, c)
		} else {
			second = append(second, c)
		}
	}
	if got := loopIndexes(t, first); fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("run 1 iterations %v, want [0 1 2]", got)
	}
	if got := loopIndexes(t, second); fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("run 2 iterations %v, want [2 3 4] (resumed at the failed one)", got)
	}
	if !strings.Contains(string(second[0].RunParams["counter"]), "2") || !strings.Contains(string(second[0].RunParams["broken"]), "false") {
		t.Errorf("resumed iteration params counter=%s broken=%s, want 2 and false",
			second[0].RunParams["counter"], second[0].RunParams["broken"])
	}
	step := e.stepAttempt(res, "loop")
	if !strings.Contains(string(step.Params), `"while_iterations"`) || !strings.Contains(string(step.Timeline), "after 5 iterations") {
		t.Errorf("loop step %s params %s timeline %s", step.Status, step.Params, step.Timeline)
	}
	// A restart from the beginning starts over.
	third, err := e.runs.Restart(context.Background(), execution.RestartRequest{WorkflowID: parent.WorkflowID,
		InstanceID: parent.InstanceID, Policy: execution.RestartFromBeginning})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(third, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 3 %s: %s", got.Status, got.Timeline)
	}
	var fromScratch []childRow
	for _, c := range e.children(parent) {
		if c.Parent.RunID == 3 {
			fromScratch = append(fromScratch, c)
		}
	}
	if got := loopIndexes(t, fromScratch); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("run 3 iterations %v, want all five", got)
	}
}

// TestWhileFinalLoopParamsAreOutputs: a step after the loop reads the
// loop params' final values as outputs of the while step.
func TestWhileFinalLoopParamsAreOutputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"wh-final","steps":[
	  {"while":{"id":"loop","condition":"counter < 3","transition":{"successors":{"after":"true"}},
	    "params":{"loop_params":{"type":"MAP","value":{"counter":{"type":"LONG","value":0},"label":{"type":"STRING","value":"x"}}}},
	    "steps":[{"step":{"id":"body","type":"NoOp","params":{"counter":{"type":"LONG","expression":"counter + 1"}}}}]}},
	  {"step":{"id":"after","type":"NoOp","params":{
	    "final":{"type":"LONG","expression":"loop__counter"},"label":{"type":"STRING","expression":"loop__label"}}}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("wh-final", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(e.stepAttempt(parent, "after").Params, &ps); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ps["final"].Value) != "3" || ps["label"].Value != "x" {
		t.Errorf("after reads counter=%v label=%v, want 3 and x", ps["final"].Value, ps["label"].Value)
	}
}
