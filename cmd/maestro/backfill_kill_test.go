package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	backfilldriver "github.com/maestro-aws/maestro/engine/trigger/backfill"
)

// A kill -9 of the engine while a backfill pass holds runs it created and
// their partition links uncommitted, then two engines driving it at once:
// the backfill ends with exactly one run per value, each linked to its
// partition; nothing lost, nothing doubled.
func TestKilledEngineLosesAndDoublesNoBackfillRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	pool := openPool(t, dsn)
	defs := definition.NewStore(pool)
	pushDefinitions(t, defs, `{"properties":{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":20}},
		"workflow":{"id":"daily","steps":[{"step":{"id":"s","type":"Sleep","sleep_seconds":1}}]}}`)
	store := backfill.NewStore(pool, defs, execution.New(pool, defs, killGroups))
	const values = 40
	b, _, err := store.Create(ctx, backfill.CreateRequest{WorkflowID: "daily", Param: "TARGET_RUN_DATE",
		Spec: backfill.Spec{From: "20240101", To: "20240209"}, Concurrency: 5})
	if err != nil {
		t.Fatal(err)
	}
	if b.Partitions != values {
		t.Fatalf("%d partitions", b.Partitions)
	}
	env := []string{backfilldriver.EnvInterval + "=100ms", backfilldriver.EnvTestPause + "=400ms"}
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	runs := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'daily'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	p1 := engineProcess(t, dsn, "bf-a", "4", env...)
	waitFor("the first runs to succeed", 90*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'daily' AND status = 'SUCCEEDED'`).Scan(&n)
		return n >= 5
	})
	// Kill inside a pass that has created runs and linked them, not
	// committed.
	waitFor("a backfill pass holding its runs uncommitted", 90*time.Second, func() bool {
		var open int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'maestro-engine'
                AND state = 'idle in transaction' AND query LIKE '%UPDATE backfill_partition p SET state = t.state%'`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open > 0
	})
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	atKill := runs()
	t.Logf("killed with %d runs created", atKill)
	if atKill >= values {
		t.Fatalf("every run was created before the kill (%d); the kill proves nothing", atKill)
	}

	engineProcess(t, dsn, "bf-b", "4", env...)
	engineProcess(t, dsn, "bf-c", "4", env...)
	waitFor("the backfill to end", 180*time.Second, func() bool {
		got, err := store.Backfill(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status != backfill.Running
	})
	d, err := store.Get(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != backfill.Succeeded || d.Counts["SUCCEEDED"] != values {
		t.Fatalf("backfill %s with %v", d.Status, d.Counts)
	}
	var n, distinct, linked int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT run_params->'TARGET_RUN_DATE'->>'value'),
            count(*) FILTER (WHERE EXISTS (SELECT 1 FROM backfill_partition p
                WHERE p.backfill_id = $1 AND p.instance_id = w.instance_id
                  AND p.value = w.run_params->'TARGET_RUN_DATE'->>'value'))
        FROM workflow_instance w WHERE workflow_id = 'daily'`, b.ID).Scan(&n, &distinct, &linked); err != nil {
		t.Fatal(err)
	}
	if n != values || distinct != values || linked != values {
		t.Fatalf("%d runs of %d distinct values, %d linked to their partition; want %d each", n, distinct, linked, values)
	}
}
