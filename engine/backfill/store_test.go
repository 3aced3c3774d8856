package backfill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

type world struct {
	pool  *pgxpool.Pool
	defs  *definition.Store
	runs  *execution.Service
	store *Store
}

func newWorld(t testing.TB) *world {
	t.Helper()
	pool := dbtest.Pool(t)
	defs := definition.NewStore(pool)
	runs := execution.New(pool, defs, 4)
	return &world{pool: pool, defs: defs, runs: runs, store: NewStore(pool, defs, runs)}
}

// push stores workflow id with a LONG param DAY and the given run strategy.
func (w *world) push(t testing.TB, id, strategy string) {
	t.Helper()
	doc := fmt.Sprintf(`{"properties":{"owner":"o","run_strategy":%q},
		"workflow":{"id":%q,"params":{"DAY":{"type":"LONG","value":0},"FLAG":{"type":"BOOLEAN","value":false}},"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`, strategy, id)
	d, err := workflow.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		t.Fatal(err)
	}
	if _, err := w.defs.Create(context.Background(), d, "o"); err != nil {
		t.Fatal(err)
	}
}

func (w *world) create(t testing.TB, req CreateRequest) *Backfill {
	t.Helper()
	b, dup, err := w.store.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if dup {
		t.Fatal("a new backfill came back as a duplicate")
	}
	return b
}

func (w *world) drive(t testing.TB) DriveStats {
	t.Helper()
	st, err := w.store.Drive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (w *world) get(t testing.TB, id string) *Detail {
	t.Helper()
	d, err := w.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// end ends a run as the engine would, and admits the workflow's queued
// runs.
func (w *world) end(t testing.TB, workflowID string, iid int64, status string) {
	t.Helper()
	ctx := context.Background()
	tag, err := w.pool.Exec(ctx, `UPDATE workflow_instance SET status = $3, queued = false, seq = seq + 1, end_time = now()
        WHERE workflow_id = $1 AND instance_id = $2`, workflowID, iid, status)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("end run %s/%d: %v (%d rows)", workflowID, iid, err, tag.RowsAffected())
	}
	if _, err := run.AdmitWorkflow(ctx, w.pool, workflowID, false); err != nil {
		t.Fatal(err)
	}
}

// live lists the instance ids of the live runs of a workflow, with the
// number of them waiting in the queue.
func (w *world) live(t testing.TB, workflowID string) (ids []int64, queued int) {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT instance_id, queued FROM workflow_instance
        WHERE workflow_id = $1 AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') ORDER BY instance_id`, workflowID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var q bool
		if err := rows.Scan(&id, &q); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if q {
			queued++
		}
	}
	return ids, queued
}

func statuses(d *Detail) []string {
	out := make([]string, len(d.Partitions))
	for i, p := range d.Partitions {
		out[i] = p.Status
	}
	return out
}

func TestCreateStoresPartitionsAndDedupsRequestID(t *testing.T) {
	w := newWorld(t)
	w.push(t, "wf", "PARALLEL")
	req := CreateRequest{WorkflowID: "wf", Param: "DAY", Spec: Spec{From: "20240101", To: "20240110"},
		Concurrency: 3, RequestID: "r-1", Caller: "alice"}
	b := w.create(t, req)
	if b.Status != Running || b.Partitions != 10 || b.Version != 1 || b.ParamType != workflow.ParamTypeLong ||
		b.Format != FormatDate || b.Spec.Order != OrderOldest || b.CreatedBy != "alice" {
		t.Fatalf("created %+v", b)
	}
	again, dup, err := w.store.Create(context.Background(), req)
	if err != nil || !dup || again.ID != b.ID {
		t.Fatalf("same request id: %+v dup=%v err=%v; want backfill %s", again, dup, err, b.ID)
	}
	d := w.get(t, b.ID)
	if len(d.Partitions) != 10 || d.Partitions[0].Value != "20240101" || d.Partitions[9].Value != "20240110" ||
		d.Counts[StatePending] != 10 {
		t.Fatalf("partitions %v counts %v", statuses(d), d.Counts)
	}
	list, err := w.store.List(context.Background(), "wf", 10)
	if err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("list = %v, %v", list, err)
	}
}

