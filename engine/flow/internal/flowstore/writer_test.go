package flowstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// writerFixture makes groups 0 (generation 5) and 1 (generation 7) owned
// by this node, and one IN_PROGRESS run in each, with a STARTING attempt
// of step "s".
func writerFixture(t *testing.T) (*pgxpool.Pool, *Store, run.Ref, run.Ref) {
	t.Helper()
	db := dbtest.Pool(t)
	ctx := context.Background()
	s := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.EnsureGroups(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE flow_group SET owner = 'me', generation = 5 + 2 * group_id,
            expires_at = now() + interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	refs := []run.Ref{{WorkflowID: "wf", InstanceID: 1, RunID: 1}, {WorkflowID: "wf", InstanceID: 2, RunID: 1}}
	for i, ref := range refs {
		if _, err := db.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
                group_count, group_id, status, definition, timeout_seconds)
            VALUES ($1, $2, 1, 1, gen_random_uuid(), 2, $3, 'IN_PROGRESS', '{"id":"wf","steps":[]}', 60)`,
			ref.WorkflowID, ref.InstanceID, i); err != nil {
			t.Fatal(err)
		}
		w := StepWrite{Status: instance.StepStarting, Seq: 1, Timeline: []instance.TimelineEvent{}}
		uuid := "00000000-0000-0000-0000-00000000000" + string(rune('1'+i))
		if err := s.Write(ctx, InsertStepOp(ctx, ref, int32(i), 5+2*int64(i), "s", 1, uuid, "NoOp", w)); err != nil {
			t.Fatal(err)
		}
	}
	return db, s, refs[0], refs[1]
}

func outputs(t *testing.T, ref run.Ref, name string) []byte {
	t.Helper()
	b, err := json.Marshal([]signal.Output{{Name: name,
		InstanceID: signal.OutputInstanceID(ref.WorkflowID, ref.InstanceID, ref.RunID, "s", 1, 0),
		Params:     map[string]any{"k": "v"}, Payload: map[string]any{},
		WorkflowID: ref.WorkflowID, InstanceNo: ref.InstanceID, RunID: ref.RunID, StepID: "s", AttemptID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func count(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// One batch of the writer, holding: a terminal write announcing output
// signals; the same for a run whose group another node has claimed since
// (its fence is lost); an insert whose write announced with it (Then)
// fails; and a write ordered after that one. Only what committed is
// reported written, and only what is reported written is in the database,
// with its event and signals: the fenced write announces nothing, the
// failed one leaves nothing, and the one after it fails too, unwritten.
func TestWriterReportsOnlyWhatCommitted(t *testing.T) {
	t.Parallel()
	db, _, a, b := writerFixture(t)
	ctx := context.Background()
	// Group 1 is claimed by another node: its generation moves on.
	if _, err := db.Exec(ctx, `UPDATE flow_group SET generation = generation + 1, owner = 'other' WHERE group_id = 1`); err != nil {
		t.Fatal(err)
	}
	ev := []byte(`{"workflow_id":"wf","type":"STEP_INSTANCE_STATUS_CHANGE_EVENT"}`)
	done := StepWrite{Status: instance.StepSucceeded, Seq: 2, Timeline: []instance.TimelineEvent{}, End: true, Event: ev}
	okW, fencedW := done, done
	okW.Signals, fencedW.Signals = outputs(t, a, "sig_a"), outputs(t, b, "sig_b")
	ok := UpdateStepOp(ctx, a, 0, 5, "s", 1, okW)
	fenced := UpdateStepOp(ctx, b, 1, 7, "s", 1, fencedW)
	boom := errors.New("boom")
	failing := InsertStepOp(ctx, a, 0, 5, "t", 1, "00000000-0000-0000-0000-000000000009", "NoOp",
		StepWrite{Status: instance.StepStarting, Seq: 1, Timeline: []instance.TimelineEvent{}, Event: ev}).
		Then(func(context.Context, pgx.Tx) error { return boom })
	after := UpdateStepOp(ctx, a, 0, 5, "t", 1,
		StepWrite{Status: instance.StepSucceeded, Seq: 2, Timeline: []instance.TimelineEvent{}, Event: ev}).After(failing)

	// Written beside the failing one, in its batch: the batch fails as a
	// whole, and is written again without the failing op.
	beside := InsertStepOp(ctx, a, 0, 5, "v", 1, "00000000-0000-0000-0000-00000000000a", "NoOp",
		StepWrite{Status: instance.StepStarting, Seq: 1, Timeline: []instance.TimelineEvent{}})

	var called []error
	ok.OnDone(func(err error) { called = append(called, err) })
	w := NewWriter(db, WriterConfig{})
	w.Submit(ok, fenced) // queued before the loop runs: one batch
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := ok.Wait(wctx); err != nil {
		t.Fatalf("the write that committed: %v", err)
	}
	if err := fenced.Wait(wctx); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("the write whose fence was lost: %v, want run.ErrFenced", err)
	}
	w.Submit(failing, beside, after)
	if err := beside.Wait(wctx); err != nil {
		t.Fatalf("the write beside a failing one: %v", err)
	}
	if err := failing.Wait(wctx); !errors.Is(err, boom) {
		t.Fatalf("the write whose Then failed: %v, want boom", err)
	}
	if err := after.Wait(wctx); !errors.Is(err, boom) {
		t.Fatalf("the write after a failed one: %v, want its error", err)
	}
	w.Stop()
	if len(called) != 1 || called[0] != nil {
		t.Fatalf("OnDone of the committed write: %v", called)
	}

	status := func(ref run.Ref, step string) string {
		var st string
		err := db.QueryRow(ctx, `SELECT status FROM step_instance WHERE workflow_id = $1 AND instance_id = $2
            AND run_id = $3 AND step_id = $4`, ref.WorkflowID, ref.InstanceID, ref.RunID, step).Scan(&st)
		if errors.Is(err, pgx.ErrNoRows) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(a, "s"); st != "SUCCEEDED" {
		t.Errorf("committed step: %s", st)
	}
	if st := status(b, "s"); st != "STARTING" {
		t.Errorf("fenced step: %s, want it unchanged", st)
	}
	if st := status(a, "v"); st != "STARTING" {
		t.Errorf("write beside the failed one: %s", st)
	}
	if st := status(a, "t"); st != "none" {
		t.Errorf("failed insert: %s, want no row", st)
	}
	if n := count(t, db, `SELECT count(*) FROM maestro_event`); n != 1 {
		t.Errorf("%d events, want the committed write's one", n)
	}
	for name, want := range map[string]int{"sig_a": 1, "sig_b": 0} {
		if n := count(t, db, `SELECT count(*) FROM signal_instance WHERE name = $1`, name); n != want {
			t.Errorf("signal %s: %d instances, want %d", name, n, want)
		}
		if n := count(t, db, `SELECT count(*) FROM signal_pending WHERE name = $1`, name); n != want {
			t.Errorf("signal %s: %d pending, want %d", name, n, want)
		}
		if n := count(t, db, `SELECT count(*) FROM signal_lineage WHERE signal_name = $1 AND kind = 'PRODUCED'
                AND step_id = 's' AND attempt_id = 1`, name); n != want {
			t.Errorf("signal %s: %d PRODUCED lineage rows, want %d", name, n, want)
		}
	}
}

// Many runs' terminal writes with output signals in one batch each
// announce their own signals once, and a write repeated after a lost
// acknowledgement announces nothing again. An inline step (written once,
// by an insert, with its final state) announces its signals too.
func TestWriterBatchesOutputSignals(t *testing.T) {
	t.Parallel()
	db, s, a, b := writerFixture(t)
	ctx := context.Background()
	done := StepWrite{Status: instance.StepSucceeded, Seq: 2, Timeline: []instance.TimelineEvent{}, End: true}
	wa, wb := done, done
	wa.Signals, wb.Signals = outputs(t, a, "sig"), outputs(t, b, "sig")
	inline := StepWrite{Status: instance.StepSucceeded, Seq: 1, Timeline: []instance.TimelineEvent{}, Start: true, End: true}
	inlineRef := a
	inlineOut, err := json.Marshal([]signal.Output{{Name: "sig_inline",
		InstanceID: signal.OutputInstanceID(a.WorkflowID, a.InstanceID, a.RunID, "u", 1, 0),
		Params:     map[string]any{}, Payload: map[string]any{},
		WorkflowID: a.WorkflowID, InstanceNo: a.InstanceID, RunID: a.RunID, StepID: "u", AttemptID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	inline.Signals = inlineOut
	w := NewWriter(db, WriterConfig{})
	ops := []*Op{UpdateStepOp(ctx, a, 0, 5, "s", 1, wa), UpdateStepOp(ctx, b, 1, 7, "s", 1, wb),
		InsertStepOp(ctx, inlineRef, 0, 5, "u", 1, "00000000-0000-0000-0000-000000000008", "NoOp", inline)}
	w.Submit(ops...)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, op := range ops {
		if err := op.Wait(ctx); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM signal_instance WHERE name = 'sig'`); n != 2 {
		t.Fatalf("%d signals, want one per run", n)
	}
	if n := count(t, db, `SELECT count(DISTINCT instance_id) FROM signal_lineage WHERE signal_name = 'sig'`); n != 2 {
		t.Fatalf("lineage names %d runs, want 2", n)
	}
	if n := count(t, db, `SELECT count(*) FROM signal_instance WHERE name = 'sig_inline'`); n != 1 {
		t.Fatalf("%d inline signals, want 1", n)
	}
	// Repeated: the seq guard refuses it, and nothing is announced again.
	if err := s.Write(ctx, UpdateStepOp(ctx, a, 0, 5, "s", 1, wa)); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("repeated write: %v", err)
	}
	if n := count(t, db, `SELECT count(*) FROM signal_instance`); n != 3 {
		t.Fatalf("%d signals after a repeated write, want 3", n)
	}
}

