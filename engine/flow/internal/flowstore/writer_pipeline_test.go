package flowstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// With two pipelines, a write somebody waits for does not wait for a
// transaction in flight: here the first batch is held by a lock on its
// row, and a write of another run commits meanwhile in a second
// transaction. A run's writes never share two transactions at once: the
// write ordered after the held one is not sent while it is in flight, and
// commits after it, in a later transaction. A write behind alone opens no
// second transaction: it waits for the next commit.
func TestWriterPipelinesKeepEachRunsOrder(t *testing.T) {
	t.Parallel()
	h := holdFirstBatch(t, WriterConfig{Pipelines: 2, Linger: -1, RemoteCommit: -1})
	ctx, db, w, ref1, ref2, lock, held := h.ctx, h.db, h.w, h.ref1, h.ref2, h.lock, h.held
	next := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, StepWrite{Status: instance.StepSucceeded, Seq: 3, End: true,
		Timeline: []instance.TimelineEvent{}}).After(held)
	behind := InsertStepOp(ctx, ref2, 1, 7, "t", 1, "00000000-0000-0000-0000-0000000000b1", "NoOp",
		StepWrite{Status: instance.StepSucceeded, Seq: 1, Start: true, End: true, Timeline: []instance.TimelineEvent{}}).Behind()
	w.Submit(next, behind)
	time.Sleep(100 * time.Millisecond)
	if isDone(behind) || isDone(next) {
		t.Fatalf("written while the first transaction is held: behind done %v, ordered-after done %v", isDone(behind), isDone(next))
	}
	other := UpdateStepOp(ctx, ref2, 1, 7, "s", 1, running(2))
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Write(waitCtx, other); err != nil {
		t.Fatalf("a write of another run while one transaction is held: %v", err)
	}
	if err := behind.Wait(waitCtx); err != nil {
		t.Fatalf("the write behind, sent with the awaited one: %v", err)
	}
	w.mu.Lock()
	sent := next.sent
	w.mu.Unlock()
	if isDone(held) || sent {
		t.Fatalf("run 1's writes moved while its first is held: first done %v, the one after it sent %v", isDone(held), sent)
	}
	if n := count(t, db, `SELECT seq FROM step_instance WHERE instance_id = $1 AND step_id = 's'`, ref1.InstanceID); n != 1 {
		t.Fatalf("run 1's attempt at seq %d while its writes are held", n)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, op := range []*Op{held, next} {
		if err := op.Wait(waitCtx); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, db, `SELECT seq FROM step_instance WHERE instance_id = $1 AND step_id = 's'`, ref1.InstanceID); n != 3 {
		t.Errorf("run 1's attempt at seq %d, want 3", n)
	}
	if n := count(t, db, `SELECT count(DISTINCT xmin::text) FROM step_instance WHERE step_id IN ('s', 't')`); n != 2 {
		t.Errorf("%d transactions last wrote the attempts, want 2 (run 2's two writes in one, run 1's last in another)", n)
	}
}

// heldBatch is a writer whose first batch, an update of run 1's attempt,
// is in flight and held by a lock on the attempt's row (lock).
type heldBatch struct {
	ctx        context.Context
	db         *pgxpool.Pool
	w          *Writer
	ref1, ref2 run.Ref
	lock       pgx.Tx
	held       *Op
}

func holdFirstBatch(t *testing.T, cfg WriterConfig) heldBatch {
	t.Helper()
	db, _, ref1, ref2 := writerFixture(t)
	ctx := context.Background()
	w := NewWriter(db, cfg)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	held := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, running(2))
	lock := submitHeld(t, ctx, db, w, held, "the held batch")
	return heldBatch{ctx: ctx, db: db, w: w, ref1: ref1, ref2: ref2, lock: lock, held: held}
}

// submitHeld locks the step rows op writes, in a transaction of its own
// that the test ends (lock), submits op and waits until its batch is the
// one in flight, held by that lock.
func submitHeld(t *testing.T, ctx context.Context, db *pgxpool.Pool, w *Writer, op *Op, what string) (lock pgx.Tx) {
	t.Helper()
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(ctx) })
	if _, err := lock.Exec(ctx, `SELECT 1 FROM step_instance WHERE instance_id = $1 FOR UPDATE`, op.ref.InstanceID); err != nil {
		t.Fatal(err)
	}
	w.Submit(op)
	waitUntil(t, what+" to be in flight", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.inflight == 1 && op.sent
	})
	return lock
}

