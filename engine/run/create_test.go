package run_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// countingTx counts the INSERT INTO workflow_instance statements sent
// through it.
type countingTx struct {
	pgx.Tx
	inserts atomic.Int32
}

func (c *countingTx) note(sql string) {
	if strings.Contains(sql, "INSERT INTO workflow_instance") {
		c.inserts.Add(1)
	}
}

func (c *countingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.note(sql)
	return c.Tx.Query(ctx, sql, args...)
}

func (c *countingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.note(sql)
	return c.Tx.Exec(ctx, sql, args...)
}

func (c *countingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.note(sql)
	return c.Tx.QueryRow(ctx, sql, args...)
}

// push stores workflow id with run strategy props (JSON, "" for none).
func push(t *testing.T, pool *pgxpool.Pool, id, props string) {
	t.Helper()
	ctx := context.Background()
	d, err := workflow.DecodeJSON([]byte(`{"workflow":{"id":"` + id + `","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := definition.NewStore(pool).Create(ctx, d, "tester"); err != nil {
		t.Fatal(err)
	}
	if props != "" {
		if _, err := pool.Exec(ctx, `UPDATE workflow SET properties = $2 WHERE workflow_id = $1`, id, props); err != nil {
			t.Fatal(err)
		}
	}
}

// create runs run.Create in its own transaction and returns its result and
// how many INSERT INTO workflow_instance statements it sent.
func create(t *testing.T, pool *pgxpool.Pool, runs []run.New, opt run.Options) ([]run.Created, int) {
	t.Helper()
	ctx := context.Background()
	var out []run.Created
	var inserts int
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		c := &countingTx{Tx: tx}
		var err error
		out, err = run.Create(ctx, c, runs, opt)
		inserts = int(c.inserts.Load())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, inserts
}

func start(id, requestID string) run.New {
	return run.New{Ref: run.Ref{WorkflowID: id}, Version: 1, RequestID: requestID, GroupCount: 4, TimeoutSeconds: 60}
}

// startMessages counts the start messages of a workflow's runs.
func startMessages(t *testing.T, pool *pgxpool.Pool, id string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM maestro_queue WHERE queue_id = $1 AND payload->>'workflow_id' = $2`,
		queue.StartWorkflow, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Runs of distinct workflows, and runs admitted always, go in with one
// INSERT; each admitted run gets its start message and its own instance
// id, and the definition is the version's.
func TestCreateManyRunsInOneInsert(t *testing.T) {
	pool := dbtest.Pool(t)
	for _, id := range []string{"a", "b", "c"} {
		push(t, pool, id, `{"run_strategy":"PARALLEL"}`)
	}
	def := []byte(`{"id":"c:1:loop","steps":[]}`)
	runs := []run.New{start("a", ""), start("b", ""), start("c", "")}
	for it := int64(1); it <= 5; it++ {
		runs = append(runs, run.New{Ref: run.Ref{WorkflowID: "c:1:loop", InstanceID: it, RunID: 1}, Definition: def,
			GroupCount: 4, Admission: run.Always, Depth: 1, Correlation: "c:1:1"})
	}
	out, inserts := create(t, pool, runs, run.Options{})
	if inserts != 1 {
		t.Errorf("%d INSERT statements for %d runs, want 1", inserts, len(runs))
	}
	for i, c := range out {
		if !c.Inserted || c.Status != instance.WorkflowCreated || c.Queued || c.Duplicated {
			t.Errorf("run %d: %+v, want created and admitted", i, c)
		}
	}
	if out[0].Ref.InstanceID != 1 || out[7].Ref.InstanceID != 5 {
		t.Errorf("instance ids %d and %d, want 1 (allocated) and 5 (given)", out[0].Ref.InstanceID, out[7].Ref.InstanceID)
	}
	for id, want := range map[string]int{"a": 1, "b": 1, "c": 1, "c:1:loop": 5} {
		if got := startMessages(t, pool, id); got != want {
			t.Errorf("%s: %d start messages, want %d", id, got, want)
		}
	}
	var name string
	var depth int
	var correlation string
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT definition->>'id' FROM workflow_instance WHERE workflow_id = 'a'),
            depth, correlation_id FROM workflow_instance WHERE workflow_id = 'c:1:loop' AND instance_id = 3`).Scan(&name, &depth, &correlation); err != nil {
		t.Fatal(err)
	}
	if name != "a" || depth != 1 || correlation != "c:1:1" {
		t.Errorf("definition of a's run names %q; iteration depth %d correlation %q", name, depth, correlation)
	}
}

// A request id already stored, or used by an earlier run of the same
// call, makes a duplicate: no row, the first run's identity.
func TestCreateDedupsByRequestID(t *testing.T) {
	pool := dbtest.Pool(t)
	push(t, pool, "d", `{"run_strategy":"PARALLEL"}`)
	first, _ := create(t, pool, []run.New{start("d", "r1")}, run.Options{})
	out, _ := create(t, pool, []run.New{start("d", "r1"), start("d", "r2"), start("d", "r2"), start("d", "")}, run.Options{})
	if !out[0].Duplicated || out[0].Ref.InstanceID != first[0].Ref.InstanceID || out[0].Inserted {
		t.Errorf("repeat of a stored request id: %+v, want a duplicate of instance %d", out[0], first[0].Ref.InstanceID)
	}
	if out[1].Duplicated || !out[1].Inserted {
		t.Errorf("new request id: %+v", out[1])
	}
	if !out[2].Duplicated || out[2].Ref != out[1].Ref || out[2].Status != out[1].Status {
		t.Errorf("repeat within the call: %+v, want a duplicate of %+v", out[2], out[1])
	}
	if out[3].Duplicated || out[3].Ref.InstanceID != 3 {
		t.Errorf("no request id: %+v, want instance 3 (duplicates take no id)", out[3])
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'd'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Errorf("%d runs stored, want 3", rows)
	}
}

// Admission under the run strategies: SEQUENTIAL queues what follows the
// first run (the INSERT counts the runs before it in the call), FIRST_ONLY drops the new
// run with its CREATED -> STOPPED event, PARALLEL admits up to its
// concurrency, and a failing Check leaves only its run out.
func TestCreateAdmitsUnderRunStrategies(t *testing.T) {
	pool := dbtest.Pool(t)
	push(t, pool, "seq", "")
	push(t, pool, "first", `{"run_strategy":"FIRST_ONLY"}`)
	push(t, pool, "par", `{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":2}}`)
	refused := start("par", "")
	refused.Check = func(*run.New) error { return errors.New("bad params") }
	runs := []run.New{start("seq", ""), start("seq", ""), start("seq", ""), start("first", ""), start("first", ""),
		start("par", ""), refused, start("par", ""), start("par", "")}
	out, inserts := create(t, pool, runs, run.Options{})
	if inserts != 2 {
		t.Errorf("%d INSERT statements, want 2 (FIRST_ONLY's second run in a round of its own; the others share the first)", inserts)
	}
	type want struct {
		status instance.WorkflowStatus
		queued bool
	}
	wants := []want{{"CREATED", false}, {"CREATED", true}, {"CREATED", true}, {"CREATED", false}, {"STOPPED", false},
		{"CREATED", false}, {}, {"CREATED", false}, {"CREATED", true}}
	for i, w := range wants {
		if i == 6 {
			if out[i].Err == nil || out[i].Inserted {
				t.Errorf("run %d: %+v, want refused by its check", i, out[i])
			}
			continue
		}
		if out[i].Status != w.status || out[i].Queued != w.queued || !out[i].Inserted {
			t.Errorf("run %d (%s): %s queued=%v, want %s queued=%v", i, out[i].Ref, out[i].Status, out[i].Queued, w.status, w.queued)
		}
	}
	for id, n := range map[string]int{"seq": 1, "first": 1, "par": 2} {
		if got := startMessages(t, pool, id); got != n {
			t.Errorf("%s: %d start messages, want %d", id, got, n)
		}
	}
	var events int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM maestro_event WHERE workflow_id = 'first' AND kind = $1`, run.InstanceStatusKind).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("%d status events of FIRST_ONLY runs, want 1 (the dropped run's CREATED -> STOPPED)", events)
	}
	// The queued runs wait; once the admitted one ends, admission after
	// the commit admits the next.
	if _, err := pool.Exec(context.Background(), `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now()
        WHERE workflow_id = 'seq' AND instance_id = 1`); err != nil {
		t.Fatal(err)
	}
	run.AdmitAfterCommit(context.Background(), pool, out)
	if got := startMessages(t, pool, "seq"); got != 2 {
		t.Errorf("seq after its first run ended: %d start messages, want 2", got)
	}
}

// The runs of one workflow created by one INSERT are admitted as if each
// had its own: PARALLEL 3 with a live run admits two more and queues the
// rest, and a queued run makes every later one queue.
func TestCreateAdmitsManyRunsOfAWorkflowInOneStatement(t *testing.T) {
	pool := dbtest.Pool(t)
	push(t, pool, "par", `{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":3}}`)
	create(t, pool, []run.New{start("par", "")}, run.Options{})
	out, inserts := create(t, pool, []run.New{start("par", ""), start("par", ""), start("par", ""), start("par", "")}, run.Options{})
	if inserts != 1 {
		t.Errorf("%d INSERT statements, want 1", inserts)
	}
	for i, want := range []bool{false, false, true, true} {
		if out[i].Queued != want || out[i].Status != instance.WorkflowCreated {
			t.Errorf("run %d (%s): %s queued=%v, want queued=%v", i, out[i].Ref, out[i].Status, out[i].Queued, want)
		}
	}
	if got := startMessages(t, pool, "par"); got != 3 {
		t.Errorf("%d start messages, want 3", got)
	}
	// With runs queued, a later call queues whatever the room.
	if _, err := pool.Exec(context.Background(), `UPDATE workflow_instance SET status = 'SUCCEEDED', seq = seq + 1, end_time = now()
        WHERE workflow_id = 'par' AND NOT queued`); err != nil {
		t.Fatal(err)
	}
	out, _ = create(t, pool, []run.New{start("par", ""), start("par", "")}, run.Options{})
	if !out[0].Queued || !out[1].Queued {
		t.Errorf("behind queued runs: %+v, want both queued", out)
	}
	var timeline string
	if err := pool.QueryRow(context.Background(), `SELECT timeline::text FROM workflow_instance WHERE workflow_id = 'par' AND instance_id = $1`,
		out[1].Ref.InstanceID).Scan(&timeline); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(timeline, "queued by the PARALLEL run strategy") {
		t.Errorf("a queued run's timeline %s, want its queued event", timeline)
	}
}
