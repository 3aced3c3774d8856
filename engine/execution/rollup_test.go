package execution

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// failOnce fails (fatally) the first attempt of every step id it runs, per
// workflow, and succeeds afterwards.
type failOnce struct {
	mu    sync.Mutex
	calls map[string]int
}

func (f *failOnce) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (f *failOnce) Execute(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := a.WorkflowID + "/" + a.StepID
	f.calls[key]++
	if f.calls[key] == 1 {
		return stepruntime.Result{State: stepruntime.FatalError, Message: "planned failure"}
	}
	return stepruntime.Result{State: stepruntime.Done}
}

func (f *failOnce) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// rollupEnv is a database with an engine running on it.
type rollupEnv struct {
	t    *testing.T
	pool *pgxpool.Pool
	defs *definition.Store
	svc  *Service
}

func newRollupEnv(t *testing.T) *rollupEnv {
	t.Helper()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	rt := stepruntime.Builtins()
	rt["FailOnce"] = &failOnce{calls: map[string]int{}}
	eng, err := flow.New(pool, flow.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), GroupCount: 4,
		Lease: 2 * time.Second, Runtimes: rt})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	return &rollupEnv{t: t, pool: pool, defs: defs, svc: New(pool, defs, 4)}
}

func (e *rollupEnv) push(def string) {
	e.t.Helper()
	d, err := workflow.DecodeJSON([]byte(def))
	if err != nil {
		e.t.Fatalf("decode definition: %v", err)
	}
	if _, err := e.defs.Create(context.Background(), d, "tester"); err != nil {
		e.t.Fatalf("create definition: %v", err)
	}
}

