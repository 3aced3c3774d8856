package main

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
)

// Guarantee 3 on the start path (issue 18): a run's CREATED -> IN_PROGRESS
// write goes through the writer with its first step's write, and its start
// message is deleted only once that write is durable. kill -9 the only
// engine while runs are being started, go on starting runs while it is
// down, start it again: every run ends SUCCEEDED with one attempt per
// step, none is left CREATED.
func TestKilledEngineLosesNoStart(t *testing.T) {
	t.Parallel()
	const runs, steps = 300, 3
	dsn := dbtest.URL(t)
	ctx := context.Background()
	pool := openPool(t, dsn)
	defs := definition.NewStore(pool)
	pushDefinitions(t, defs, chainDefinition("starts", `{"owner":"tester","run_strategy":"PARALLEL"}`, steps,
		func(int) string { return `"type":"NoOp"` }))
	svc := execution.New(pool, defs, killGroups)
	p1 := engineProcess(t, dsn, "node-1", "4")
	count := func(sql string) int {
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := svc.Start(ctx, execution.StartRequest{WorkflowID: "starts", Version: "latest"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for count(`SELECT count(*) FROM workflow_instance WHERE status = 'SUCCEEDED'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine ran nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var started atomic.Int32
	started.Store(1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for started.Add(1) <= runs {
				if _, err := svc.Start(ctx, execution.StartRequest{WorkflowID: "starts", Version: "latest"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for started.Load() < runs/3 {
		time.Sleep(time.Millisecond)
	}
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	wg.Wait()
	inFlight := count(`SELECT count(*) FROM workflow_instance WHERE status IN ('CREATED', 'IN_PROGRESS')`)
	t.Logf("after the kill: %d of %d runs picked up, %d not ended", count(`SELECT count(*) FROM workflow_instance WHERE status <> 'CREATED'`), runs, inFlight)
	if inFlight == 0 {
		t.Fatal("every run had ended before the kill; the test proves nothing")
	}
	engineProcess(t, dsn, "node-1-restarted", "4")

	deadline = time.Now().Add(90 * time.Second)
	for count(`SELECT count(*) FROM workflow_instance WHERE status = 'SUCCEEDED'`) < runs {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs succeeded; %d CREATED", count(`SELECT count(*) FROM workflow_instance WHERE status = 'SUCCEEDED'`),
				runs, count(`SELECT count(*) FROM workflow_instance WHERE status = 'CREATED'`))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(`SELECT count(*) FROM workflow_instance`); n != runs {
		t.Errorf("%d runs, want %d", n, runs)
	}
	if n := count(`SELECT count(*) FROM step_instance WHERE attempt_id = 1 AND status = 'SUCCEEDED'`); n != runs*steps {
		t.Errorf("%d single successful attempts, want %d", n, runs*steps)
	}
	if n := count(`SELECT count(*) FROM step_instance WHERE attempt_id <> 1`); n != 0 {
		t.Errorf("%d steps ran again", n)
	}
}
