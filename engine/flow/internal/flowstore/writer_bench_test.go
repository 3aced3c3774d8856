package flowstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// BenchmarkWriter: the engine's step writes through the per-node writer,
// without the rest of the engine: 200 writers at once, each writing
// attempts as a NoOp step does (an insert up to STARTING, an update to
// SUCCEEDED, each with its event), waiting for each commit. Reports
// steps/s, the CPU of this process and of PostgreSQL per step, the WAL per
// step and the ops per transaction.
func BenchmarkWriter(b *testing.B) {
	const writers, stepsPerWriter = 200, 20
	db := dbtest.Pool(b)
	ctx := context.Background()
	s := New(db, nil)
	if err := s.EnsureGroups(ctx, 4); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE flow_group SET owner = 'me', generation = 1, expires_at = now() + interval '1 hour'`); err != nil {
		b.Fatal(err)
	}
	for i := range writers {
		if _, err := db.Exec(ctx, `INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid,
                group_count, group_id, status, definition, timeout_seconds, generation)
            VALUES ('wf', $1, 1, 1, gen_random_uuid(), 4, $2, 'IN_PROGRESS', '{"id":"wf","steps":[]}', 60, 1)`, i+1, i%4); err != nil {
			b.Fatal(err)
		}
	}
	w := NewWriter(db, WriterConfig{})
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ri := run.NewRunInfo(&workflow.Workflow{ID: "wf"}, "5f0c2a7e-1b1d-4c33-9d6e-2f4b8a9c0d11", "wf:1:1", 0)
	var round int
	var steps, txs float64
	var cpu, dbCPU, elapsed time.Duration
	var wal float64
	b.ResetTimer()
	for b.Loop() {
		round++
		var lsn0 string
		if err := db.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
			b.Fatal(err)
		}
		var xact0 int64
		if err := db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&xact0); err != nil {
			b.Fatal(err)
		}
		cpu0, db0, start := dbtest.ProcessCPU(), dbtest.ServerCPU(), time.Now()
		var wg sync.WaitGroup
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ref := run.Ref{WorkflowID: "wf", InstanceID: int64(i + 1), RunID: 1}
				for j := range stepsPerWriter {
					id, stepUUID := fmt.Sprintf("r%d-s%d", round, j), uuid.NewString()
					tl := []instance.TimelineEvent{}
					for _, st := range []instance.StepStatus{instance.StepCreated, instance.StepInitialized, instance.StepWaitingForSignals,
						instance.StepEvaluatingParams, instance.StepWaitingForPermits, instance.StepStarting} {
						tl = append(tl, instance.StatusChange(string(st), "")...)
					}
					sw := StepWrite{Status: instance.StepStarting, Seq: 1, Timeline: tl, Start: true,
						Event: ri.StepEvent(ref, id, 1, stepUUID, instance.StepNotCreated, 1, tl)}
					if err := w.Write(ctx, InsertStepOp(ctx, ref, int32(i%4), 1, id, 1, stepUUID, "NoOp", sw)); err != nil {
						b.Error(err)
						return
					}
					tl = slices.Concat(instance.StatusChange("RUNNING", ""), instance.StatusChange("FINISHING", ""),
						instance.StatusChange("SUCCEEDED", ""))
					sw = StepWrite{Status: instance.StepSucceeded, Seq: 2, Timeline: tl, End: true,
						Event: ri.StepEvent(ref, id, 1, stepUUID, instance.StepStarting, 2, tl)}
					if err := w.Write(ctx, UpdateStepOp(ctx, ref, int32(i%4), 1, id, 1, sw)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		cpu += dbtest.ProcessCPU() - cpu0
		dbCPU += dbtest.ServerCPU() - db0
		var bytes float64
		if err := db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn0).Scan(&bytes); err != nil {
			b.Fatal(err)
		}
		wal += bytes
		var xact1 int64
		if err := db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&xact1); err != nil {
			b.Fatal(err)
		}
		txs += float64(xact1 - xact0)
		steps += writers * stepsPerWriter
	}
	b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(cpu.Microseconds())/steps, "cpu-µs/step")
	b.ReportMetric(float64(dbCPU.Microseconds())/steps, "db-cpu-µs/step")
	b.ReportMetric(wal/steps, "wal-bytes/step")
	b.ReportMetric(2*steps/txs, "ops/tx")
}