func TestCreateRefuses(t *testing.T) {
	w := newWorld(t)
	w.push(t, "wf", "PARALLEL")
	ctx := context.Background()
	if _, _, err := w.store.Create(ctx, CreateRequest{WorkflowID: "nope", Param: "DAY",
		Spec: Spec{From: "20240101", To: "20240102"}}); !errors.Is(err, definition.ErrNotFound) {
		t.Fatalf("unknown workflow: %v", err)
	}
	for name, req := range map[string]CreateRequest{
		"no param":           {WorkflowID: "wf", Spec: Spec{From: "20240101", To: "20240102"}},
		"dashes on LONG":     {WorkflowID: "wf", Param: "DAY", Spec: Spec{From: "2024-01-01", To: "2024-01-02"}},
		"concurrency":        {WorkflowID: "wf", Param: "DAY", Concurrency: -1, Spec: Spec{From: "20240101", To: "20240102"}},
		"BOOLEAN param":      {WorkflowID: "wf", Param: "FLAG", Spec: Spec{From: "1", To: "2"}},
		"empty range":        {WorkflowID: "wf", Param: "DAY"},
		"too much in flight": {WorkflowID: "wf", Param: "DAY", Concurrency: MaxConcurrency + 1, Spec: Spec{From: "1", To: "2"}},
	} {
		if _, _, err := w.store.Create(ctx, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	var n int
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM backfill`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused requests stored %d backfills (%v)", n, err)
	}
}

// TestDriveKeepsConcurrencyAndRetriesFailed drives a backfill to its end:
// never more than Concurrency runs in flight, each run a BACKFILL run with
// its value as a LONG, a failed partition fails the backfill, and retry
// runs it again.
func TestDriveKeepsConcurrencyAndRetriesFailed(t *testing.T) {
	w := newWorld(t)
	w.push(t, "wf", "PARALLEL")
	b := w.create(t, CreateRequest{WorkflowID: "wf", Param: "DAY", Spec: Spec{From: "20240101", To: "20240107"}, Concurrency: 3})
	ctx := context.Background()
	var failed int64
	for round := 0; ; round++ {
		if round > 20 {
			t.Fatal("the backfill did not end")
		}
		w.drive(t)
		w.drive(t) // a second pass starts nothing more
		ids, _ := w.live(t, "wf")
		if len(ids) > 3 {
			t.Fatalf("%d runs in flight, concurrency 3", len(ids))
		}
		d := w.get(t, b.ID)
		if d.Status != Running {
			break
		}
		if pending := d.Counts[StatePending]; pending > 0 && len(ids) != 3 {
			t.Fatalf("%d runs in flight with %d pending partitions", len(ids), pending)
		}
		for _, iid := range ids {
			status := "SUCCEEDED"
			if failed == 0 {
				failed, status = iid, "FAILED"
			}
			w.end(t, "wf", iid, status)
		}
	}
	d := w.get(t, b.ID)
	if d.Status != Failed || d.Counts["SUCCEEDED"] != 6 || d.Counts["FAILED"] != 1 || d.EndTime == nil {
		t.Fatalf("backfill %s counts %v; want FAILED with 6 SUCCEEDED, 1 FAILED", d.Status, d.Counts)
	}
	// Each value ran once, as a LONG, in a BACKFILL run carrying the id.
	rows, err := w.pool.Query(ctx, `SELECT (run_params->'DAY'->>'value')::bigint, run_params->'DAY'->>'type',
            initiator->>'type', initiator->>'backfill_id', request_id
        FROM workflow_instance WHERE workflow_id = 'wf' ORDER BY instance_id`)
	if err != nil {
		t.Fatal(err)
	}
	var days []int64
	for rows.Next() {
		var day int64
		var typ, initiator, bid, req string
		if err := rows.Scan(&day, &typ, &initiator, &bid, &req); err != nil {
			t.Fatal(err)
		}
		if typ != "LONG" || initiator != Initiator || bid != b.ID || req == "" {
			t.Fatalf("run of %d: type %s initiator %s backfill %s request %q", day, typ, initiator, bid, req)
		}
		days = append(days, day)
	}
	rows.Close()
	if !slices.Equal(days, []int64{20240101, 20240102, 20240103, 20240104, 20240105, 20240106, 20240107}) {
		t.Fatalf("runs of days %v", days)
	}
	// Retry starts the failed partition again, and only it.
	if _, err := w.store.Act(ctx, b.ID, ActionRetry, "alice"); err != nil {
		t.Fatal(err)
	}
	if st := w.drive(t); st.Started != 1 {
		t.Fatalf("retry started %d runs; want 1", st.Started)
	}
	ids, _ := w.live(t, "wf")
	if len(ids) != 1 {
		t.Fatalf("live runs after retry: %v", ids)
	}
	w.end(t, "wf", ids[0], "SUCCEEDED")
	w.drive(t)
	d = w.get(t, b.ID)
	if d.Status != Succeeded || d.Counts["SUCCEEDED"] != 7 {
		t.Fatalf("after retry: %s %v", d.Status, d.Counts)
	}
	if d.Partitions[0].Attempt != 1 || *d.Partitions[0].InstanceID != ids[0] {
		t.Fatalf("retried partition %+v; want attempt 1 on run %d", d.Partitions[0], ids[0])
	}
	// Every status change is an event in the outbox, in order.
	rows, err = w.pool.Query(ctx, `SELECT coalesce(payload->>'old_status', ''), payload->>'new_status', payload->>'backfill_id'
        FROM maestro_event WHERE payload->>'type' = 'BACKFILL_STATUS_CHANGE_EVENT' ORDER BY tx, event_id`)
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for rows.Next() {
		var from, to, id string
		if err := rows.Scan(&from, &to, &id); err != nil {
			t.Fatal(err)
		}
		if id != b.ID {
			t.Fatalf("event of backfill %s", id)
		}
		changes = append(changes, from+">"+to)
	}
	rows.Close()
	if want := []string{">RUNNING", "RUNNING>FAILED", "FAILED>RUNNING", "RUNNING>SUCCEEDED"}; !slices.Equal(changes, want) {
		t.Fatalf("backfill events %v; want %v", changes, want)
	}
}

// TestSkipAndRerun: a value with a SUCCEEDED run of the version is
// skipped (and linked to that run) unless rerun.
func TestSkipAndRerun(t *testing.T) {
	w := newWorld(t)
	w.push(t, "wf", "PARALLEL")
	ctx := context.Background()
	res, err := w.runs.StartBatch(ctx, []execution.BatchStart{{WorkflowID: "wf", Version: 1,
		RunParams: workflow.Params{"DAY": workflow.LiteralParam(workflow.ParamTypeLong, int64(20240102))}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	manual := res[0].InstanceID
	w.end(t, "wf", manual, "SUCCEEDED")

	skip := w.create(t, CreateRequest{WorkflowID: "wf", Param: "DAY", Spec: Spec{From: "20240101", To: "20240103"}, Concurrency: 5})
	if st := w.drive(t); st.Started != 2 || st.Skipped != 1 {
		t.Fatalf("drive: %+v; want 2 started, 1 skipped", st)
	}
	d := w.get(t, skip.ID)
	if got := statuses(d); !slices.Equal(got, []string{"CREATED", StateSkipped, "CREATED"}) {
		t.Fatalf("partitions %v", got)
	}
	if *d.Partitions[1].InstanceID != manual {
		t.Fatalf("skipped partition links run %d; want %d", *d.Partitions[1].InstanceID, manual)
	}
	rerun := w.create(t, CreateRequest{WorkflowID: "wf", Param: "DAY",
		Spec: Spec{Values: []string{"20240102"}}, Rerun: true})
	w.drive(t)
	d = w.get(t, rerun.ID)
	if d.Partitions[0].Status != "CREATED" || *d.Partitions[0].InstanceID == manual {
		t.Fatalf("rerun partition %+v", d.Partitions[0])
	}
}

func TestPauseResumeCancel(t *testing.T) {
	w := newWorld(t)
	w.push(t, "wf", "PARALLEL")
	ctx := context.Background()
	b := w.create(t, CreateRequest{WorkflowID: "wf", Param: "DAY", Spec: Spec{From: "20240101", To: "20240105"}, Concurrency: 2})
	w.drive(t)
	if _, err := w.store.Act(ctx, b.ID, ActionPause, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Act(ctx, b.ID, ActionPause, "alice"); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("pause of a paused backfill: %v", err)
	}
	ids, _ := w.live(t, "wf")
	for _, iid := range ids {
		w.end(t, "wf", iid, "SUCCEEDED")
	}
	if st := w.drive(t); st.Started != 0 {
		t.Fatalf("a paused backfill started %d runs", st.Started)
	}
	d := w.get(t, b.ID)
	if d.Status != Paused || d.Counts["SUCCEEDED"] != 2 || d.Counts[StatePending] != 3 {
		t.Fatalf("paused: %s %v", d.Status, d.Counts)
	}
	if _, err := w.store.Act(ctx, b.ID, ActionResume, "alice"); err != nil {
		t.Fatal(err)
	}
	if st := w.drive(t); st.Started != 2 {
		t.Fatalf("resumed backfill started %d runs; want 2", st.Started)
	}
	live, _ := w.live(t, "wf")
	got, err := w.store.Act(ctx, b.ID, ActionCancel, "alice")
	if err != nil || got.Status != Cancelled || got.EndTime == nil {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	// The runs in flight are asked to stop; nothing more starts.
	var stops []int64
	rows, err := w.pool.Query(ctx, `SELECT (payload->>'instance_id')::bigint FROM maestro_queue
        WHERE queue_id = 2 AND payload->>'action' = 'stop' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stops = append(stops, id)
	}
	rows.Close()
	if !slices.Equal(stops, live) {
		t.Fatalf("stop messages for %v; want the runs in flight %v", stops, live)
	}
	if st := w.drive(t); st.Backfills != 0 || st.Started != 0 {
		t.Fatalf("a cancelled backfill was driven: %+v", st)
	}
	d = w.get(t, b.ID)
	if d.Counts[StateCancelled] != 1 {
		t.Fatalf("after cancel: %v", d.Counts)
	}
	if _, err := w.store.Act(ctx, b.ID, ActionResume, "alice"); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("resume of a cancelled backfill: %v", err)
	}
	if _, err := w.store.Act(ctx, "nope", ActionPause, "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown backfill: %v", err)
	}
}

