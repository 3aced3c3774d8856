package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// setBreakpoint sets a breakpoint on a step of a pushed workflow, narrowed
// to one instance of it when instanceID is not zero.
func (e *env) setBreakpoint(workflowID, stepID string, instanceID int64) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO step_breakpoint (workflow_id, step_id, instance_id)
        VALUES ($1, $2, NULLIF($3, 0))`, workflowID, stepID, instanceID); err != nil {
		e.t.Fatal(err)
	}
}

// resumePaused does what the API's resume and delete do for the paused
// attempts of a step that the where clause selects: mark them resumed and
// wake their engine node.
func (e *env) resumePaused(stepID, where string, args ...any) int {
	e.t.Helper()
	ctx := context.Background()
	n := 0
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE step_paused SET resumed = true, resumed_at = now()
            WHERE NOT resumed AND `+where+` RETURNING workflow_id, instance_id, run_id, group_id`, args...)
		if err != nil {
			return err
		}
		type paused struct {
			ref   run.Ref
			group int32
		}
		all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (paused, error) {
			var p paused
			return p, r.Scan(&p.ref.WorkflowID, &p.ref.InstanceID, &p.ref.RunID, &p.group)
		})
		if err != nil {
			return err
		}
		for _, p := range all {
			if _, err := queue.Enqueue(ctx, tx, queue.StepUpdate, p.group,
				run.StepUpdateMessage{Ref: p.ref, Group: p.group, StepID: stepID}); err != nil {
				return err
			}
		}
		n = len(all)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitIterationsPaused polls until n iteration runs of the parent have
// their step paused and returns them.
func (e *env) waitIterationsPaused(parent *execution.Instance, stepID string, n int) []*execution.Instance {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var paused []*execution.Instance
		for _, c := range e.children(parent) {
			if inst := e.asInstance(c); e.stepStatuses(inst)[stepID] == instance.StepPaused {
				paused = append(paused, inst)
			}
		}
		if len(paused) == n {
			return paused
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d iterations of %s/%d paused at %s, want %d", len(paused), parent.WorkflowID, parent.InstanceID, stepID, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) status(inst *execution.Instance) instance.WorkflowStatus {
	e.t.Helper()
	got, err := e.runs.Instance(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		e.t.Fatal(err)
	}
	return got.Status
}

// A breakpoint on a step inside a foreach pauses the step in every
// iteration; resuming one attempt resumes only its iteration, and deleting
// the breakpoint resumes the rest.
func TestBreakpointPausesEveryForeachIteration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(foreachDef("bpfe", `{"i":{"type":"LONG_ARRAY","value":[1,2,3]}}`, "", noopBody))
	e.setBreakpoint("bpfe", "body", 0)
	parent := e.start("bpfe", nil)
	pausedAt := time.Now()
	its := e.waitIterationsPaused(parent, "body", 3)
	if st := e.status(parent); st != instance.WorkflowInProgress {
		t.Fatalf("parent is %s while its iterations are paused", st)
	}

	one := its[1]
	if n := e.resumePaused("body", "workflow_id = $1 AND instance_id = $2 AND step_id = 'body'",
		one.WorkflowID, one.InstanceID); n != 1 {
		t.Fatalf("resumed %d attempts", n)
	}
	if got := e.wait(one, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("resumed iteration ended %s", got.Status)
	}
	// Past the paused attempts' recheck, the breakpoint still holds them.
	time.Sleep(time.Until(pausedAt.Add(6 * time.Second)))
	for _, it := range []*execution.Instance{its[0], its[2]} {
		if st := e.stepStatuses(it)["body"]; st != instance.StepPaused {
			t.Fatalf("iteration %d: body is %s", it.InstanceID, st)
		}
	}
	if st := e.status(parent); st != instance.WorkflowInProgress {
		t.Fatalf("parent is %s", st)
	}

	if _, err := e.pool.Exec(context.Background(), `DELETE FROM step_breakpoint WHERE workflow_id = 'bpfe'`); err != nil {
		t.Fatal(err)
	}
	if n := e.resumePaused("body", "workflow_id = $1 AND step_id = 'body'", one.WorkflowID); n != 2 {
		t.Fatalf("resumed %d attempts, want 2", n)
	}
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent ended %s", got.Status)
	}
}

// A breakpoint on a step inside a while pauses it in each iteration, and
// an iteration resumed by the breakpoint's deletion alone (no wake-up, the
// attempt's own recheck) lets the loop finish.
func TestBreakpointPausesWhileIterations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(whileDef("bpwh", "loop_index < 3", "", "NoOp", ""))
	e.setBreakpoint("bpwh", "body", 0)
	parent := e.start("bpwh", nil)
	first := e.waitIterationsPaused(parent, "body", 1)[0]
	if first.WorkflowID != "bpwh:loop" {
		t.Fatalf("paused iteration %s", first.WorkflowID)
	}
	if n := e.resumePaused("body", "workflow_id = $1 AND instance_id = $2", first.WorkflowID, first.InstanceID); n != 1 {
		t.Fatalf("resumed %d attempts", n)
	}
	if got := e.wait(first, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("resumed iteration ended %s", got.Status)
	}
	// The next iteration pauses too.
	deadline := time.Now().Add(20 * time.Second)
	for len(e.children(parent)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no second iteration")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.waitStep(e.asInstance(e.children(parent)[1]), "body", instance.StepPaused)
	if st := e.status(parent); st != instance.WorkflowInProgress {
		t.Fatalf("parent is %s", st)
	}

	if _, err := e.pool.Exec(context.Background(), `DELETE FROM step_breakpoint WHERE workflow_id = 'bpwh'`); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent ended %s", got.Status)
	}
	if n := len(e.children(parent)); n != 3 {
		t.Fatalf("%d iterations, want 3", n)
	}
}

// A breakpoint narrowed to an instance of the workflow pauses the step in
// the iterations of that instance only.
func TestBreakpointOnInstanceNarrowsIterations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(foreachDef("bpnar", `{"i":{"type":"LONG_ARRAY","value":[1,2]}}`, "", noopBody))
	e.setBreakpoint("bpnar", "body", 2)
	first := e.start("bpnar", nil)
	if got := e.wait(first, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("instance 1 ended %s", got.Status)
	}
	second := e.start("bpnar", nil)
	if second.InstanceID != 2 {
		t.Fatalf("second run is instance %d", second.InstanceID)
	}
	e.waitIterationsPaused(second, "body", 2)
}

// Iterations share their root workflow's breakpoint cache entry: once a
// workflow is known to have no breakpoint, none of its iterations' steps
// queries for one.
func TestIterationsUseTheRootBreakpointCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{})
	e.push(foreachDef("bpnone", `{"i":{"type":"LONG_ARRAY","value":[1,2,3]}}`, "", noopBody))
	parent := e.start("bpnone", nil)
	if got := e.wait(parent, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent ended %s", got.Status)
	}
	if has, known := eng.BreakpointCache("bpnone"); !known || has {
		t.Fatalf("cache of bpnone: has %v known %v", has, known)
	}
	iteration := instance.ForeachWorkflowID("bpnone", parent.InstanceID, "loop")
	if _, known := eng.BreakpointCache(iteration); known {
		t.Fatalf("the iterations have a cache entry of their own")
	}
}
