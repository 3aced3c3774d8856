package flow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
)

// TestForeachLaunchesSlicesAtOnce: with more room than one batch (100
// iterations), a foreach creates its iterations in several transactions at
// once (more insert statements than progress records), records its
// progress once they have committed, never runs more than its
// concurrency, and runs every iteration exactly once with its own loop
// values.
func TestForeachLaunchesSlicesAtOnce(t *testing.T) {
	t.Parallel()
	const total, conc = 700, 300
	e, stmts, g := gaugedForeach(t, "fe-slices", total, conc, 200*time.Millisecond)
	parent := e.start("fe-slices", nil)
	if got := e.wait(parent, 3*time.Minute); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	its := e.iterations(parent, "loop")
	if len(its) != total {
		t.Fatalf("%d iteration runs, want %d", len(its), total)
	}
	for i, it := range its {
		if it.Iteration != int64(i+1) || it.RunID != 1 || it.Status != instance.WorkflowSucceeded {
			t.Fatalf("iteration row %d: %+v", i, it)
		}
		if a, idx := runParam(t, it, "a"), runParam(t, it, "loop_index"); a != fmt.Sprint(i) || idx != fmt.Sprint(i) {
			t.Fatalf("iteration %d: a=%s loop_index=%s", it.Iteration, a, idx)
		}
	}
	if most := g.most.Load(); most > conc {
		t.Errorf("%d iterations ran at once, more than the concurrency %d", most, conc)
	}
	inserts, _ := stmts.Count("WITH owned AS")
	records, _ := stmts.Count("UPDATE step_instance SET runtime_state = jsonb_set(runtime_state, '{data}'")
	// One insert is the parent's own start.
	if inserts-1 <= records {
		t.Errorf("%d insert statements for %d progress records: no batches were created at once", inserts, records)
	}
	t.Logf("%d insert statements, %d progress records, at most %d at once", inserts, records, g.most.Load())
}

// TestForeachRecordsOnlyCommittedProgress: a foreach creating several
// slices at once records its progress without a transaction of its own
// (the next call's first slice records where it starts from), yet the
// durable record never runs ahead of the iterations committed: read in
// one snapshot while the loop runs, every iteration before the recorded
// next exists, the record only moves forward, and it ends at the total.
func TestForeachRecordsOnlyCommittedProgress(t *testing.T) {
	t.Parallel()
	const total, conc = 1500, 400
	e, stmts, _ := gaugedForeach(t, "fe-record", total, conc, 30*time.Millisecond)
	pool := e.pool
	parent := e.start("fe-record", nil)
	feID := instance.ForeachWorkflowID(parent.WorkflowID, parent.InstanceID, "loop")

	stop := make(chan struct{})
	type seen struct{ next, present int64 }
	var watched []seen
	var watchErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var s seen
			err := pool.QueryRow(context.Background(), `
SELECT r.next, (SELECT count(*) FROM workflow_instance WHERE workflow_id = $4 AND run_id = 1 AND instance_id <= r.next)
FROM (SELECT coalesce((runtime_state->'data'->>'foreach_next')::bigint, 0) AS next FROM step_instance
      WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = 'loop'
      ORDER BY attempt_id DESC LIMIT 1) r`, parent.WorkflowID, parent.InstanceID, parent.RunID, feID).Scan(&s.next, &s.present)
			if errors.Is(err, pgx.ErrNoRows) {
				continue // the step is not written yet
			}
			if err != nil {
				watchErr = err
				return
			}
			watched = append(watched, s)
		}
	}()
	got := e.wait(parent, 3*time.Minute)
	close(stop)
	<-done
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent %s: %s", got.Status, got.Timeline)
	}
	if watchErr != nil {
		t.Fatal(watchErr)
	}
	var last int64
	distinct := 0
	for _, s := range watched {
		if s.present != s.next {
			t.Fatalf("progress recorded at %d while %d iterations before it exist", s.next, s.present)
		}
		if s.next < last {
			t.Fatalf("progress record moved back from %d to %d", last, s.next)
		}
		if s.next > last {
			distinct++
		}
		last = s.next
	}
	if last != total {
		t.Errorf("last progress record seen %d, want %d", last, total)
	}
	if distinct < 3 {
		t.Errorf("saw the progress record at only %d values: the loop was not watched while it ran", distinct)
	}
	if n := len(e.iterations(parent, "loop")); n != total {
		t.Fatalf("%d iteration runs, want %d", n, total)
	}
	inserts, _ := stmts.Count("WITH owned AS")
	records, _ := stmts.Count("UPDATE step_instance SET runtime_state = jsonb_set(runtime_state, '{data}'")
	t.Logf("watched %d times (%d values), %d insert statements, %d progress records", len(watched), distinct, inserts, records)
}

// gaugedForeach pushes workflow id, a foreach of total iterations at
// concurrency conc whose body holds each call for hold (a gauge of how
// many run at once), on an engine whose pool counts its statements (8
// connections: 4 creating transactions at once); the counts start empty.
func gaugedForeach(t *testing.T, id string, total, conc int, hold time.Duration) (*env, *dbtest.Statements, *gauge) {
	t.Helper()
	pool, stmts := dbtest.CountingPoolOf(t, 8)
	defs := definition.NewStore(pool)
	ft := &flowtest.Env{T: t, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, flowtest.GroupCount)}
	e := &env{Env: ft, t: t, pool: pool, defs: defs, runs: ft.Runs}
	e.push(foreachDef(id, fmt.Sprintf(`{"a":{"type":"LONG_ARRAY","expression":"Util.intsBetween(0, %d, 1)"}}`, total),
		fmt.Sprintf(`"concurrency":%d`, conc), `{"step":{"id":"body","type":"Gauge"}}`))
	g := &gauge{hold: hold}
	rts := testRuntimes()
	rts["Gauge"] = g
	e.engine(flow.Config{Runtimes: rts})
	stmts.Reset()
	return e, stmts, g
}
