package run_test

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// A round bigger than a chunk goes in as several INSERTs of one
// transaction, built one ahead of the statement in flight, and admits
// its runs as one INSERT would: the runs of a workflow that an earlier
// chunk created count as live or queued for the later ones, a blocking
// failed run and a paused workflow queue every run, and each admitted
// run gets one start message and the next instance id.
func TestCreateInChunksAdmitsAsOneStatement(t *testing.T) {
	defer run.SetRoundChunk(2)()
	pool := dbtest.Pool(t)
	push(t, pool, "par", `{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":3}}`)
	push(t, pool, "seq", "")
	push(t, pool, "strict", `{"run_strategy":"STRICT_SEQUENTIAL"}`)
	push(t, pool, "paused", `{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":0}}`)
	create(t, pool, []run.New{start("par", ""), start("strict", "")}, run.Options{})
	if _, err := pool.Exec(context.Background(), `UPDATE workflow_instance SET status = 'FAILED', seq = seq + 1, end_time = now()
        WHERE workflow_id = 'strict'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `DELETE FROM maestro_queue`); err != nil {
		t.Fatal(err)
	}
	runs := []run.New{start("par", ""), start("seq", ""), start("par", ""), start("strict", ""), start("par", ""),
		start("seq", ""), start("paused", ""), start("par", ""), start("seq", "")}
	out, inserts := create(t, pool, runs, run.Options{})
	if inserts != 5 {
		t.Errorf("%d INSERT statements, want 5 (9 runs in chunks of 2)", inserts)
	}
	type want struct {
		id       string
		instance int64
		queued   bool
	}
	wants := []want{{"par", 2, false}, {"seq", 1, false}, {"par", 3, false}, {"strict", 2, true}, {"par", 4, true},
		{"seq", 2, true}, {"paused", 1, true}, {"par", 5, true}, {"seq", 3, true}}
	for i, w := range wants {
		c := out[i]
		if c.Ref.WorkflowID != w.id || c.Ref.InstanceID != w.instance || c.Queued != w.queued ||
			c.Status != instance.WorkflowCreated || !c.Inserted || c.UUID == "" {
			t.Errorf("run %d: %+v, want %s/%d queued=%v", i, c, w.id, w.instance, w.queued)
		}
	}
	for id, n := range map[string]int{"par": 2, "seq": 1, "strict": 0, "paused": 0} {
		if got := startMessages(t, pool, id); got != n {
			t.Errorf("%s: %d start messages, want %d", id, got, n)
		}
	}
	var stored int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 11 {
		t.Errorf("%d runs stored, want 11", stored)
	}
}

// A chunk that fails fails the whole call, whichever chunk it is: the
// caller's transaction rolls back every chunk, and the goroutine that
// built the chunks has ended (the race detector and the test's end would
// see it otherwise).
func TestCreateInChunksFailsAsOne(t *testing.T) {
	defer run.SetRoundChunk(2)()
	pool := dbtest.Pool(t)
	push(t, pool, "seq", "")
	first, _ := create(t, pool, []run.New{start("seq", "")}, run.Options{})
	runs := make([]run.New, 7)
	for i := range runs {
		runs[i] = start("seq", "")
		runs[i].Admission = run.Always
	}
	runs[4].UUID = first[0].UUID // a unique violation in the third chunk
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := run.Create(ctx, tx, runs, run.Options{}); err == nil || !run.IsDuplicate(err) {
		t.Fatalf("Create with a stored uuid in its third chunk: %v, want a unique violation", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 1 {
		t.Errorf("%d runs stored after the failed call, want 1", stored)
	}
}
