package flowstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func countEvents(t *testing.T, db *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM maestro_event`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A state write and its event are one statement: a write that is refused
// (a stale generation, a seq or status that moved on, a write repeated
// after it committed but its acknowledgement was lost) records no event,
// and a start records CREATED -> IN_PROGRESS only for the write that makes
// that change.
func TestStateWritesRecordTheirEventOnce(t *testing.T) {
	t.Parallel()
	db := dbtest.Pool(t)
	ctx := context.Background()
	s := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.EnsureGroups(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE flow_group SET owner = 'me', generation = 5, expires_at = now() + interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
            group_count, group_id, status, definition, timeout_seconds)
        VALUES ('wf', 1, 1, 1, gen_random_uuid(), 1, 0, 'CREATED', '{"id":"wf","steps":[]}', 60)`); err != nil {
		t.Fatal(err)
	}
	ref := run.Ref{WorkflowID: "wf", InstanceID: 1, RunID: 1}
	ev := []byte(`{"workflow_id":"wf","type":"WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"}`)
	want := 0
	expect := func(what string) {
		t.Helper()
		if got := countEvents(t, db); got != want {
			t.Fatalf("after %s: %d events, want %d", what, got, want)
		}
	}

	if _, ok, err := s.StartFlow(ctx, ref, 0, 5, "me", nil, ev); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	want++
	expect("the start")
	if _, ok, err := s.StartFlow(ctx, ref, 0, 5, "me", nil, ev); err != nil || !ok {
		t.Fatalf("repeated start: %v %v", ok, err)
	}
	expect("a repeated start (a re-stamp, no status change)")
	if _, _, err := s.StartFlow(ctx, ref, 0, 4, "me", nil, ev); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("start by a stale generation: %v", err)
	}
	expect("a stale start")

	w := StepWrite{Status: instance.StepStarting, Seq: 1, Timeline: []instance.TimelineEvent{}, Event: ev}
	if err := s.Write(ctx, InsertStepOp(ctx, ref, 0, 5, "s", 1, "00000000-0000-0000-0000-000000000001", "NoOp", w)); err != nil {
		t.Fatal(err)
	}
	want++
	expect("a step insert")
	if err := s.Write(ctx, InsertStepOp(ctx, ref, 0, 5, "s", 1, "00000000-0000-0000-0000-000000000001", "NoOp", w)); err == nil {
		t.Fatal("a repeated insert succeeded")
	}
	expect("a repeated insert")
	if err := s.Write(ctx, InsertStepOp(ctx, ref, 0, 4, "s", 2, "00000000-0000-0000-0000-000000000002", "NoOp", w)); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("insert by a stale generation: %v", err)
	}
	expect("a stale insert")

	w.Status, w.Seq = instance.StepSucceeded, 2
	if err := s.Write(ctx, UpdateStepOp(ctx, ref, 0, 5, "s", 1, w)); err != nil {
		t.Fatal(err)
	}
	want++
	expect("a step update")
	if err := s.Write(ctx, UpdateStepOp(ctx, ref, 0, 5, "s", 1, w)); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("repeated update: %v", err)
	}
	expect("a repeated update")
	w.Seq = 3
	if err := s.Write(ctx, UpdateStepOp(ctx, ref, 0, 4, "s", 1, w)); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("update by a stale generation: %v", err)
	}
	expect("a stale update")
	w.Event = nil
	if err := s.Write(ctx, UpdateStepOp(ctx, ref, 0, 5, "s", 1, w)); err != nil {
		t.Fatalf("update without a status change: %v", err)
	}
	expect("an update without a status change")

	u := InstanceUpdate{From: instance.WorkflowInProgress, Status: instance.WorkflowSucceeded, End: true, Event: ev}
	if err := s.Write(ctx, UpdateInstanceOp(ctx, ref, 0, 5, u)); err != nil {
		t.Fatal(err)
	}
	want++
	expect("the end")
	if err := s.Write(ctx, UpdateInstanceOp(ctx, ref, 0, 5, u)); !errors.Is(err, run.ErrFenced) {
		t.Fatalf("repeated end: %v", err)
	}
	expect("a repeated end")
	var seq int64
	if err := db.QueryRow(ctx, `SELECT seq FROM maestro_event ORDER BY tx DESC, event_id DESC LIMIT 1`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if seq != 3 { // start, re-stamp, end
		t.Errorf("the end's event has seq %d, want the run's seq 3", seq)
	}
}

// BenchmarkStepWrites: what recording the event in the statement costs a
// step's two writes (the insert of CREATED ... STARTING and the update to
// SUCCEEDED), with the engine's real statements and payloads, without the
// rest of the engine around them.
func BenchmarkStepWrites(b *testing.B) {
	for _, events := range []bool{false, true} {
		b.Run(map[bool]string{false: "events=off", true: "events=on"}[events], func(b *testing.B) {
			db := dbtest.Pool(b)
			ctx := context.Background()
			s := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
			// The writer fences every row against its flow group's row: group
			// 0 held at generation 1.
			if err := s.EnsureGroups(ctx, 1); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec(ctx, `UPDATE flow_group SET owner = 'me', generation = 1, expires_at = now() + interval '1 hour'`); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
                    group_count, group_id, status, definition, timeout_seconds, generation)
                VALUES ('wf', 1, 1, 1, gen_random_uuid(), 1, 0, 'IN_PROGRESS', '{"id":"wf","steps":[]}', 60, 1)`); err != nil {
				b.Fatal(err)
			}
			ref := run.Ref{WorkflowID: "wf", InstanceID: 1, RunID: 1}
			ri := run.NewRunInfo(&workflow.Workflow{ID: "wf"}, "5f0c2a7e-1b1d-4c33-9d6e-2f4b8a9c0d11", "wf:1:1", 0)
			i := 0
			var lsn0 string
			if err := db.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				i++
				id, stepUUID := fmt.Sprintf("s%d", i), uuid.NewString()
				tl := []instance.TimelineEvent{}
				for _, st := range []instance.StepStatus{instance.StepCreated, instance.StepInitialized, instance.StepWaitingForSignals,
					instance.StepEvaluatingParams, instance.StepWaitingForPermits, instance.StepStarting} {
					tl = append(tl, instance.StatusChange(string(st), "")...)
				}
				w := StepWrite{Status: instance.StepStarting, Seq: 1, Timeline: tl, Start: true}
				if events {
					w.Event = ri.StepEvent(ref, id, 1, stepUUID, instance.StepNotCreated, 1, tl)
				}
				if err := s.Write(ctx, InsertStepOp(ctx, ref, 0, 1, id, 1, stepUUID, "NoOp", w)); err != nil {
					b.Fatal(err)
				}
				tl = slices.Concat(instance.StatusChange("RUNNING", ""), instance.StatusChange("FINISHING", ""),
					instance.StatusChange("SUCCEEDED", ""))
				w = StepWrite{Status: instance.StepSucceeded, Seq: 2, Timeline: tl, End: true}
				if events {
					w.Event = ri.StepEvent(ref, id, 1, stepUUID, instance.StepStarting, 2, tl)
				}
				if err := s.Write(ctx, UpdateStepOp(ctx, ref, 0, 1, id, 1, w)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
			// WAL written per step (the whole cluster's: run it alone).
			var wal float64
			if err := db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn0).Scan(&wal); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(wal/float64(b.N), "wal-bytes/step")
		})
	}
}
