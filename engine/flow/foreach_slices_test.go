package flow_test

import (
	"fmt"
	"testing"
	"time"

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
	pool, stmts := dbtest.CountingPoolOf(t, 8) // 4 creating transactions at once
	defs := definition.NewStore(pool)
	ft := &flowtest.Env{T: t, Pool: pool, Defs: defs, Runs: execution.New(pool, defs, flowtest.GroupCount)}
	e := &env{Env: ft, t: t, pool: pool, defs: defs, runs: ft.Runs}
	e.push(foreachDef("fe-slices", fmt.Sprintf(`{"a":{"type":"LONG_ARRAY","expression":"Util.intsBetween(0, %d, 1)"}}`, total),
		fmt.Sprintf(`"concurrency":%d`, conc), `{"step":{"id":"body","type":"Gauge"}}`))
	g := &gauge{hold: 200 * time.Millisecond}
	rts := testRuntimes()
	rts["Gauge"] = g
	e.engine(flow.Config{Runtimes: rts})
	stmts.Reset()
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
