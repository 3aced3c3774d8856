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
	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// childDef is a PARALLEL workflow of three steps of the given type (with
// extra fields), s1 -> s2 -> s3.
func childDef(id, typ, extra string) string {
	step := func(name, next string) string {
		succ := ""
		if next != "" {
			succ = fmt.Sprintf(`,"transition":{"successors":{%q:"true"}}`, next)
		}
		return fmt.Sprintf(`{"step":{"id":%q,"type":%q%s%s}}`, name, typ, extra, succ)
	}
	return fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},
	"workflow":{"id":%q,"params":{"c1":{"type":"STRING","value":"child default"}},"steps":[%s,%s,%s]}}`,
		id, step("s1", "s2"), step("s2", "s3"), step("s3", ""))
}

// parentDef runs target as subworkflow step sw (with the given extra
// fields), then a NoOp step after it.
func parentDef(id, target, extra string) string {
	return fmt.Sprintf(`{"workflow":{"id":%q,"params":{"p1":{"type":"STRING","value":"from parent $$x"}},"steps":[
	{"subworkflow":{"id":"sw"%s,"transition":{"successors":{"after":"true"}},"params":{
	    "subworkflow_id":{"type":"STRING","value":%q},
	    "extra":{"type":"LONG","value":5}}}},
	{"step":{"id":"after","type":"NoOp"}}]}}`, id, extra, target)
}

// childRow is a run a subworkflow step created.
type childRow struct {
	run.Ref
	Status     instance.WorkflowStatus
	Parent     run.Parent
	Depth      int
	GroupCount int32
	RunParams  map[string]json.RawMessage
}

// children lists the runs created by steps of the parent run.
func (e *env) children(parent *execution.Instance) []childRow {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT workflow_id, instance_id, run_id, status, parent, depth,
            group_count, run_params FROM workflow_instance
        WHERE parent->>'workflow_id' = $1 AND (parent->>'instance_id')::bigint = $2 ORDER BY instance_id`,
		parent.WorkflowID, parent.InstanceID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []childRow
	for rows.Next() {
		var c childRow
		var rp []byte
		if err := rows.Scan(&c.WorkflowID, &c.InstanceID, &c.RunID, &c.Status, &c.Parent, &c.Depth, &c.GroupCount, &rp); err != nil {
			e.t.Fatal(err)
		}
		if err := json.Unmarshal(rp, &c.RunParams); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// waitChild polls until the parent's step created a child and returns it.
func (e *env) waitChild(parent *execution.Instance, status instance.WorkflowStatus) childRow {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cs := e.children(parent); len(cs) > 0 && (status == "" || cs[0].Status == status) {
			return cs[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("no child %s of %s/%d", status, parent.WorkflowID, parent.InstanceID)
	return childRow{}
}

func (e *env) asInstance(c childRow) *execution.Instance {
	return &execution.Instance{WorkflowID: c.WorkflowID, InstanceID: c.InstanceID, RunID: c.RunID}
}

// stepAttempt reads the latest attempt of a step.
func (e *env) stepAttempt(inst *execution.Instance, stepID string) *execution.StepAttempt {
	e.t.Helper()
	steps, err := e.runs.Steps(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range steps {
		if s.StepID == stepID {
			return s
		}
	}
	e.t.Fatalf("no step %s in %s/%d", stepID, inst.WorkflowID, inst.InstanceID)
	return nil
}

func TestSubworkflowSyncSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(childDef("sw-child", "NoOp", ""))
	e.push(parentDef("sw-parent", "sw-child", ""))
	e.engine(flow.Config{})
	parent := e.start("sw-parent", nil)
	got := e.wait(parent, 30*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	if st := e.stepStatuses(parent); st["sw"] != instance.StepSucceeded || st["after"] != instance.StepSucceeded {
		t.Fatalf("parent steps %v", st)
	}
	cs := e.children(parent)
	if len(cs) != 1 {
		t.Fatalf("%d children, want 1", len(cs))
	}
	c := cs[0]
	if c.Status != instance.WorkflowSucceeded || c.WorkflowID != "sw-child" || c.Depth != 1 || c.GroupCount != testGroups {
		t.Errorf("child %+v", c)
	}
	if c.Parent.Ref != (run.Ref{WorkflowID: "sw-parent", InstanceID: parent.InstanceID, RunID: 1}) || c.Parent.StepID != "sw" || c.Parent.AttemptID != 1 {
		t.Errorf("child linkage %+v", c.Parent)
	}
	for _, name := range []string{"p1", "extra"} {
		if _, ok := c.RunParams[name]; !ok {
			t.Errorf("child run params %v lack inherited %s", c.RunParams, name)
		}
	}
	if _, ok := c.RunParams["subworkflow_id"]; ok {
		t.Errorf("child run params %v carry subworkflow_id", c.RunParams)
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		if a := e.attempts(e.asInstance(c), s); len(a) != 1 || a[0] != instance.StepSucceeded {
			t.Errorf("child step %s attempts %v", s, a)
		}
	}
	// The inherited value is passed as a value, not re-interpolated.
	child := e.wait(e.asInstance(c), time.Second)
	if !strings.Contains(string(child.Params), `"from parent $x"`) {
		t.Errorf("child params %s", child.Params)
	}
	step := e.stepAttempt(parent, "sw")
	var out map[string]any
	_ = json.Unmarshal(step.Outputs, &out)
	if out["subworkflow_instance_id"] != float64(c.InstanceID) || out["subworkflow_status"] != "SUCCEEDED" {
		t.Errorf("step outputs %s", step.Outputs)
	}
	if !strings.Contains(string(step.RuntimeState), `"subworkflow_instance_id"`) {
		t.Errorf("step runtime state %s", step.RuntimeState)
	}
}

func TestSubworkflowExplicitParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(childDef("swx-child", "NoOp", ""))
	e.push(parentDef("swx-parent", "swx-child", `,"explicit_params":true`))
	e.engine(flow.Config{})
	parent := e.start("swx-parent", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	c := e.children(parent)[0]
	if _, ok := c.RunParams["p1"]; ok {
		t.Errorf("explicit child run params %v carry the parent's p1", c.RunParams)
	}
	if _, ok := c.RunParams["extra"]; !ok {
		t.Errorf("explicit child run params %v lack the step's extra", c.RunParams)
	}
}

func TestSubworkflowFailingChildFailsStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(childDef("swf-child", "Fail", ""))
	e.push(parentDef("swf-parent", "swf-child", ""))
	e.engine(flow.Config{})
	parent := e.start("swf-parent", nil)
	got := e.wait(parent, 30*time.Second)
	if got.Status != instance.WorkflowFailed {
		t.Fatalf("parent %s, want FAILED", got.Status)
	}
	step := e.stepAttempt(parent, "sw")
	if step.Status != instance.StepFatallyFailed || !strings.Contains(string(step.Timeline), "ended FAILED") {
		t.Errorf("step %s %s", step.Status, step.Timeline)
	}
	if st := e.stepStatuses(parent); st["after"] != "" {
		t.Errorf("successor of the failed step ran: %v", st)
	}
}

func TestSubworkflowAsync(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(childDef("swa-child", "Sleep", `,"sleep_seconds":1`))
	e.push(parentDef("swa-parent", "swa-child", `,"sync":false`))
	e.engine(flow.Config{})
	parent := e.start("swa-parent", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	c := e.children(parent)
	if len(c) != 1 {
		t.Fatalf("%d children, want 1", len(c))
	}
	if c[0].Status.IsTerminal() {
		t.Errorf("async parent waited for its child (%s)", c[0].Status)
	}
	if got := e.wait(e.asInstance(c[0]), 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Errorf("child %s", got.Status)
	}
}

// A workflow that runs itself is stopped by the depth limit: runs at
// depths 0..10 exist, the deepest step fails, and every run fails.
func TestSubworkflowDepthLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},"workflow":{"id":"sw-rec","steps":[
	{"subworkflow":{"id":"again","params":{"subworkflow_id":{"type":"STRING","value":"sw-rec"}}}}]}}`)
	e.engine(flow.Config{})
	root := e.start("sw-rec", nil)
	if got := e.wait(root, 60*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("root %s, want FAILED", got.Status)
	}
	var n, deepest int
	var deepestID int64
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*), max(depth),
            (SELECT instance_id FROM workflow_instance WHERE workflow_id = 'sw-rec' ORDER BY depth DESC LIMIT 1)
        FROM workflow_instance WHERE workflow_id = 'sw-rec'`).Scan(&n, &deepest, &deepestID); err != nil {
		t.Fatal(err)
	}
	if n != composite.MaxSubworkflowDepth+1 || deepest != composite.MaxSubworkflowDepth {
		t.Errorf("%d runs, deepest at %d; want %d runs, deepest at %d", n, deepest, composite.MaxSubworkflowDepth+1, composite.MaxSubworkflowDepth)
	}
	step := e.stepAttempt(&execution.Instance{WorkflowID: "sw-rec", InstanceID: deepestID, RunID: 1}, "again")
	if step.Status != instance.StepFatallyFailed || !strings.Contains(string(step.Timeline), "depth limit") {
		t.Errorf("deepest step %s %s", step.Status, step.Timeline)
	}
}

