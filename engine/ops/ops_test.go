package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/ops"
)

// auditEvents returns the ALERT events of operator actions in the outbox.
func auditEvents(t *testing.T, pool *pgxpool.Pool) []map[string]any {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT payload::text FROM maestro_event WHERE kind = 9 AND workflow_id = $1 ORDER BY tx, event_id`, ops.AuditWorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func addNode(t *testing.T, pool *pgxpool.Pool, id string, live bool) {
	t.Helper()
	expires := "now() + interval '1 hour'"
	if !live {
		expires = "now() - interval '1 minute'"
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO engine_node (node_id, heartbeat_at, expires_at) VALUES ($1, now(), `+expires+`)`, id); err != nil {
		t.Fatal(err)
	}
}

// Draining marks the node, refuses an unknown or dead node and the last
// node that is not draining (unless forced), and each change is audited
// in operator_action and as an OPERATOR_ACTION alert event.
func TestDrainIsCheckedAndAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := ops.New(pool)
	addNode(t, pool, "a", true)
	addNode(t, pool, "b", true)
	addNode(t, pool, "dead", false)

	if err := s.Drain(ctx, "ghost", true, false, "alice", ""); !errors.Is(err, ops.ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}
	if err := s.Drain(ctx, "dead", true, false, "alice", ""); !errors.Is(err, ops.ErrUnknownNode) {
		t.Errorf("expired node: %v", err)
	}
	if err := s.Drain(ctx, "a", true, false, "alice", "patching the host"); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx, "b", true, false, "alice", ""); !errors.Is(err, ops.ErrLastNode) {
		t.Errorf("last node: %v, want ErrLastNode", err)
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || !nodes[0].Draining || nodes[1].Draining {
		t.Errorf("nodes = %+v, want a draining and b not", nodes)
	}
	if err := s.Drain(ctx, "b", true, true, "bob", "forced"); err != nil {
		t.Errorf("forced: %v", err)
	}
	if err := s.Drain(ctx, "a", false, false, "alice", ""); err != nil {
		t.Fatal(err)
	}
	acts, err := s.Actions(ctx, time.Now().Add(-time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 3 || acts[0].Action != ops.ActionUndrain || acts[1].Actor != "bob" || acts[2].Target != "a" ||
		acts[2].Detail["reason"] != "patching the host" {
		t.Errorf("audit log = %+v, want drain a, drain b (forced), undrain a; newest first", acts)
	}
	evs := auditEvents(t, pool)
	if len(evs) != 3 {
		t.Fatalf("%d audit events, want 3 (refused commands record nothing): %v", len(evs), evs)
	}
	if evs[0]["alert_type"] != ops.AlertType || evs[0]["status"] != ops.ActionDrain ||
		evs[0]["reason"] != "alice ran drain on a: patching the host" {
		t.Errorf("first audit event = %v", evs[0])
	}
}

// Pausing and resuming triggers flips the maintenance row, says what it
// was before, and is audited; TriggersPaused reads it.
func TestTriggersPauseAndResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := ops.New(pool)
	if paused, err := ops.TriggersPaused(ctx, pool); err != nil || paused {
		t.Fatalf("a new deployment: paused = %v, %v", paused, err)
	}
	before, err := s.SetTriggersPaused(ctx, true, "carol", "database upgrade")
	if err != nil || before {
		t.Fatalf("pause: before = %v, %v", before, err)
	}
	m, err := s.Maintenance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !m.TriggersPaused || m.PausedBy != "carol" || m.Reason != "database upgrade" || m.PausedAt == nil {
		t.Errorf("maintenance = %+v", m)
	}
	if paused, _ := ops.TriggersPaused(ctx, pool); !paused {
		t.Error("TriggersPaused = false after a pause")
	}
	if before, err := s.SetTriggersPaused(ctx, true, "carol", ""); err != nil || !before {
		t.Errorf("pause again: before = %v, %v", before, err)
	}
	if before, err := s.SetTriggersPaused(ctx, false, "dave", ""); err != nil || !before {
		t.Errorf("resume: before = %v, %v", before, err)
	}
	m, _ = s.Maintenance(ctx)
	if m.TriggersPaused || m.PausedBy != "" || m.PausedAt != nil {
		t.Errorf("after resume: %+v", m)
	}
	if evs := auditEvents(t, pool); len(evs) != 3 || evs[2]["status"] != ops.ActionResumeTriggers {
		t.Errorf("audit events = %v, want pause, pause, resume", evs)
	}
}

// Stuck runs: a live run whose group no live engine holds is listed after
// the unowned grace, one whose group is held only once idle long enough;
// finished runs never.
func TestStuckRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := ops.New(pool)
	if _, err := pool.Exec(ctx, `INSERT INTO flow_group (group_id, owner, expires_at) VALUES
		(0, 'n1', now() + interval '1 hour'), (1, NULL, NULL) ON CONFLICT (group_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at`); err != nil {
		t.Fatal(err)
	}
	insert := func(instance int, group int, status string, age string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid, group_count, group_id,
			status, definition, timeout_seconds, modify_time)
			VALUES ('wf', $1, 1, 1, gen_random_uuid(), 2, $2, $3, '{}', 0, now() - $4::interval)`, instance, group, status, age); err != nil {
			t.Fatal(err)
		}
	}
	insert(1, 0, "IN_PROGRESS", "1 minute") // held, recent
	insert(2, 0, "IN_PROGRESS", "2 hours")  // held, idle
	insert(3, 1, "IN_PROGRESS", "1 minute") // unowned
	insert(4, 1, "IN_PROGRESS", "1 second") // unowned, within the grace
	insert(5, 1, "SUCCEEDED", "3 hours")    // finished
	if _, err := pool.Exec(ctx, `INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, step_type, modify_time)
		VALUES ('wf', 2, 1, 's', 1, gen_random_uuid(), 'WAITING_FOR_SIGNALS', 'NoOp', now() - interval '2 hours')`); err != nil {
		t.Fatal(err)
	}
	runs, err := s.StuckRuns(ctx, 15*time.Minute, 30*time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("stuck = %+v, want instances 2 and 3", runs)
	}
	if r := runs[0]; r.InstanceID != 2 || r.Reason != ops.ReasonNoProgress || r.Owner != "n1" || len(r.Waiting) != 1 || r.Waiting[0] != "WAITING_FOR_SIGNALS" {
		t.Errorf("first = %+v", r)
	}
	if r := runs[1]; r.InstanceID != 3 || r.Reason != ops.ReasonUnowned || r.Owner != "" {
		t.Errorf("second = %+v", r)
	}
}

// A pause waits for a batch under way (one that read "not paused"), and a
// batch that begins after the pause committed sees it: no trigger fires
// after the pause command returns.
func TestPauseWaitsForBatchesUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	s := ops.New(pool)
	batch, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Rollback(ctx) //nolint:errcheck
	if paused, err := ops.TriggersPausedLocked(ctx, batch); err != nil || paused {
		t.Fatalf("batch before the pause: paused = %v, %v", paused, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.SetTriggersPaused(ctx, true, "ops", "")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the pause returned (%v) while a batch that read \"not paused\" was under way", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := batch.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pause did not return once the batch ended")
	}
	next, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Rollback(ctx) //nolint:errcheck
	if paused, err := ops.TriggersPausedLocked(ctx, next); err != nil || !paused {
		t.Errorf("batch after the pause: paused = %v, %v", paused, err)
	}
}
