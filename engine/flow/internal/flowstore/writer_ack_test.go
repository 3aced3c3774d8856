package flowstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// A start that acknowledges its message (Op.Acks) deletes it in its own
// transaction while its group is held at the start's generation, whether
// the start was written or refused by its run's guard (a run no longer
// CREATED: the message is done with either way); a start fenced off by a
// newer generation deletes nothing, and neither does one whose message
// another node has claimed since.
func TestStartAcksItsMessageInItsTransaction(t *testing.T) {
	db, s, inProgress, _ := writerFixture(t)
	ctx := context.Background()
	created := []run.Ref{{WorkflowID: "wf", InstanceID: 11, RunID: 1}, {WorkflowID: "wf", InstanceID: 12, RunID: 1},
		{WorkflowID: "wf", InstanceID: 13, RunID: 1}, {WorkflowID: "wf", InstanceID: 14, RunID: 1},
		{WorkflowID: "wf", InstanceID: 15, RunID: 1}, {WorkflowID: "wf", InstanceID: 16, RunID: 1},
		{WorkflowID: "wf", InstanceID: 17, RunID: 1}}
	for i, ref := range created {
		if _, err := db.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
                group_count, group_id, status, definition, timeout_seconds)
            VALUES ($1, $2, 1, 1, gen_random_uuid(), 2, $3, 'CREATED', '{"id":"wf","steps":[]}', 60)`,
			ref.WorkflowID, ref.InstanceID, i%2); err != nil {
			t.Fatal(err)
		}
	}
	qs := queue.NewStore(db)
	claim := func(group int32, node string) queue.Message {
		t.Helper()
		m, err := queue.Enqueue(ctx, db, queue.StartWorkflow, group, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		c, ok, err := qs.Claim(ctx, m.Queue, m.ID, node, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		return c
	}
	left := func(m queue.Message) bool {
		return count(t, db, `SELECT count(*) FROM maestro_queue WHERE queue_id = $1 AND message_id = $2`, m.Queue, m.ID) == 1
	}
	status := func(ref run.Ref) string {
		var st string
		if err := db.QueryRow(ctx, `SELECT status FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
			ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	// Written: the run starts and its message is gone, in one commit.
	m := claim(0, "me")
	if err := s.Write(ctx, StartOp(ctx, created[0], 0, 5, "me", nil, nil).Acks(m, "me")); err != nil {
		t.Fatal(err)
	}
	if status(created[0]) != "IN_PROGRESS" || left(m) {
		t.Fatalf("written start: run %s, message left %v; want IN_PROGRESS and gone", status(created[0]), left(m))
	}

	// Fenced off: group 1 is at generation 7, not 6.
	m = claim(1, "me")
	if err := s.Write(ctx, StartOp(ctx, created[1], 1, 6, "me", nil, nil).Acks(m, "me")); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("fenced start: %v, want run.ErrFenced", err)
	}
	if status(created[1]) != "CREATED" || !left(m) {
		t.Fatalf("fenced start: run %s, message left %v; want CREATED and left for the group's owner", status(created[1]), left(m))
	}

	// Refused by the run's guard (IN_PROGRESS already) with the group held:
	// the message is done with.
	m = claim(0, "me")
	if err := s.Write(ctx, StartOp(ctx, inProgress, 0, 5, "me", nil, nil).Acks(m, "me")); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("start of a started run: %v, want run.ErrFenced", err)
	}
	if left(m) {
		t.Fatal("start of a started run: its message was left")
	}

	// Claimed by another node since: not this node's to delete.
	m = claim(0, "other")
	if err := s.Write(ctx, StartOp(ctx, created[2], 0, 5, "me", nil, nil).Acks(m, "me")); err != nil {
		t.Fatal(err)
	}
	if !left(m) {
		t.Fatal("a message claimed by another node was deleted")
	}

	// Handled from its notification, unclaimed (queue.WorkerConfig.Noted):
	// written, the run starts and its message goes with it; fenced off,
	// both stay (created[5] is in group 1, at generation 7).
	unclaimed := func(group int32) queue.Message {
		t.Helper()
		m, err := queue.Enqueue(ctx, db, queue.StartWorkflow, group, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m = unclaimed(0)
	if err := s.Write(ctx, StartOp(ctx, created[4], 0, 5, "me", nil, nil).Acks(m, "me")); err != nil {
		t.Fatal(err)
	}
	if status(created[4]) != "IN_PROGRESS" || left(m) {
		t.Fatalf("unclaimed start: run %s, message left %v; want IN_PROGRESS and gone", status(created[4]), left(m))
	}
	m = unclaimed(1)
	if err := s.Write(ctx, StartOp(ctx, created[5], 1, 6, "me", nil, nil).Acks(m, "me")); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("fenced unclaimed start: %v, want run.ErrFenced", err)
	}
	if status(created[5]) != "CREATED" || !left(m) {
		t.Fatalf("fenced unclaimed start: run %s, message left %v; want CREATED and left", status(created[5]), left(m))
	}
	// Claimed by a sweep of another node meanwhile (its claim live): left
	// to it, though the run's guard let this start through.
	m = unclaimed(0)
	if _, ok, err := qs.Claim(ctx, m.Queue, m.ID, "other", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := s.Write(ctx, StartOp(ctx, created[6], 0, 5, "me", nil, nil).Acks(queue.Message{Queue: m.Queue, ID: m.ID}, "me")); err != nil {
		t.Fatal(err)
	}
	if !left(m) {
		t.Fatal("an unclaimed start deleted a message another node has claimed since")
	}
}
