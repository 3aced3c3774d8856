package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// iterationRow is one run of a foreach iteration.
type iterationRow struct {
	Iteration int64
	RunID     int64
	Status    instance.WorkflowStatus
	Group     int32
	RunParams map[string]json.RawMessage
}

// iterations reads every run of the iterations of a foreach step of a
// parent instance, by iteration then run.
func (e *env) iterations(parent *execution.Instance, stepID string) []iterationRow {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT instance_id, run_id, status, group_id, run_params
        FROM workflow_instance WHERE workflow_id = $1 ORDER BY instance_id, run_id`,
		instance.ForeachWorkflowID(parent.WorkflowID, parent.InstanceID, stepID))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []iterationRow
	for rows.Next() {
		var r iterationRow
		var rp []byte
		if err := rows.Scan(&r.Iteration, &r.RunID, &r.Status, &r.Group, &rp); err != nil {
			e.t.Fatal(err)
		}
		if err := json.Unmarshal(rp, &r.RunParams); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// runParam reads one run param's value as text.
func runParam(t *testing.T, r iterationRow, name string) string {
	t.Helper()
	var p struct {
		Value any `json:"value"`
	}
	dec := json.NewDecoder(strings.NewReader(string(r.RunParams[name])))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("run param %s of iteration %d: %v (%s)", name, r.Iteration, err, r.RunParams[name])
	}
	return fmt.Sprint(p.Value)
}

// foreachDef is a workflow whose foreach step "loop" runs the given body
// steps once per combination of loopParams (a JSON object of params).
func foreachDef(id, loopParams, extra, body string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"workflow":{"id":%q,"params":{"p1":{"type":"STRING","value":"from parent"}},"steps":[
	{"foreach":{"id":"loop","params":{"loop_params":{"type":"MAP","value":%s}}%s,"steps":[%s]}}]}}`,
		id, loopParams, extra, body)
}

const noopBody = `{"step":{"id":"body","type":"NoOp"}}`