// wait polls a run until it is terminal and returns its detail.
func (e *rollupEnv) wait(workflowID string, instanceID, runID int64) *Instance {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := e.svc.Detail(context.Background(), workflowID, instanceID, runID)
		if err != nil {
			e.t.Fatal(err)
		}
		if got.Status.IsTerminal() {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s/%d/%d still %s", workflowID, instanceID, runID, got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// steps renders step definitions of one type, all roots.
func steps(typ string, ids ...string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf(`{"step":{"id":%q,"type":%q}}`, id, typ)
	}
	return strings.Join(out, ",")
}

// subworkflowStep renders a subworkflow step running target.
func subworkflowStep(id, target string) string {
	return fmt.Sprintf(`{"subworkflow":{"id":%q,"params":{"subworkflow_id":{"type":"STRING","value":%q}}}}`, id, target)
}

// counts renders a rollup's counts as STATUS=n, for comparisons.
func counts(ov *RollupOverview) map[instance.StepStatus]int64 {
	m := map[instance.StepStatus]int64{}
	for st, c := range ov.Overview {
		m[st] = c.Count
	}
	return m
}

func checkCounts(t *testing.T, ov *RollupOverview, total int64, want map[instance.StepStatus]int64) {
	t.Helper()
	if ov == nil {
		t.Fatal("no rollup")
	}
	got := counts(ov)
	if ov.TotalLeafCount != total || len(got) != len(want) {
		t.Fatalf("rollup total %d %v; want %d %v", ov.TotalLeafCount, got, total, want)
	}
	for st, n := range want {
		if got[st] != n {
			t.Fatalf("rollup %v; want %v", got, want)
		}
	}
}

func TestRollupSubworkflowOfFiveStepsIsSevenSucceeded(t *testing.T) {
	t.Parallel()
	e := newRollupEnv(t)
	e.push(`{"workflow":{"id":"five","steps":[` + steps("NoOp", "c1", "c2", "c3", "c4", "c5") + `]}}`)
	e.push(`{"workflow":{"id":"three","steps":[` + steps("NoOp", "a", "b") + `,` + subworkflowStep("sw", "five") + `]}}`)
	res, err := e.svc.Start(context.Background(), StartRequest{WorkflowID: "three", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	got := e.wait("three", res.Instance.InstanceID, 0)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("parent ended %s", got.Status)
	}
	ov := got.RuntimeOverview.RollupOverview
	checkCounts(t, ov, 7, map[instance.StepStatus]int64{instance.StepSucceeded: 7})
	if refs := ov.Overview[instance.StepSucceeded].Refs; len(refs) != 0 {
		t.Errorf("succeeded steps carry references: %v", refs)
	}
	// The run's own overview still counts its three steps.
	if got.RuntimeOverview.TotalStepCount != 3 {
		t.Errorf("runtime overview counts %d steps, want 3", got.RuntimeOverview.TotalStepCount)
	}
}

func TestRollupFailingLeafInChildHasReference(t *testing.T) {
	t.Parallel()
	e := newRollupEnv(t)
	e.push(`{"workflow":{"id":"kid","steps":[` + steps("NoOp", "ok1", "ok2") + `,` + steps("FailOnce", "bad") + `]}}`)
	e.push(`{"workflow":{"id":"mid","steps":[` + subworkflowStep("inner", "kid") + `]}}`)
	e.push(`{"workflow":{"id":"top","steps":[` + steps("NoOp", "a") + `,` + subworkflowStep("outer", "mid") + `]}}`)
	res, err := e.svc.Start(context.Background(), StartRequest{WorkflowID: "top", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	got := e.wait("top", res.Instance.InstanceID, 0)
	if got.Status != instance.WorkflowFailed {
		t.Fatalf("parent ended %s", got.Status)
	}
	ov := got.RuntimeOverview.RollupOverview
	// Leaves: a, ok1, ok2 succeeded; bad failed. The two subworkflow steps
	// (FATALLY_FAILED themselves) are containers and do not count.
	checkCounts(t, ov, 4, map[instance.StepStatus]int64{instance.StepSucceeded: 3, instance.StepFatallyFailed: 1})
	refs := ov.Overview[instance.StepFatallyFailed].Refs
	if len(refs) != 1 {
		t.Fatalf("failed refs %v", refs)
	}
	var kid int64
	if err := e.pool.QueryRow(context.Background(), `SELECT instance_id FROM workflow_instance WHERE workflow_id = 'kid'`).Scan(&kid); err != nil {
		t.Fatal(err)
	}
	want := StepReference{WorkflowID: "kid", InstanceID: kid, RunID: 1, StepID: "bad", AttemptID: 1}
	if refs[0] != want {
		t.Errorf("failed ref %v, want %v", refs[0], want)
	}
}

func TestRollupRestartMergesBaseAndCurrent(t *testing.T) {
	t.Parallel()
	e := newRollupEnv(t)
	ctx := context.Background()
	e.push(`{"workflow":{"id":"five","steps":[` + steps("NoOp", "c1", "c2", "c3", "c4", "c5") + `]}}`)
	e.push(`{"workflow":{"id":"p","steps":[` + steps("NoOp", "a") + `,` + steps("FailOnce", "f") + `,` +
		subworkflowStep("sw", "five") + `]}}`)
	res, err := e.svc.Start(ctx, StartRequest{WorkflowID: "p", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	iid := res.Instance.InstanceID
	first := e.wait("p", iid, 1)
	if first.Status != instance.WorkflowFailed {
		t.Fatalf("run 1 ended %s", first.Status)
	}
	checkCounts(t, first.RuntimeOverview.RollupOverview, 7,
		map[instance.StepStatus]int64{instance.StepSucceeded: 6, instance.StepFatallyFailed: 1})

	if _, err := e.svc.Restart(ctx, RestartRequest{WorkflowID: "p", InstanceID: iid}); err != nil {
		t.Fatal(err)
	}
	second := e.wait("p", iid, 2)
	if second.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 2 ended %s", second.Status)
	}
	// Base: a and sw were carried over (sw with the child of run 1, whose
	// five leaves count); current: f ran again and succeeded.
	checkCounts(t, second.RuntimeOverview.RollupOverview, 7, map[instance.StepStatus]int64{instance.StepSucceeded: 7})
	var children int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'five'`).Scan(&children); err != nil {
		t.Fatal(err)
	}
	if children != 1 {
		t.Errorf("%d child runs; the carried subworkflow step should keep its one child", children)
	}
	// Reading run 1 still shows run 1.
	again, err := e.svc.Detail(ctx, "p", iid, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, again.RuntimeOverview.RollupOverview, 7,
		map[instance.StepStatus]int64{instance.StepSucceeded: 6, instance.StepFatallyFailed: 1})
}

func TestRollupRefsAreCapped(t *testing.T) {
	t.Parallel()
	ov := &RollupOverview{Overview: map[instance.StepStatus]*RollupCount{}}
	if maxRollupRefsSQL != fmt.Sprint(MaxRollupRefs) {
		t.Fatalf("the SQL caps references at %s, MaxRollupRefs is %d", maxRollupRefsSQL, MaxRollupRefs)
	}
	for i := range 25 {
		ov.count(instance.StepFatallyFailed, 1)
		ov.ref(instance.StepFatallyFailed, StepReference{WorkflowID: "w", InstanceID: 1, RunID: 1, StepID: fmt.Sprint(i), AttemptID: 1})
		ov.count(instance.StepSucceeded, 1)
		ov.ref(instance.StepSucceeded, StepReference{WorkflowID: "w", InstanceID: 1, RunID: 1, StepID: fmt.Sprint(i), AttemptID: 1})
	}
	for _, tc := range []struct {
		status instance.StepStatus
		count  int64
		refs   int
	}{
		{instance.StepFatallyFailed, 25, MaxRollupRefs},
		{instance.StepSucceeded, 25, 0},
	} {
		c := ov.Overview[tc.status]
		if c.Count != tc.count || len(c.Refs) != tc.refs {
			t.Errorf("%s: cnt %d with %d refs; want %d with %d", tc.status, c.Count, len(c.Refs), tc.count, tc.refs)
		}
	}
	if ov.TotalLeafCount != 50 {
		t.Errorf("total %d, want 50", ov.TotalLeafCount)
	}
}

// seedRun inserts a run and its steps directly (no engine), one attempt
// each, SUCCEEDED unless its id ends in 00 (FATALLY_FAILED); parentKey
// links the run to the step attempt that created it. Steps named sw* are
// subworkflow steps and w* while steps (they may have children).
func seedRun(tb testing.TB, pool *pgxpool.Pool, wf string, iid int64, parentKey *string, stepIDs []string, status string) {
	tb.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
            group_count, group_id, status, definition, timeout_seconds, parent_key)
        VALUES ($1, $2, 1, 1, $3, 4, 0, 'SUCCEEDED', '{}'::jsonb, 60, $4)`, wf, iid, uuid.NewString(), parentKey); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid,
            status, step_type)
        SELECT $1, $2, 1, id, 1, gen_random_uuid(), CASE WHEN id LIKE '%00' THEN 'FATALLY_FAILED' ELSE $4 END,
            CASE WHEN id LIKE 'sw%' THEN 'subworkflow' WHEN id LIKE 'w%' THEN 'while' ELSE 'NoOp' END
        FROM unnest($3::text[]) AS id`, wf, iid, stepIDs, status); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkRollup reads the rollup of a parent whose subworkflow step has a
// 1,000-step child (one failed leaf per 100).
func BenchmarkRollup(b *testing.B) {
	pool := dbtest.Pool(b)
	seedRun(b, pool, "bparent", 1, nil, []string{"a", "b", "sw"}, "SUCCEEDED")
	key := "bparent/1/1/sw/1"
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%04d", i)
	}
	seedRun(b, pool, "bchild", 1, &key, ids, "SUCCEEDED")
	svc := New(pool, definition.NewStore(pool), 4)
	ctx := context.Background()
	ov, err := svc.Rollup(ctx, "bparent", 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	if ov.TotalLeafCount != 1002 || ov.Overview[instance.StepFatallyFailed].Count != 10 {
		b.Fatalf("rollup %d %v", ov.TotalLeafCount, counts(ov))
	}
	for b.Loop() {
		if _, err := svc.Rollup(ctx, "bparent", 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// Loop iterations are child runs keyed by the loop step's attempt with an
// iteration suffix; each counts, and a step whose key merely starts with
// the same characters does not adopt them.
func TestRollupCountsIterationChildren(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	seedRun(t, pool, "loop", 1, nil, []string{"w", "w1", "z"}, "SUCCEEDED")
	for i, key := range []string{"loop/1/1/w/1/i1", "loop/1/1/w/1/i2", "loop/1/1/w/1/i3"} {
		seedRun(t, pool, "body", int64(i+1), &key, []string{"x", "y00"}, "SUCCEEDED")
	}
	other := "loop/1/1/w1/1"
	seedRun(t, pool, "sub", 1, &other, []string{"k1", "k2", "k3", "k4"}, "SUCCEEDED")
	ov, err := New(pool, definition.NewStore(pool), 4).Rollup(context.Background(), "loop", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// z + 3 iterations × (x, y00) + 4 steps of w1's child.
	checkCounts(t, ov, 11, map[instance.StepStatus]int64{instance.StepSucceeded: 8, instance.StepFatallyFailed: 3})
	refs := ov.Overview[instance.StepFatallyFailed].Refs
	if len(refs) != 3 || refs[0] != (StepReference{WorkflowID: "body", InstanceID: 1, RunID: 1, StepID: "y00", AttemptID: 1}) {
		t.Errorf("failed refs %v", refs)
	}
}

// TestRollupForeachMergesKeptAndRerunIterations: a foreach's leaves are
// those of the latest run of each iteration, so after a restart that ran
// only the failed iteration again the rollup counts the kept iterations
// (base) and the rerun one (current).
func TestRollupForeachMergesKeptAndRerunIterations(t *testing.T) {
	t.Parallel()
	e := newRollupEnv(t)
	ctx := context.Background()
	e.push(`{"workflow":{"id":"fe","params":{"broken":{"type":"BOOLEAN","value":true,"mode":"MUTABLE"}},"steps":[
	  {"step":{"id":"pre","type":"NoOp"}},
	  {"foreach":{"id":"loop","concurrency":4,
	    "params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1,2,3,4]}}}},
	    "steps":[{"step":{"id":"a","type":"NoOp"}},
	      {"step":{"id":"b","type":"NoOp","retry_policy":{"error_retry_limit":0},"params":{
	        "ok":{"type":"BOOLEAN","expression":"if (broken && i == 2) { throw 'two fails'; } return true;"}}}}]}}]}}`)
	res, err := e.svc.Start(ctx, StartRequest{WorkflowID: "fe", Version: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	iid := res.Instance.InstanceID
	first := e.wait("fe", iid, 1)
	if first.Status != instance.WorkflowFailed {
		t.Fatalf("run 1 ended %s", first.Status)
	}
	// pre + 4 iterations × (a, b), b of iteration 2 failed.
	ov := first.RuntimeOverview.RollupOverview
	if ov.TotalLeafCount != 9 || ov.Overview[instance.StepSucceeded].Count != 8 {
		t.Fatalf("run 1 rollup %v (total %d)", counts(ov), ov.TotalLeafCount)
	}
	var failedRef *StepReference
	for st, c := range ov.Overview {
		if st != instance.StepSucceeded && len(c.Refs) == 1 {
			failedRef = &c.Refs[0]
		}
	}
	fid := instance.ForeachWorkflowID("fe", iid, "loop")
	if failedRef == nil || *failedRef != (StepReference{WorkflowID: fid, InstanceID: 2, RunID: 1, StepID: "b", AttemptID: 1}) {
		t.Fatalf("failed leaf ref %+v", failedRef)
	}
	if _, err := e.svc.Restart(ctx, RestartRequest{WorkflowID: "fe", InstanceID: iid,
		RunParams: workflow.Params{"broken": workflow.LiteralParam(workflow.ParamTypeBoolean, false)}}); err != nil {
		t.Fatal(err)
	}
	second := e.wait("fe", iid, 2)
	if second.Status != instance.WorkflowSucceeded {
		t.Fatalf("run 2 ended %s", second.Status)
	}
	checkCounts(t, second.RuntimeOverview.RollupOverview, 9, map[instance.StepStatus]int64{instance.StepSucceeded: 9})
	var runs []string
	rows, err := e.pool.Query(ctx, `SELECT instance_id || '/' || run_id FROM workflow_instance WHERE workflow_id = $1 ORDER BY 1`, fid)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if got := strings.Join(runs, " "); got != "1/1 2/1 2/2 3/1 4/1" {
		t.Errorf("iteration runs %q; only iteration 2 should have run again", got)
	}
}

// BenchmarkRollupForeach10000 reads the rollup of a parent whose foreach
// step ran 10,000 one-step iterations (one failed per 100); the target is
// 50 ms per read.
func BenchmarkRollupForeach10000(b *testing.B) {
	const n = 10_000
	pool := dbtest.Pool(b)
	ctx := context.Background()
	seedRun(b, pool, "fparent", 1, nil, []string{"pre"}, "SUCCEEDED")
	if _, err := pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid,
            status, step_type, runtime_state)
        VALUES ('fparent', 1, 1, 'loop', 1, gen_random_uuid(), 'FATALLY_FAILED', 'foreach',
            jsonb_build_object('data', jsonb_build_object('foreach_total', $1::bigint)))`, n); err != nil {
		b.Fatal(err)
	}
	fid := instance.ForeachWorkflowID("fparent", 1, "loop")
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
            group_count, group_id, status, definition, timeout_seconds, parent_key)
        SELECT $1, g, 1, 0, gen_random_uuid(), 4, g % 4, 'SUCCEEDED', '{}'::jsonb, 60, 'fparent/1/1/loop/1/f' || g
        FROM generate_series(1, $2::bigint) g`, fid, n); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid,
            status, step_type)
        SELECT $1, g, 1, 'body', 1, gen_random_uuid(), CASE WHEN g % 100 = 0 THEN 'FATALLY_FAILED' ELSE 'SUCCEEDED' END, 'NoOp'
        FROM generate_series(1, $2::bigint) g`, fid, n); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE workflow_instance; ANALYZE step_instance`); err != nil {
		b.Fatal(err)
	}
	svc := New(pool, definition.NewStore(pool), 4)
	ov, err := svc.Rollup(ctx, "fparent", 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	if ov.TotalLeafCount != n+1 || ov.Overview[instance.StepFatallyFailed].Count != n/100 {
		b.Fatalf("rollup %d %v", ov.TotalLeafCount, counts(ov))
	}
	for b.Loop() {
		if _, err := svc.Rollup(ctx, "fparent", 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}