// A run's start through the writer (StartOp) and its first step write,
// ordered after it, share one batch and one commit; a start refused
// because the run is no longer CREATED takes the step write behind it down
// too, though the step's own fence (the group's generation) holds.
func TestWriterFoldsAStartIntoItsFirstStepWrite(t *testing.T) {
	t.Parallel()
	db, _, _, _ := writerFixture(t)
	ctx := context.Background()
	created := func(id int64, status string) run.Ref {
		ref := run.Ref{WorkflowID: "wf", InstanceID: id, RunID: 1}
		if _, err := db.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
                group_count, group_id, status, definition, timeout_seconds)
            VALUES ($1, $2, 1, 1, gen_random_uuid(), 2, 0, $3, '{"id":"wf","steps":[]}', 60)`, ref.WorkflowID, ref.InstanceID, status); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	fresh, stopped := created(10, "CREATED"), created(11, "CREATED")
	// Stopped while CREATED, after the engine read it.
	if _, err := db.Exec(ctx, `UPDATE workflow_instance SET status = 'STOPPED', seq = seq + 1 WHERE instance_id = 11`); err != nil {
		t.Fatal(err)
	}
	ev := []byte(`{"workflow_id":"wf","type":"WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"}`)
	stepEv := []byte(`{"workflow_id":"wf","type":"STEP_INSTANCE_STATUS_CHANGE_EVENT"}`)
	ops := func(ref run.Ref, n int) (*Op, *Op) {
		start := StartOp(ctx, ref, 0, 5, "me", []byte(`{"p":{"type":"LONG","value":1}}`), ev)
		step := InsertStepOp(ctx, ref, 0, 5, "s", 1, "00000000-0000-0000-0000-00000000010"+string(rune('0'+n)), "NoOp",
			StepWrite{Status: instance.StepSucceeded, Seq: 1, Timeline: []instance.TimelineEvent{}, Start: true, End: true, Event: stepEv}).After(start)
		return start, step
	}
	freshStart, freshStep := ops(fresh, 0)
	stoppedStart, stoppedStep := ops(stopped, 1)
	w := NewWriter(db, WriterConfig{})
	w.Submit(freshStart, freshStep, stoppedStart, stoppedStep) // before the loop runs: one batch
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, op := range []*Op{freshStart, freshStep} {
		if err := op.Wait(wctx); err != nil {
			t.Fatalf("start of a CREATED run and its step: %v", err)
		}
	}
	for _, op := range []*Op{stoppedStart, stoppedStep} {
		if err := op.Wait(wctx); !errors.Is(err, run.ErrFenced) {
			t.Fatalf("start of a stopped run and its step: %v, want run.ErrFenced", err)
		}
	}
	var status string
	var gen, seq int64
	var started bool
	var runTx, stepTx uint32
	if err := db.QueryRow(ctx, `SELECT i.status, i.generation, i.seq, i.start_time IS NOT NULL, i.xmin::text::bigint, s.xmin::text::bigint
        FROM workflow_instance i JOIN step_instance s USING (workflow_id, instance_id, run_id) WHERE i.instance_id = 10`).
		Scan(&status, &gen, &seq, &started, &runTx, &stepTx); err != nil {
		t.Fatal(err)
	}
	if status != "IN_PROGRESS" || gen != 5 || seq != 1 || !started {
		t.Errorf("started run: status %s, generation %d, seq %d, start time set %v", status, gen, seq, started)
	}
	if runTx != stepTx {
		t.Errorf("the start committed in transaction %d, its first step in %d: want one commit", runTx, stepTx)
	}
	if n := count(t, db, `SELECT count(*) FROM step_instance WHERE instance_id = 11`); n != 0 {
		t.Errorf("%d step rows for the run stopped before its start", n)
	}
	if n := count(t, db, `SELECT count(*) FROM maestro_event WHERE workflow_id = 'wf' AND seq IS NOT NULL`); n != 2 {
		t.Errorf("%d events, want the started run's and its step's", n)
	}
	if got := count(t, db, `SELECT count(*) FROM workflow_instance WHERE instance_id = 11 AND status = 'STOPPED' AND seq = 1`); got != 1 {
		t.Error("the stopped run was written")
	}
}

// An idle writer holds back a write nobody waits for (Behind) for its
// Linger, and sends it with the first write somebody waits for: one
// transaction (the rows share their xmin). A write behind alone goes out
// once the linger has passed.
func TestWriterLingersForWritesBehind(t *testing.T) {
	t.Parallel()
	db, _, ref1, ref2 := writerFixture(t)
	ctx := context.Background()
	w := NewWriter(db, WriterConfig{Linger: 300 * time.Millisecond})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	running := func(seq int64) StepWrite {
		return StepWrite{Status: instance.StepRunning, Seq: seq, Timeline: []instance.TimelineEvent{}}
	}
	behind := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, running(2)).Behind()
	w.Submit(behind)
	time.Sleep(50 * time.Millisecond)
	if behind.Failed() != nil || isDone(behind) {
		t.Fatalf("a write behind went out at once (err %v)", behind.Failed())
	}
	if err := w.Write(ctx, UpdateStepOp(ctx, ref2, 1, 7, "s", 1, running(2))); err != nil {
		t.Fatal(err)
	}
	if err := behind.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(DISTINCT xmin::text) FROM step_instance WHERE step_id = 's' AND seq = 2`); n != 1 {
		t.Errorf("the write behind and the one waited for took %d transactions, want 1", n)
	}
	alone := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, StepWrite{Status: instance.StepSucceeded, Seq: 3, End: true,
		Timeline: []instance.TimelineEvent{}}).Behind()
	start := time.Now()
	w.Submit(alone)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := alone.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("a write behind alone went out after %v, before its linger", d)
	}
}