// running is an attempt's RUNNING write at seq.
func running(seq int64) StepWrite {
	return StepWrite{Status: instance.StepRunning, Seq: seq, Timeline: []instance.TimelineEvent{}}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The writer opens its further pipelines only while its fastest recent
// commit (this window's and the previous one's) is as slow as a database a
// network away: a fast commit keeps it at one transaction for two windows.
func TestWriterOpensPipelinesOnlyForARemoteDatabase(t *testing.T) {
	w := NewWriter(nil, WriterConfig{Pipelines: 2})
	remote := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.remote()
	}
	if remote() {
		t.Fatal("remote before any commit")
	}
	for range commitWindow {
		w.committed(2 * time.Millisecond)
	}
	if !remote() {
		t.Fatal("not remote after a window of 2 ms commits")
	}
	w.committed(100 * time.Microsecond)
	if remote() {
		t.Fatal("remote right after a 100 µs commit")
	}
	for range 2 * commitWindow {
		w.committed(3 * time.Millisecond)
	}
	if !remote() {
		t.Fatal("still near after two windows of 3 ms commits")
	}
	if always := NewWriter(nil, WriterConfig{Pipelines: 2, RemoteCommit: -1}); !always.remote() {
		t.Fatal("RemoteCommit < 0 is not always remote")
	}
}

// Near the database (no commit as slow as RemoteCommit) and without
// AwaitedWait (the default), a second pipeline stays closed: a write of
// another run waits for the transaction in flight, however long it takes.
func TestWriterNearTheDatabaseKeepsOneTransaction(t *testing.T) {
	t.Parallel()
	h := holdFirstBatch(t, WriterConfig{Pipelines: 2, Linger: -1, RemoteCommit: time.Hour})
	ctx, w, ref2, lock, held := h.ctx, h.w, h.ref2, h.lock, h.held
	other := UpdateStepOp(ctx, ref2, 1, 7, "s", 1, running(2))
	w.Submit(other)
	time.Sleep(100 * time.Millisecond)
	if isDone(other) {
		t.Fatal("a second transaction went out near the database")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, op := range []*Op{held, other} {
		if err := op.Wait(waitCtx); err != nil {
			t.Fatal(err)
		}
	}
}

// Near the database, a transaction in flight holds back a write somebody
// waits for at most AwaitedWait: then a second transaction takes it, with
// the writes of its run queued before it (a run's start written behind,
// then its first step's recorded intent), in their order. A write behind
// alone opens none, and the held run's writes stay where they are.
func TestWriterAwaitedWriteDoesNotWaitForASlowTransaction(t *testing.T) {
	t.Parallel()
	const wait = 200 * time.Millisecond
	h := holdFirstBatch(t, WriterConfig{Pipelines: 2, Linger: -1, RemoteCommit: time.Hour, AwaitedWait: wait})
	ctx, db, w, ref1, ref2, lock, held := h.ctx, h.db, h.w, h.ref1, h.ref2, h.lock, h.held
	behind := InsertStepOp(ctx, ref2, 1, 7, "t", 1, "00000000-0000-0000-0000-0000000000b2", "NoOp",
		StepWrite{Status: instance.StepSucceeded, Seq: 1, Start: true, End: true, Timeline: []instance.TimelineEvent{}}).Behind()
	w.Submit(behind)
	time.Sleep(2 * wait)
	if isDone(behind) {
		t.Fatal("a write behind alone went out in a second transaction")
	}
	intent := UpdateStepOp(ctx, ref2, 1, 7, "s", 1, running(2)).After(behind)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Write(waitCtx, intent); err != nil {
		t.Fatalf("a write somebody waits for, while a transaction is held: %v", err)
	}
	if err := behind.Wait(waitCtx); err != nil {
		t.Fatalf("the write behind it was ordered after: %v", err)
	}
	if isDone(held) {
		t.Fatal("the held transaction committed while its row was locked")
	}
	if n := count(t, db, `SELECT count(DISTINCT xmin::text) FROM step_instance WHERE instance_id = $1 AND step_id IN ('s', 't')`, ref2.InstanceID); n != 1 {
		t.Errorf("run 2's two writes in %d transactions, want 1", n)
	}

	// A write somebody waits for that arrives just after a transaction
	// went out waits AwaitedWait for it before a second one opens.
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
	held2 := UpdateStepOp(ctx, ref1, 0, 5, "s", 1, running(3))
	lock2 := submitHeld(t, ctx, db, w, held2, "the second held batch")
	w.mu.Lock()
	heldSent := w.lastSent
	w.mu.Unlock()
	end := UpdateStepOp(ctx, ref2, 1, 7, "s", 1, StepWrite{Status: instance.StepSucceeded, Seq: 3, End: true,
		Timeline: []instance.TimelineEvent{}})
	if err := w.Write(waitCtx, end); err != nil {
		t.Fatalf("a write somebody waits for, while the second batch is held: %v", err)
	}
	if waited := time.Since(heldSent); waited < wait {
		t.Errorf("a second transaction opened %v after the first went out, before AwaitedWait (%v)", waited, wait)
	}
	if isDone(held2) {
		t.Fatal("the second held transaction committed while its row was locked")
	}
	if err := lock2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held2.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT seq FROM step_instance WHERE instance_id = $1 AND step_id = 's'`, ref1.InstanceID); n != 3 {
		t.Errorf("run 1's attempt at seq %d, want 3", n)
	}
}