// TestYieldsToTriggerRuns: under a SEQUENTIAL strategy, a time-triggered
// run queued behind a backfill's queued run is admitted first, and the
// backfill starts nothing while a trigger run waits.
func TestYieldsToTriggerRuns(t *testing.T) {
	w := newWorld(t)
	w.push(t, "wf", "SEQUENTIAL")
	ctx := context.Background()
	b := w.create(t, CreateRequest{WorkflowID: "wf", Param: "DAY", Spec: Spec{From: "20240101", To: "20240105"}, Concurrency: 2})
	w.drive(t)
	ids, queued := w.live(t, "wf")
	if len(ids) != 2 || queued != 1 {
		t.Fatalf("live %v, %d queued; want 2, 1 queued", ids, queued)
	}
	trigger := func(req string) int64 {
		t.Helper()
		res, err := w.runs.StartBatch(ctx, []execution.BatchStart{{WorkflowID: "wf", Version: 1, RequestID: req,
			Initiator: map[string]any{"type": "TIME", "trigger_uuid": "t"}}})
		if err != nil || res[0].Err != nil || !res[0].Queued {
			t.Fatalf("trigger run: %+v %v", res, err)
		}
		return res[0].InstanceID
	}
	isQueued := func(iid int64) bool {
		t.Helper()
		var q bool
		if err := w.pool.QueryRow(ctx, `SELECT queued FROM workflow_instance WHERE workflow_id = 'wf' AND instance_id = $1`,
			iid).Scan(&q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	t1 := trigger("time-1")
	w.end(t, "wf", ids[0], "SUCCEEDED")
	if isQueued(t1) || !isQueued(ids[1]) {
		t.Fatal("the backfill's queued run was admitted before the trigger run queued after it")
	}
	// A trigger run waits; the backfill's queued run is stopped, which
	// leaves it room, and still it starts nothing.
	t2 := trigger("time-2")
	w.end(t, "wf", ids[1], "STOPPED")
	if st := w.drive(t); st.Started != 0 {
		t.Fatalf("the backfill started %d runs while a trigger run waited", st.Started)
	}
	w.end(t, "wf", t1, "SUCCEEDED")
	if isQueued(t2) {
		t.Fatal("the second trigger run was not admitted")
	}
	if st := w.drive(t); st.Started != 2 {
		t.Fatalf("with no trigger run waiting the backfill started %d runs; want 2", st.Started)
	}
	d := w.get(t, b.ID)
	if got := statuses(d); !slices.Equal(got, []string{"SUCCEEDED", "STOPPED", "CREATED", "CREATED", StatePending}) {
		t.Fatalf("partitions %v", got)
	}
}
