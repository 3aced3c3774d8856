package flowtest

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
)

// ChainFigures runs workflowID, a chain of steps steps, b.N times, one
// run at a time, and reports what a chained step costs against the floor
// of a durable commit measured in the same run (issue 28):
//   - ms/step: the run's server time (start_time to end_time, the
//     timestamps of its start write and its end write) over its steps;
//   - floor-commit-ms: the median of the cheapest durable commit (one round
//     trip, one WAL flush) through the same connection pool;
//   - commit-ratio: ms/step over floor-commit-ms, "durable commits per
//     step" as time;
//   - commits/step: transactions that wrote (transaction ids taken, by
//     anyone: the engine's batches, heartbeats, the start), per step;
//   - idle-commits/s: the same, with the engine idle (heartbeats), over a
//     second before the runs; run-commits/step: commits/step less those,
//     at that rate, over the runs' wall time.
func (e *Env) ChainFigures(b *testing.B, workflowID string, steps int) {
	b.Helper()
	ctx := context.Background()
	// One run first, untimed: the pool's connections and their prepared
	// statements are made then, not in a measured run.
	if inst := e.Wait(e.Start(workflowID), 2*time.Minute); inst.Status != instance.WorkflowSucceeded {
		b.Fatalf("run ended %s", inst.Status)
	}
	floor, err := dbtest.CommitFloor(ctx, e.Pool, 500)
	if err != nil {
		b.Fatal(err)
	}
	i0, err := dbtest.WriteXacts(ctx, e.Pool)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second)
	i1, err := dbtest.WriteXacts(ctx, e.Pool)
	if err != nil {
		b.Fatal(err)
	}
	idle := float64(i1 - i0)
	var server, wall time.Duration
	var xacts int64
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		x0, err := dbtest.WriteXacts(ctx, e.Pool)
		if err != nil {
			b.Fatal(err)
		}
		inst := e.Wait(e.Start(workflowID), 2*time.Minute)
		if inst.Status != instance.WorkflowSucceeded {
			b.Fatalf("run ended %s", inst.Status)
		}
		x1, err := dbtest.WriteXacts(ctx, e.Pool)
		if err != nil {
			b.Fatal(err)
		}
		xacts += x1 - x0
		wall += time.Since(t0)
		server += e.serverTime(b, inst)
	}
	b.StopTimer()
	n := float64(b.N * steps)
	perStep := float64(server) / float64(time.Millisecond) / n
	floorMS := float64(floor) / float64(time.Millisecond)
	b.ReportMetric(perStep, "ms/step")
	b.ReportMetric(floorMS, "floor-commit-ms")
	b.ReportMetric(perStep/floorMS, "commit-ratio")
	b.ReportMetric(float64(xacts)/n, "commits/step")
	b.ReportMetric(idle, "idle-commits/s")
	b.ReportMetric((float64(xacts)-idle*wall.Seconds())/n, "run-commits/step")
}

// serverTime is a run's time from its start write to its end write, by
// the database's clock.
func (e *Env) serverTime(b *testing.B, inst *execution.Instance) time.Duration {
	b.Helper()
	var us float64
	err := e.Pool.QueryRow(context.Background(), `SELECT extract(epoch FROM end_time - start_time) * 1e6
        FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
		inst.WorkflowID, inst.InstanceID, inst.RunID).Scan(&us)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(us * float64(time.Microsecond))
}
