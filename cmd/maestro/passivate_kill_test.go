package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// kill -9 of an engine whose runs were passivated (MAESTRO_PASSIVATE_AFTER,
// engine/flow/passivate.go) while they slept: the restarted engine takes the
// groups over, enumerates the passivated runs instead of rebuilding them,
// and every run finishes with exactly one attempt per step, through a
// second sleep that passivates it again.
func TestKilledEngineFinishesPassivatedRuns(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	def := chainDefinition("napping", `{"owner":"tester","run_strategy":"PARALLEL"}`, 4, func(i int) string {
		if i < 2 {
			return `"type":"Sleep","sleep_seconds":4`
		}
		return `"type":"NoOp"`
	})
	f := pushAndStart(t, dsn, 10, def)
	p1 := engineProcess(t, dsn, "node-1", "4", "MAESTRO_PASSIVATE_AFTER=200ms")
	waitPassivated(t, f, len(f.insts), 30*time.Second)
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	engineProcess(t, dsn, "node-1-restarted", "4", "MAESTRO_PASSIVATE_AFTER=200ms")
	f.checkFinished(t)
}

// waitPassivated waits until n runs of the fixture's workflow are
// passivated (their wake time stored).
func waitPassivated(t *testing.T, f *killFixture, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var got int
		if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance
            WHERE workflow_id = $1 AND passive_wake_at IS NOT NULL`, f.workflowID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs passivated", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
