package flow_test

import (
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
)

// A start message's claim reads the run it starts in the same round trip
// (queue.ClaimWith, flowstore.ClaimReadCreated): the engine side of a
// start is the claim with its read, then the writer's commit; no read of
// the run of its own (issue 28: start -> first step at 1 ms each way),
// and no delete of the message of its own: the start's write deletes it.
// Once the engine has read the version's definition, a lone start's
// notification carries its run (run.StartNote) and the engine starts it
// from there: no claim and no read at all, only the writer's commit.
func TestStartMessageClaimReadsTheRun(t *testing.T) {
	t.Parallel()
	pool, stmts := dbtest.CountingPool(t)
	defs := definition.NewStore(pool)
	ft := &flowtest.Env{T: t, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, flowtest.GroupCount)}
	e := &env{Env: ft, t: t, pool: pool, defs: defs, runs: ft.Runs}
	// No sweep within the test: one whose grace (an interval) ran out
	// before the notification's claim, on a loaded machine, would claim
	// the message itself, without the read.
	cfg := flow.Config{}
	cfg.Queue.SweepInterval = time.Minute
	e.engine(cfg)
	// The engine's listener connects on its own goroutine, and once it
	// listens it sweeps for what was sent before: a start notified before
	// then is claimed by that sweep, without the read. A run of another
	// workflow, started and ended first, is past that sweep either way.
	e.push(chainJSON("warm", 1))
	if inst := e.wait(e.start("warm", nil), time.Minute); inst.Status != "SUCCEEDED" {
		t.Fatalf("the warm-up run ended %s", inst.Status)
	}
	e.push(chainJSON("one", 1))
	for i := range 3 {
		stmts.Reset()
		inst := e.wait(e.start("one", nil), time.Minute)
		if inst.Status != "SUCCEEDED" {
			t.Fatalf("run ended %s", inst.Status)
		}
		claims, _ := stmts.Count("UPDATE maestro_queue SET owned_by = $3")
		withClaim, _ := stmts.Count("FROM maestro_queue q WHERE q.queue_id = $1 AND q.message_id = $2 AND q.owned_by = $3")
		alone, _ := stmts.Count("WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND status = 'CREATED' AND NOT queued")
		want := int64(1) // the first start: the engine has not read the definition yet
		if i > 0 {
			want = 0 // started from its notification
		}
		if claims != want || withClaim != want || alone != 0 {
			t.Errorf("start %d: %d claims, %d reads with a claim, %d reads of its own; want %d, %d, 0: %v",
				i, claims, withClaim, alone, want, want, stmts.BySQL())
		}
		// The message goes with the start's write (queue.AckSQL in the
		// writer's batch), not in a statement of its own after it.
		acked, _ := stmts.Count("DELETE FROM maestro_queue q")
		deleted, _ := stmts.Count("DELETE FROM maestro_queue WHERE queue_id = $1 AND message_id = $2")
		if acked != 1 || deleted != 0 {
			t.Errorf("start message: deleted with the start %d times, on its own %d; want 1, 0: %v", acked, deleted, stmts.BySQL())
		}
		var left int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM maestro_queue`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%d messages left (%v), want 0", left, err)
		}
	}
}