func isDone(op *Op) bool {
	select {
	case <-op.Done():
		return true
	default:
		return false
	}
}

// A refused write fails the writes ordered after it, however long the
// chain: here the second writes the same row as the first (so it waits
// for the next batch) and the third follows the second. Each fails,
// unwritten, with ErrPredecessorFailed wrapping the first's error, at
// once rather than at the next op someone submits.
func TestWriterFailsAChainAfterARefusedWrite(t *testing.T) {
	t.Parallel()
	db, _, ref1, ref2 := writerFixture(t)
	ctx := context.Background()
	w := NewWriter(db, WriterConfig{})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	running := func(seq int64) StepWrite {
		return StepWrite{Status: instance.StepRunning, Seq: seq, Timeline: []instance.TimelineEvent{}}
	}
	refused := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, running(9)) // the stored seq is 1
	sameRow := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, running(2)).After(refused)
	other := UpdateStepOp(ctx, ref2, 1, 7, "s", 1, running(2)).After(sameRow)
	w.Submit(refused, sameRow, other)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := refused.Wait(waitCtx); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("refused write: %v", err)
	}
	for _, op := range []*Op{sameRow, other} {
		if err := op.Wait(waitCtx); !errors.Is(err, ErrPredecessorFailed) || !errors.Is(err, run.ErrFenced) {
			t.Errorf("write after the refused one: %v", err)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM step_instance WHERE seq = 2`); n != 0 {
		t.Errorf("%d writes after the refused one were written", n)
	}
}