// TestForeachBackfillYAML is the seed's backfill example: a step computes
// the dates, a foreach runs one iteration per date, and each iteration's
// job gets its date.
func TestForeachBackfillYAML(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d, err := workflow.DecodeYAML([]byte(`
Workflow:
  id: demo.pipeline
  jobs:
    - job:
        id: step1
        type: NoOp
        '!dates': return new int[]{20220101,20220102,20220103};
    - foreach:
        id: step2
        params:
          date: ${dates@step1}
        jobs:
          - job:
              id: backfill
              type: NoOp
              arg1: $date
`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(d)
	e.push(string(raw))
	e.engine(flow.Config{})
	parent := e.start("demo.pipeline", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	its := e.iterations(parent, "step2")
	if len(its) != 3 {
		t.Fatalf("%d iteration runs, want 3: %+v", len(its), its)
	}
	for i, it := range its {
		want := []string{"20220101", "20220102", "20220103"}[i]
		if it.Status != instance.WorkflowSucceeded || it.Iteration != int64(i+1) || it.RunID != 1 {
			t.Errorf("iteration %d: %+v", i, it)
		}
		if got := runParam(t, it, "date"); got != want {
			t.Errorf("iteration %d date %s, want %s", i, got, want)
		}
		if got := runParam(t, it, "loop_index"); got != fmt.Sprint(i) {
			t.Errorf("iteration %d loop_index %s", i, got)
		}
		inst := &execution.Instance{WorkflowID: instance.ForeachWorkflowID(parent.WorkflowID, parent.InstanceID, "step2"),
			InstanceID: it.Iteration, RunID: it.RunID}
		job := e.stepAttempt(inst, "backfill")
		if job.Status != instance.StepSucceeded || !strings.Contains(string(job.Params), want) {
			t.Errorf("iteration %d backfill %s params %s", i, job.Status, job.Params)
		}
	}
	step := e.stepAttempt(parent, "step2")
	if step.Status != instance.StepSucceeded || !strings.Contains(string(step.Params), `"foreach_iterations"`) {
		t.Errorf("foreach step %s params %s", step.Status, step.Params)
	}
}

// TestForeachCrossProductAndConcurrency: two loop params run every
// combination, the first varying fastest, never more than concurrency at
// once, each iteration routed to its own group.
func TestForeachCrossProductAndConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(foreachDef("fe-cross", `{"a":{"type":"LONG_ARRAY","value":[1,2,3]},"b":{"type":"STRING_ARRAY","value":["x","y"]}}`,
		`"concurrency":2`, `{"step":{"id":"body","type":"Gauge"}}`))
	g := &gauge{hold: 50 * time.Millisecond}
	rts := testRuntimes()
	rts["Gauge"] = g
	e.engine(flow.Config{Runtimes: rts})
	parent := e.start("fe-cross", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	its := e.iterations(parent, "loop")
	var combos []string
	groups := map[int32]bool{}
	for _, it := range its {
		combos = append(combos, runParam(t, it, "a")+runParam(t, it, "b"))
		groups[it.Group] = true
		if runParam(t, it, "p1") != "from parent" {
			t.Errorf("iteration %d lost p1", it.Iteration)
		}
	}
	if got := strings.Join(combos, " "); got != "1x 2x 3x 1y 2y 3y" {
		t.Errorf("combinations %q", got)
	}
	if len(groups) < 2 {
		t.Errorf("all iterations in one group: %v", groups)
	}
	if most := g.most.Load(); most != 2 {
		t.Errorf("at most %d iterations ran at once, want 2", most)
	}
}

// TestForeachEmptyLoop: an empty array runs no iteration and succeeds.
func TestForeachEmptyLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(foreachDef("fe-empty", `{"a":{"type":"LONG_ARRAY","value":[]}}`, "", noopBody))
	e.engine(flow.Config{})
	parent := e.start("fe-empty", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	if its := e.iterations(parent, "loop"); len(its) != 0 {
		t.Errorf("%d iterations", len(its))
	}
}

// TestForeachFailureModes: FAIL_AFTER_RUNNING launches no new iteration
// after a failure and fails the step; IGNORE_FAILURE runs every iteration
// and completes with error.
func TestForeachFailureModes(t *testing.T) {
	t.Parallel()
	// Iteration 2 (i == 2) fails; concurrency 1 makes the order certain.
	body := `{"step":{"id":"body","type":"NoOp"}},{"step":{"id":"check","type":"NoOp","retry_policy":{"error_retry_limit":0},"params":{
	    "ok":{"type":"BOOLEAN","expression":"if (i == 2) { throw 'iteration two fails'; } return true;"}}}}`
	for _, tc := range []struct {
		mode     string
		step     instance.StepStatus
		parent   instance.WorkflowStatus
		launched int
	}{
		{"FAIL_AFTER_RUNNING", instance.StepFatallyFailed, instance.WorkflowFailed, 2},
		{"IGNORE_FAILURE", instance.StepCompletedWithError, instance.WorkflowSucceeded, 4},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id := "fe-" + strings.ToLower(strings.ReplaceAll(tc.mode, "_", "-"))
			e.push(foreachDef(id, `{"i":{"type":"LONG_ARRAY","value":[1,2,3,4]}}`,
				fmt.Sprintf(`"concurrency":1,"failure_mode":%q`, tc.mode), body))
			e.engine(flow.Config{})
			parent := e.start(id, nil)
			got := e.wait(parent, 60*time.Second)
			if got.Status != tc.parent {
				t.Fatalf("parent %s: %s", got.Status, got.Timeline)
			}
			if its := e.iterations(parent, "loop"); len(its) != tc.launched {
				t.Errorf("%d iterations launched, want %d", len(its), tc.launched)
			}
			if s := e.stepAttempt(parent, "loop"); s.Status != tc.step {
				t.Errorf("foreach step %s %s", s.Status, s.Timeline)
			}
		})
	}
}

// TestForeachStopPropagates: stopping the parent run stops the live
// iterations and launches no more.
func TestForeachStopPropagates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(foreachDef("fe-stop", `{"i":{"type":"LONG_ARRAY","value":[1,2,3,4,5,6]}}`, `"concurrency":2`,
		`{"step":{"id":"body","type":"Sleep","sleep_seconds":3600}}`))
	e.engine(flow.Config{})
	parent := e.start("fe-stop", nil)
	deadline := time.Now().Add(30 * time.Second)
	for len(e.liveIterations(parent)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("iterations never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.runs.Act(context.Background(), parent.WorkflowID, parent.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowStopped {
		t.Fatalf("parent %s", got.Status)
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(e.liveIterations(parent)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("iterations still live: %+v", e.liveIterations(parent))
		}
		time.Sleep(20 * time.Millisecond)
	}
	its := e.iterations(parent, "loop")
	if len(its) != 2 {
		t.Errorf("%d iterations launched, want 2", len(its))
	}
	for _, it := range its {
		if it.Status != instance.WorkflowStopped {
			t.Errorf("iteration %d %s", it.Iteration, it.Status)
		}
	}
}

func (e *env) liveIterations(parent *execution.Instance) []iterationRow {
	var out []iterationRow
	for _, it := range e.iterations(parent, "loop") {
		if !it.Status.IsTerminal() {
			out = append(out, it)
		}
	}
	return out
}

// TestForeachRestartRerunsOnlyFailedIterations: restarting a run whose
// foreach had failed iterations runs those again, as run 2 of each, and
// keeps the succeeded ones.
func TestForeachRestartRerunsOnlyFailedIterations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Iterations with an even i fail while the run param "broken" is true.
	body := `{"step":{"id":"body","type":"NoOp","retry_policy":{"error_retry_limit":0},"params":{
	    "ok":{"type":"BOOLEAN","expression":"if (broken && i % 2 == 0) { throw 'even fails'; } return true;"}}}}`
	def := fmt.Sprintf(`{"workflow":{"id":"fe-restart","params":{"broken":{"type":"BOOLEAN","value":true,"mode":"MUTABLE"}},"steps":[
	{"foreach":{"id":"loop","concurrency":3,"params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1,2,3,4,5,6]}}}},
	  "steps":[%s]}}]}}`, body)
	e.push(def)
	e.engine(flow.Config{})
	parent := e.start("fe-restart", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	first := e.iterations(parent, "loop")
	failed := map[int64]bool{}
	for _, it := range first {
		if it.Status == instance.WorkflowFailed {
			failed[it.Iteration] = true
		}
	}
	if len(failed) == 0 {
		t.Fatalf("no failed iteration: %+v", first)
	}
	res, err := e.runs.Restart(context.Background(), execution.RestartRequest{WorkflowID: parent.WorkflowID,
		InstanceID: parent.InstanceID, RunParams: workflow.Params{"broken": workflow.LiteralParam(workflow.ParamTypeBoolean, false)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(res, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("restarted run %s: %s", got.Status, got.Timeline)
	}
	var rerun []int64
	latest := map[int64]iterationRow{}
	for _, it := range e.iterations(parent, "loop") {
		if it.RunID == 2 {
			rerun = append(rerun, it.Iteration)
		}
		latest[it.Iteration] = it
	}
	sort.Slice(rerun, func(i, j int) bool { return rerun[i] < rerun[j] })
	var want []int64
	for it := int64(1); it <= 6; it++ {
		if failed[it] || !hasIteration(first, it) {
			want = append(want, it)
		}
	}
	if fmt.Sprint(rerun) != fmt.Sprint(want) {
		t.Errorf("iterations run again %v, want %v (failed %v)", rerun, want, failed)
	}
	for it := int64(1); it <= 6; it++ {
		if latest[it].Status != instance.WorkflowSucceeded {
			t.Errorf("iteration %d latest run %d %s", it, latest[it].RunID, latest[it].Status)
		}
	}
}

// gauge is a runtime that holds each attempt for a while and records the
// most attempts that ran at once, across all attempts.
type gauge struct {
	hold time.Duration
	mu   sync.Mutex
	now  int64
	most atomic.Int64
}

func (g *gauge) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	g.mu.Lock()
	g.now++
	if g.now > g.most.Load() {
		g.most.Store(g.now)
	}
	g.mu.Unlock()
	time.Sleep(g.hold)
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return stepruntime.Result{State: stepruntime.Done}
}

func (g *gauge) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (g *gauge) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

func hasIteration(rows []iterationRow, it int64) bool {
	for _, r := range rows {
		if r.Iteration == it {
			return true
		}
	}
	return false
}

// TestForeachGetFromForeach: a step after a foreach reads a param of a
// step inside it, one value per iteration in iteration order.
func TestForeachGetFromForeach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"fe-get","steps":[
	  {"foreach":{"id":"loop","transition":{"successors":{"after":"true"}},
	    "params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1,2,3]}}}},
	    "steps":[{"step":{"id":"body","type":"NoOp","params":{"sq":{"type":"LONG","expression":"i * i"}}}}]}},
	  {"step":{"id":"after","type":"NoOp","params":{
	    "all":{"type":"LONG_ARRAY","expression":"params.getFromForeach('loop', 'body', 'sq')"},
	    "n":{"type":"LONG","expression":"loop__foreach_iterations"}}}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("fe-get", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	after := e.stepAttempt(parent, "after")
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(after.Params, &ps); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ps["all"].Value); got != "[1 4 9]" {
		t.Errorf("getFromForeach = %s, want [1 4 9]", got)
	}
	if got := fmt.Sprint(ps["n"].Value); got != "3" {
		t.Errorf("foreach_iterations = %s", got)
	}
}

// TestForeachNested: a foreach inside a foreach runs every inner
// iteration of every outer one, each seeing both loops' params.
func TestForeachNested(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(`{"workflow":{"id":"fe-nest","steps":[
	  {"foreach":{"id":"outer","params":{"loop_params":{"type":"MAP","value":{"a":{"type":"LONG_ARRAY","value":[1,2]}}}},
	    "steps":[{"foreach":{"id":"inner","params":{"loop_params":{"type":"MAP","value":{"b":{"type":"LONG_ARRAY","value":[10,20,30]}}}},
	      "steps":[{"step":{"id":"body","type":"NoOp","params":{"prod":{"type":"LONG","expression":"a * b"}}}}]}}]}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("fe-nest", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	outer := e.iterations(parent, "outer")
	if len(outer) != 2 {
		t.Fatalf("%d outer iterations", len(outer))
	}
	var prods []string
	for _, o := range outer {
		oi := &execution.Instance{WorkflowID: instance.ForeachWorkflowID(parent.WorkflowID, parent.InstanceID, "outer"),
			InstanceID: o.Iteration, RunID: o.RunID}
		inner := e.iterations(oi, "inner")
		if len(inner) != 3 {
			t.Fatalf("outer iteration %d: %d inner iterations", o.Iteration, len(inner))
		}
		for _, in := range inner {
			ii := &execution.Instance{WorkflowID: instance.ForeachWorkflowID(oi.WorkflowID, oi.InstanceID, "inner"),
				InstanceID: in.Iteration, RunID: in.RunID}
			body := e.stepAttempt(ii, "body")
			var ps map[string]struct {
				Value any `json:"value"`
			}
			if err := json.Unmarshal(body.Params, &ps); err != nil {
				t.Fatal(err)
			}
			prods = append(prods, fmt.Sprint(ps["prod"].Value))
		}
	}
	if got := strings.Join(prods, " "); got != "10 20 30 20 40 60" {
		t.Errorf("products %q", got)
	}
	ov, err := e.runs.Rollup(context.Background(), parent.WorkflowID, parent.InstanceID, parent.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if ov.TotalLeafCount != 6 || ov.Overview[instance.StepSucceeded].Count != 6 {
		t.Errorf("rollup %d leaves %+v", ov.TotalLeafCount, ov.Overview)
	}
}

// TestForeachInSubworkflowInForeach: a foreach whose iterations run a
// subworkflow whose own foreach iterates again; the parent's rollup
// flattens all of it to the innermost leaves.
func TestForeachInSubworkflowInForeach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(withStrategy(`{"workflow":{"id":"fe-child","steps":[
	  {"foreach":{"id":"inner","params":{"loop_params":{"type":"MAP","value":{"item":{"type":"STRING_ARRAY","value":["x","y"]}}}},
	    "steps":[{"step":{"id":"leaf","type":"NoOp","params":{"tag":{"type":"STRING","value":"${n}-${item}"}}}}]}}]}}`,
		`{"rule":"PARALLEL","workflow_concurrency":10}`))
	e.push(`{"workflow":{"id":"fe-outer","steps":[
	  {"foreach":{"id":"outer","params":{"loop_params":{"type":"MAP","value":{"n":{"type":"LONG_ARRAY","value":[1,2,3]}}}},
	    "steps":[{"subworkflow":{"id":"call","params":{"subworkflow_id":{"type":"STRING","value":"fe-child"}}}}]}}]}}`)
	e.engine(flow.Config{})
	parent := e.start("fe-outer", nil)
	if got := e.wait(parent, 90*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	var tags []string
	rows, err := e.pool.Query(context.Background(), `SELECT s.params->'tag'->>'value' FROM step_instance s
        WHERE s.workflow_id LIKE 'fe-child:%' AND s.step_id = 'leaf' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tag string
		if err := rows.Scan(&tag); err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	rows.Close()
	if got := strings.Join(tags, " "); got != "1-x 1-y 2-x 2-y 3-x 3-y" {
		t.Errorf("leaf tags %q", got)
	}
	ov, err := e.runs.Rollup(context.Background(), parent.WorkflowID, parent.InstanceID, parent.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if ov.TotalLeafCount != 6 || ov.Overview[instance.StepSucceeded].Count != 6 {
		t.Errorf("rollup %d leaves %+v", ov.TotalLeafCount, ov.Overview)
	}
}

// napper holds each attempt for its nap_ms param and records when each
// iteration (its loop_index param) started and ended.
type napper struct {
	mu          sync.Mutex
	start, done map[int64]time.Time
}

func (n *napper) Start(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	idx, _ := a.Params["loop_index"].(int64)
	nap, _ := a.Params["nap_ms"].(int64)
	n.mu.Lock()
	n.start[idx] = time.Now()
	n.mu.Unlock()
	time.Sleep(time.Duration(nap) * time.Millisecond)
	n.mu.Lock()
	n.done[idx] = time.Now()
	n.mu.Unlock()
	return stepruntime.Result{State: stepruntime.Done}
}

func (n *napper) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (n *napper) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// TestForeachStrictOrdering: with strict_ordering, no iteration starts
// more than concurrency places after the oldest one still running, so a
// slow first iteration holds back the third; without it, the others
// overtake it.
func TestForeachStrictOrdering(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{true, false} {
		t.Run(fmt.Sprint("strict=", strict), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id := fmt.Sprintf("fe-strict-%v", strict)
			e.push(foreachDef(id, `{"nap_ms":{"type":"LONG_ARRAY","value":[800,0,0,0,0]}}`,
				fmt.Sprintf(`"concurrency":2,"strict_ordering":%v`, strict),
				`{"step":{"id":"body","type":"Gauge","params":{"nap_ms":{"type":"LONG","expression":"nap_ms"},
				  "loop_index":{"type":"LONG","expression":"loop_index"}}}}`))
			n := &napper{start: map[int64]time.Time{}, done: map[int64]time.Time{}}
			rts := testRuntimes()
			rts["Gauge"] = n
			e.engine(flow.Config{Runtimes: rts})
			parent := e.start(id, nil)
			if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
				t.Fatalf("parent %s: %s", got.Status, got.Timeline)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			waited := !n.start[2].Before(n.done[0])
			if waited != strict {
				t.Errorf("iteration 3 started %v after iteration 1 ended (strict %v)", n.start[2].Sub(n.done[0]), strict)
			}
		})
	}
}

// TestForeachFailImmediately: a failed iteration stops the live ones at
// once and fails the step.
func TestForeachFailImmediately(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Iteration 1 fails at once; the others sleep for an hour.
	e.push(foreachDef("fe-fail-now", `{"i":{"type":"LONG_ARRAY","value":[1,2,3]}}`,
		`"concurrency":3,"failure_mode":"FAIL_IMMEDIATELY"`,
		`{"step":{"id":"body","type":"Sleep","sleep_seconds":3600,"retry_policy":{"error_retry_limit":0},"params":{
		  "ok":{"type":"BOOLEAN","expression":"if (i == 1) { throw 'one fails'; } return true;"}}}}`))
	e.engine(flow.Config{})
	parent := e.start("fe-fail-now", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	statuses := map[instance.WorkflowStatus]int{}
	for _, it := range e.iterations(parent, "loop") {
		statuses[it.Status]++
	}
	if statuses[instance.WorkflowFailed] != 1 || statuses[instance.WorkflowStopped] != 2 {
		t.Errorf("iteration statuses %v, want 1 FAILED and 2 STOPPED", statuses)
	}
	if s := e.stepAttempt(parent, "loop"); s.Status != instance.StepFatallyFailed {
		t.Errorf("foreach step %s", s.Status)
	}
}

// Issue 18: an iteration whose flow group the foreach's own node holds is
// created IN_PROGRESS and started in memory, without a start message; one
// in a group another node holds gets exactly one start message and runs
// there. With two nodes holding two groups each, both kinds happen, and
// every iteration runs once, on the node that holds its group.
func TestForeachIterationsStartOnTheNodeHoldingTheirGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// Every start message, as it is enqueued.
	if _, err := e.pool.Exec(ctx, `
CREATE TABLE test_start_message (workflow_id text, instance_id bigint, group_id integer);
CREATE FUNCTION test_record_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_start_message VALUES (NEW.payload->>'workflow_id', (NEW.payload->>'instance_id')::bigint, NEW.group_id);
    RETURN NULL;
END $$;
CREATE TRIGGER test_record_start AFTER INSERT ON maestro_queue_start FOR EACH ROW EXECUTE FUNCTION test_record_start();`); err != nil {
		t.Fatal(err)
	}
	const n = 64
	e.push(foreachDef("fe-local", fmt.Sprintf(`{"i":{"type":"LONG_ARRAY","expression":"Util.intsBetween(0, %d, 1)"}}`, n),
		`"concurrency":16`, noopBody))
	cfg := func(node string) flow.Config {
		return flow.Config{NodeID: node, Lease: 10 * time.Second, HeartbeatInterval: 200 * time.Millisecond}
	}
	e.engine(cfg("node-a"))
	e.engine(cfg("node-b"))
	e.waitOwners(map[string]int{"node-a": testGroups / 2, "node-b": testGroups / 2}, 10*time.Second)
	owners := map[int32]string{}
	rows, err := e.pool.Query(ctx, `SELECT group_id, owner FROM flow_group WHERE group_id < $1`, testGroups)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var g int32
		var owner string
		if err := rows.Scan(&g, &owner); err != nil {
			t.Fatal(err)
		}
		owners[g] = owner
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	parent := e.start("fe-local", nil)
	if got := e.wait(parent, 60*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	var parentGroup int32
	if err := e.pool.QueryRow(ctx, `SELECT group_id FROM workflow_instance WHERE workflow_id = 'fe-local'`).Scan(&parentGroup); err != nil {
		t.Fatal(err)
	}
	home := owners[parentGroup]
	fid := instance.ForeachWorkflowID("fe-local", parent.InstanceID, "loop")
	messages := map[int64]int{}
	rows, err = e.pool.Query(ctx, `SELECT instance_id FROM test_start_message WHERE workflow_id = $1`, fid)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var it int64
		if err := rows.Scan(&it); err != nil {
			t.Fatal(err)
		}
		messages[it]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	its := e.iterations(parent, "loop")
	if len(its) != n {
		t.Fatalf("%d iteration runs, want %d", len(its), n)
	}
	local, queued := 0, 0
	for _, it := range its {
		if it.Status != instance.WorkflowSucceeded || it.RunID != 1 {
			t.Errorf("iteration %d run %d ended %s", it.Iteration, it.RunID, it.Status)
		}
		var timeline string
		if err := e.pool.QueryRow(ctx, `SELECT timeline::text FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2`,
			fid, it.Iteration).Scan(&timeline); err != nil {
			t.Fatal(err)
		}
		ranOn := owners[it.Group]
		if c := strings.Count(timeline, "picked up by engine node "); c != 1 || !strings.Contains(timeline, "picked up by engine node "+ranOn) {
			t.Errorf("iteration %d in group %d (held by %s): timeline %s", it.Iteration, it.Group, ranOn, timeline)
		}
		switch {
		case ranOn == home && messages[it.Iteration] == 0:
			local++
		case ranOn != home && messages[it.Iteration] == 1:
			queued++
		default:
			t.Errorf("iteration %d in group %d held by %s (the foreach runs on %s): %d start messages",
				it.Iteration, it.Group, ranOn, home, messages[it.Iteration])
		}
	}
	if local == 0 || queued == 0 {
		t.Errorf("%d iterations started in memory and %d through the queue; want both kinds", local, queued)
	}
	var steps int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM step_instance WHERE workflow_id = $1 AND attempt_id = 1 AND status = 'SUCCEEDED'`,
		fid).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if steps != n {
		t.Errorf("%d iteration steps succeeded once, want %d", steps, n)
	}
}
