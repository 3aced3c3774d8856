package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A foreach survives kill -9 of the only engine in the middle of its
// iterations: the restarted engine carries on from the progress record,
// every iteration runs exactly once, and the step succeeds. The one engine
// holds every group, so every iteration was created IN_PROGRESS and started
// in memory (no start message): those the kill cut off are found by the
// restarted engine's adoption of their groups.
func TestKilledEngineFinishesForeachExactlyOnce(t *testing.T) {
	t.Parallel()
	killForeach(t, "fe-kill", 200, 20, 40)
}

// The same with a concurrency of 400: the engine creates iterations in
// several transactions at once and records its progress after them, so the
// kill may land between the iterations' commits and the record. The
// restarted engine skips the iterations past the record that exist.
func TestKilledEngineFinishesWideForeachExactlyOnce(t *testing.T) {
	t.Parallel()
	killForeach(t, "fe-kill-wide", 2000, 400, 500)
}

// killForeach runs a foreach of iterations 50 ms Sleep iterations at
// concurrency conc on one engine, kills it (kill -9) once killAfter
// iterations succeeded, restarts it, and checks that every iteration ran
// exactly once and the step succeeded with one attempt.
func killForeach(t *testing.T, id string, iterations, conc, killAfter int) {
	t.Helper()
	dsn := dbtest.URL(t)
	ctx := context.Background()
	pool := openPool(t, dsn)
	defs := definition.NewStore(pool)
	d, err := workflow.DecodeJSON([]byte(fmt.Sprintf(`{"properties":{"owner":"tester"},"workflow":{"id":%q,"steps":[
	  {"foreach":{"id":"loop","concurrency":%d,
	    "params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","expression":"Util.intsBetween(0, %d, 1)"}}}},
	    "steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":0.05}}]}}]}}`, id, conc, iterations)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(ctx, d, "tester"); err != nil {
		t.Fatal(err)
	}
	runs := execution.New(pool, defs, killGroups)
	res, err := runs.Start(ctx, execution.StartRequest{WorkflowID: id, Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	fid := instance.ForeachWorkflowID(id, res.Instance.InstanceID, "loop")
	count := func(sql string) int {
		var n int
		if err := pool.QueryRow(ctx, sql, fid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t0 := time.Now()
	p1 := engineProcess(t, dsn, "node-1", "4")
	deadline := time.Now().Add(30 * time.Second)
	for count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = $1 AND status = 'SUCCEEDED'`) < killAfter {
		if time.Now().After(deadline) {
			t.Fatal("no iteration finished before the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	t.Logf("killed after %s", time.Since(t0))
	t0 = time.Now()
	if done := count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = $1 AND status = 'SUCCEEDED'`); done >= iterations {
		t.Fatalf("all %d iterations were done before the kill; the test proves nothing", done)
	}
	engineProcess(t, dsn, "node-1-restarted", "4")

	deadline = time.Now().Add(90 * time.Second)
	for {
		got, err := runs.Instance(ctx, id, res.Instance.InstanceID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.IsTerminal() {
			if got.Status != instance.WorkflowSucceeded {
				t.Fatalf("parent ended %s: %s", got.Status, got.Timeline)
			}
			t.Logf("finished %s after the restart", time.Since(t0))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("parent still %s", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = $1`); n != iterations {
		t.Errorf("%d iteration runs, want exactly %d", n, iterations)
	}
	if n := count(`SELECT count(DISTINCT instance_id) FROM workflow_instance WHERE workflow_id = $1 AND status = 'SUCCEEDED'`); n != iterations {
		t.Errorf("%d iterations succeeded, want %d", n, iterations)
	}
	if n := count(`SELECT count(*) FROM step_instance WHERE workflow_id = $1 AND (attempt_id <> 1 OR status <> 'SUCCEEDED')`); n != 0 {
		t.Errorf("%d iteration steps ran more than once or did not succeed", n)
	}
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM step_instance WHERE workflow_id = $1 AND step_id = 'loop'`, id).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Errorf("%d attempts of the foreach step, want 1", attempts)
	}
}
