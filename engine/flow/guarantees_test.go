package flow_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/event/eventtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// chainDef runs in PARALLEL so that many runs are in flight at once.
const chainDef = `{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}},"workflow":{"id":"%s","steps":[
	{"step":{"id":"s1","type":"Exclusive","transition":{"successors":{"s2":"true"}}}},
	{"step":{"id":"s2","type":"Exclusive","transition":{"successors":{"s3":"true"}}}},
	{"step":{"id":"s3","type":"Exclusive"}}]}}`

func exclusiveRuntimes(x *exclusive) stepruntime.Registry {
	r := testRuntimes()
	r["Exclusive"] = x
	return r
}

// checkExactlyOnce asserts every run succeeded with one attempt per step.
func checkExactlyOnce(t *testing.T, e *env, insts []*execution.Instance) {
	t.Helper()
	defer checkEvents(t, e, insts[0].WorkflowID)
	for _, inst := range insts {
		got := e.wait(inst, 30*time.Second)
		if got.Status != instance.WorkflowSucceeded {
			t.Errorf("run %d: %s %s", inst.InstanceID, got.Status, got.Timeline)
		}
		for _, step := range []string{"s1", "s2", "s3"} {
			if a := e.attempts(inst, step); len(a) != 1 || a[0] != instance.StepSucceeded {
				t.Errorf("run %d step %s attempts %v, want one SUCCEEDED", inst.InstanceID, step, a)
			}
		}
	}
}

// Guarantees 1, 3 and 4: a node dies mid-run; another takes its groups over
// once the leases expire, rebuilds the runs from the database and finishes
// every one, and no attempt ever runs on two actors at once.
func TestTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := &exclusive{hold: 150 * time.Millisecond}
	e.push(fmt.Sprintf(chainDef, "takeover"))
	a := e.engine(flow.Config{NodeID: "node-a", Runtimes: exclusiveRuntimes(x), Lease: time.Second})
	b := e.engine(flow.Config{NodeID: "node-b", Runtimes: exclusiveRuntimes(x), Lease: time.Second})
	_ = b
	var insts []*execution.Instance
	for range 12 {
		insts = append(insts, e.start("takeover", nil))
	}
	time.Sleep(250 * time.Millisecond)
	a.Crash()
	checkExactlyOnce(t, e, insts)
	if n := x.maxSeen.Load(); n != 1 {
		t.Errorf("an attempt ran on %d actors at once", n)
	}
}

// Guarantee 1 with a stale node: its groups are taken over while it keeps
// running (as after a long pause). Its writes are refused by the generation
// fence and it stops touching those flows; the runs still finish exactly
// once.
func TestStaleNodeIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := &exclusive{hold: 100 * time.Millisecond}
	e.push(fmt.Sprintf(chainDef, "fenced"))
	e.engine(flow.Config{NodeID: "node-a", Runtimes: exclusiveRuntimes(x), Lease: time.Second})
	var insts []*execution.Instance
	for range 8 {
		insts = append(insts, e.start("fenced", nil))
	}
	time.Sleep(150 * time.Millisecond)
	// Another node claims every group and adopts its flows, exactly as a
	// takeover does, while node-a still believes it owns them.
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE flow_group SET owner = 'thief', generation = generation + 1, expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE workflow_instance w SET generation = g.generation FROM flow_group g
        WHERE g.group_id = w.group_id AND w.status IN ('IN_PROGRESS', 'PAUSED')`); err != nil {
		t.Fatal(err)
	}
	// node-a's heartbeat notices the loss, re-claims the expired groups with
	// a newer generation and finishes the runs from the database state.
	checkExactlyOnce(t, e, insts)
	if n := x.maxSeen.Load(); n != 1 {
		t.Errorf("an attempt ran on %d actors at once", n)
	}
}

// Guarantee 2, enforced in the write path: whatever writes, a terminal step
// or run keeps its status, and a write based on an old seq is refused.
func TestStateNeverRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"workflow":{"id":"done","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`)
	inst := e.wait(e.start("done", nil), 10*time.Second)
	ctx := context.Background()
	for _, stmt := range []string{
		`UPDATE step_instance SET status = 'RUNNING', seq = seq + 1 WHERE workflow_id = 'done'`,
		`UPDATE step_instance SET status = 'SUCCEEDED', seq = seq - 1 WHERE workflow_id = 'done'`,
		`UPDATE workflow_instance SET status = 'IN_PROGRESS', seq = seq + 1 WHERE workflow_id = 'done'`,
	} {
		if _, err := e.pool.Exec(ctx, stmt); err == nil {
			t.Errorf("rollback accepted: %s", stmt)
		}
	}
	if got := e.stepStatuses(inst)["s"]; got != instance.StepSucceeded {
		t.Errorf("step is %s after rejected rollbacks", got)
	}
	if err := instance.CheckStepTransition(instance.StepSucceeded, instance.StepRunning); err == nil {
		t.Error("state machine allows SUCCEEDED -> RUNNING")
	}
}

// Guarantee 5: stops racing with execution leave every run consistent.
func TestStopRacingExecution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(`{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"race","steps":[
		{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
		{"step":{"id":"b","type":"Sleep","sleep_seconds":0.05,"transition":{"successors":{"c":"true"}}}},
		{"step":{"id":"c","type":"NoOp"}}]}}`)
	const runs = 30
	insts := make([]*execution.Instance, runs)
	var wg sync.WaitGroup
	for i := range runs {
		insts[i] = e.start("race", nil)
		wg.Add(1)
		go func(inst *execution.Instance) {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(120)) * time.Millisecond)
			_, _ = e.runs.Act(context.Background(), "race", inst.InstanceID, 0, run.ActionStop)
		}(insts[i])
	}
	wg.Wait()
	stopped := 0
	for _, inst := range insts {
		got := e.wait(inst, 20*time.Second)
		steps := e.stepStatuses(inst)
		for id, st := range steps {
			if !st.IsTerminal() {
				t.Errorf("run %d is %s but step %s is %s", inst.InstanceID, got.Status, id, st)
			}
		}
		switch got.Status {
		case instance.WorkflowSucceeded:
			if len(steps) != 3 || steps["c"] != instance.StepSucceeded {
				t.Errorf("run %d SUCCEEDED with steps %v", inst.InstanceID, steps)
			}
		case instance.WorkflowStopped:
			stopped++
		default:
			t.Errorf("run %d ended %s", inst.InstanceID, got.Status)
		}
	}
	if stopped == 0 {
		t.Error("no run was stopped; the race was not exercised")
	}
	// Every action is processed (some are retried after a short delay).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM maestro_queue`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queue messages left unprocessed", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkEvents asserts that the outbox holds exactly one event per status
// change the database holds for the workflows' runs and steps, stale
// owners' refused writes included (docs/events.md).
func checkEvents(t *testing.T, e *env, workflowIDs ...string) {
	t.Helper()
	got, err := eventtest.FromOutbox(context.Background(), e.pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.Verify(context.Background(), e.pool, workflowIDs...); err != nil {
		t.Error(err)
	}
}
