package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
)

// incrementalKillWorkflow's incremental trigger listens to sales.orders;
// each run sleeps long enough for changes to arrive while it is in flight.
const incrementalKillWorkflow = `{"properties":{"owner":"tester"},"workflow":{"id":"incr-kill",
	"signal_triggers":[{"incremental":true,"definitions":{"sales.orders":{}}}],
	"steps":[{"step":{"id":"work","type":"Sleep","sleep_seconds":1.5}}]}}`

func killCommit(i int) tablechange.Change {
	id := func(i int) int64 {
		if i == 0 {
			return 0
		}
		return int64(900_000_000_000 - i*7_919)
	}
	return tablechange.Change{Table: tablechange.TableRef{Namespace: "sales", Table: "orders"}, SnapshotID: id(i),
		ParentSnapshotID: id(i - 1), CommitTime: time.UnixMilli(1_790_000_000_000 + int64(i)*1000), Operation: tablechange.Append}
}

// Kill -9 the only engine between an incremental run's success and the
// start of the next run: changes 2 and 3 arrived while run 1 (change 1)
// was in flight; run 1 SUCCEEDED (the watermark moved with its terminal
// state) and the engine's sweep has planned the next range inside its
// transaction when it dies. Restarted, the sweep starts exactly one run
// for (1, 3]; change 4 then starts (3, 4]. The succeeded ranges chain
// from the table's beginning to change 4, each change in exactly one.
func TestKilledEngineLosesAndDoublesNoIncrementalRange(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	f := pushAndStart(t, dsn, 0, incrementalKillWorkflow)
	broker := signalbroker.New(f.pool, f.runs, nil)
	announce := func(i int) signalbroker.Stats {
		t.Helper()
		c := killCommit(i)
		res, stats, err := broker.Announce(ctx, []signal.Request{{Name: c.Table.String(), Params: c.SignalParams()}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("announce change %d: %v %v", i, err, res[0].Err)
		}
		return stats
	}
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := f.pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	watermark := func() incremental.Watermark {
		t.Helper()
		ws, err := incremental.List(ctx, f.pool, "incr-kill")
		if err != nil || len(ws) != 1 {
			t.Fatalf("watermarks %+v %v", ws, err)
		}
		return ws[0]
	}

	first := engineProcess(t, dsn, "n1", "4", "MAESTRO_TEST_SIGNAL_PAUSE=2m", "MAESTRO_SIGNAL_SWEEP=100ms")
	if stats := announce(1); stats.Started != 1 {
		t.Fatalf("change 1 started %d runs", stats.Started)
	}
	for i := 2; i <= 3; i++ {
		if stats := announce(i); stats.Started != 0 {
			t.Fatalf("change %d started a run while run 1 was in flight", i)
		}
	}
	// Run 1 succeeded and the sweep holds the watermark's row, the next
	// range planned, inside its open transaction.
	waitUntil(t, 60*time.Second, "the sweep planning the next range after run 1 succeeded", func() bool {
		w := watermark()
		var free int
		if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM incremental_watermark
			WHERE workflow_id = 'incr-kill' FOR UPDATE SKIP LOCKED) x`).Scan(&free); err != nil {
			t.Fatal(err)
		}
		return w.SnapshotID == killCommit(1).SnapshotID && free == 0
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if n := count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'incr-kill'`); n != 1 {
		t.Fatalf("%d runs after the kill, want 1 (the next range was not committed)", n)
	}
	if w := watermark(); w.InFlight != nil || w.LatestSnapshotID != killCommit(3).SnapshotID {
		t.Fatalf("watermark after the kill %+v", w)
	}

	engineProcess(t, dsn, "n1", "4", "MAESTRO_SIGNAL_SWEEP=100ms")
	waitUntil(t, 60*time.Second, "run 2 covering changes 2 and 3 succeeded", func() bool {
		return watermark().SnapshotID == killCommit(3).SnapshotID
	})
	announce(4)
	waitUntil(t, 60*time.Second, "the watermark at change 4", func() bool {
		w := watermark()
		return w.SnapshotID == killCommit(4).SnapshotID && w.InFlight == nil
	})

	rs, err := incremental.Runs(ctx, f.pool, "incr-kill", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'incr-kill'`) != 3 {
		t.Fatalf("ranges %+v: want 3 runs, one per range", rs)
	}
	// Newest first: (3, 4], (1, 3], (0, 1].
	want := [][2]int{{3, 4}, {1, 3}, {0, 1}}
	for k, r := range rs {
		if r.State != "SUCCEEDED" || r.FromSnapshotID != killCommit(want[k][0]).SnapshotID ||
			r.ToSnapshotID != killCommit(want[k][1]).SnapshotID {
			t.Errorf("range %d: %+v, want (%d, %d] SUCCEEDED", k, r, want[k][0], want[k][1])
		}
	}
	if rs[1].SnapshotCount != 2 || rs[0].SnapshotCount != 1 || rs[2].SnapshotCount != 1 {
		t.Errorf("snapshot counts %d %d %d, want 1 2 1", rs[2].SnapshotCount, rs[1].SnapshotCount, rs[0].SnapshotCount)
	}
}
