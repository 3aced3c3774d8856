package signalbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// BenchmarkIncremental measures the incremental trigger's costs: a table
// change that starts a run (recorded, range planned, run created and
// marked in flight, in the signal's transaction), one that arrives while a
// run is in flight (recorded only), and a sweep with nothing owed (what
// every engine process pays each sweep when no range waits).
func BenchmarkIncremental(b *testing.B) {
	e := newEnv(b)
	e.PushAs(incrementalWorkflow("incr-bench"), "o")
	ctx := context.Background()
	seq := 0
	next := func() signal.Request {
		seq++
		c := tablechange.Change{Table: tablechange.TableRef{Namespace: "sales", Table: "orders"}, SnapshotID: int64(1_000_000 + seq),
			CommitTime: time.UnixMilli(1_790_000_000_000 + int64(seq)), Operation: tablechange.Append}
		return changeSignal(c)
	}
	announce := func(b *testing.B, wantStarted int) time.Duration {
		req := next()
		t0 := time.Now()
		_, stats, err := e.broker.Announce(ctx, []signal.Request{req})
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if stats.Started != wantStarted {
			b.Fatalf("started %d, want %d", stats.Started, wantStarted)
		}
		return d
	}
	// free ends the run in flight (no engine here): the table is free again.
	free := func(b *testing.B) {
		if _, err := e.Pool.Exec(ctx, `UPDATE incremental_watermark SET inflight_instance_id = NULL,
			snapshot_id = attempted_snapshot_id, commit_time = attempted_commit_time`); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Pool.Exec(ctx, `DELETE FROM workflow_instance`); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("change-starts-a-run", func(b *testing.B) {
		var busy time.Duration
		for b.Loop() {
			busy += announce(b, 1)
			free(b)
		}
		b.ReportMetric(float64(busy.Microseconds())/float64(b.N), "µs/change")
	})
	b.Run("change-while-in-flight", func(b *testing.B) {
		// With -count, this runs again after itself: the run of the
		// round before is still in flight.
		free(b)
		announce(b, 1)
		var busy time.Duration
		for b.Loop() {
			busy += announce(b, 0)
		}
		b.ReportMetric(float64(busy.Microseconds())/float64(b.N), "µs/change")
	})
	b.Run("idle-sweep", func(b *testing.B) {
		if _, err := e.Pool.Exec(ctx, `UPDATE incremental_watermark SET attempted_snapshot_id = latest_snapshot_id,
			attempted_commit_time = latest_commit_time`); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if started, _, err := e.broker.ProcessIncremental(ctx, 100); err != nil || started != 0 {
				b.Fatalf("sweep started %d: %v", started, err)
			}
		}
	})
}