// Stopping the parent run stops its child; killing it kills the child.
func TestSubworkflowStopAndKillPropagate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action      run.Action
		parent, kid instance.WorkflowStatus
	}{
		{run.ActionStop, instance.WorkflowStopped, instance.WorkflowStopped},
		{run.ActionKill, instance.WorkflowFailed, instance.WorkflowFailed},
	}
	for _, tc := range cases {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.push(childDef("sws-child", "Sleep", `,"sleep_seconds":3600`))
			e.push(parentDef("sws-parent", "sws-child", ""))
			e.engine(flow.Config{})
			parent := e.start("sws-parent", nil)
			c := e.waitChild(parent, instance.WorkflowInProgress)
			e.waitRunning(e.asInstance(c))
			if _, err := e.runs.Act(context.Background(), parent.WorkflowID, parent.InstanceID, 0, tc.action); err != nil {
				t.Fatal(err)
			}
			if got := e.wait(parent, 30*time.Second); got.Status != tc.parent {
				t.Errorf("parent %s, want %s", got.Status, tc.parent)
			}
			if got := e.wait(e.asInstance(c), 30*time.Second); got.Status != tc.kid {
				t.Errorf("child %s, want %s", got.Status, tc.kid)
			}
		})
	}
}

// The engine dies after the child was created: the node that takes over
// resumes waiting for the same child, and the parent finishes.
func TestSubworkflowSurvivesCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(childDef("swc-child", "Sleep", `,"sleep_seconds":0.5`))
	e.push(parentDef("swc-parent", "swc-child", ""))
	a := e.engine(flow.Config{NodeID: "node-a", Lease: time.Second})
	parent := e.start("swc-parent", nil)
	e.waitChild(parent, "")
	b := e.engine(flow.Config{NodeID: "node-b", Lease: time.Second})
	_ = b
	a.Crash()
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	if cs := e.children(parent); len(cs) != 1 || cs[0].Status != instance.WorkflowSucceeded {
		t.Errorf("children %+v, want one SUCCEEDED", cs)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'swc-child'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d child runs, want 1", n)
	}
	if a := e.attempts(parent, "sw"); len(a) != 1 || a[0] != instance.StepSucceeded {
		t.Errorf("step sw attempts %v, want one SUCCEEDED", a)
	}
}

func TestGetFromSubworkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(childDef("swg-child", "NoOp", ""))
	e.push(`{"workflow":{"id":"swg-parent","params":{"p1":{"type":"STRING","value":"inherited"}},"steps":[
	{"subworkflow":{"id":"sw","transition":{"successors":{"after":"true"}},"params":{
	    "subworkflow_id":{"type":"STRING","value":"swg-child"}}}},
	{"step":{"id":"after","type":"NoOp","params":{
	    "own":{"type":"STRING","expression":"params.getFromSubworkflow('sw', 'c1')"},
	    "back":{"type":"STRING","expression":"params.getFromSubworkflow('sw', 'p1')"}}}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("swg-parent", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(e.stepAttempt(parent, "after").Params, &ps); err != nil {
		t.Fatal(err)
	}
	if ps["own"].Value != "child default" || ps["back"].Value != "inherited" {
		t.Errorf("after params own=%v back=%v", ps["own"].Value, ps["back"].Value)
	}
}

// TestSubworkflowRecursionIgnoresRunStrategy: a workflow that calls itself
// runs its child inside its own run. Under SEQUENTIAL the child would
// queue behind its own ancestor for ever, under LAST_ONLY it would stop
// it, under FIRST_ONLY it would be dropped; it is admitted at once.
func TestSubworkflowRecursionIgnoresRunStrategy(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{"SEQUENTIAL", "LAST_ONLY", "FIRST_ONLY"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id := "sw-self-" + strings.ToLower(strings.ReplaceAll(strategy, "_", "-"))
			e.push(fmt.Sprintf(`{"properties":{"owner":"tester","run_strategy":%q},"workflow":{"id":%q,
			  "params":{"n":{"type":"LONG","value":2}},"steps":[
			  {"step":{"id":"check","type":"NoOp","transition":{"successors":{"down":"n > 0"}}}},
			  {"subworkflow":{"id":"down","params":{"subworkflow_id":{"type":"STRING","value":%q},
			    "n":{"type":"LONG","expression":"n - 1"}}}}]}}`, strategy, id, id))
			e.engine(flow.Config{})
			root := e.start(id, nil)
			if got := e.wait(root, 30*time.Second); got.Status != instance.WorkflowSucceeded {
				t.Fatalf("root %s: %s", got.Status, got.Timeline)
			}
			var runs, succeeded int
			if err := e.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE status = 'SUCCEEDED')
                FROM workflow_instance WHERE workflow_id = $1`, id).Scan(&runs, &succeeded); err != nil {
				t.Fatal(err)
			}
			if runs != 3 || succeeded != 3 {
				t.Errorf("%d runs, %d succeeded; want 3 nested runs (n = 2, 1, 0), all succeeded", runs, succeeded)
			}
		})
	}
}
