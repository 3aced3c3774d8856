package signalbroker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// driveUntilEnded drives a backfill until it has ended and returns it.
func (e *env) driveUntilEnded(store *backfill.Store, id string) *backfill.Detail {
	e.T.Helper()
	var d *backfill.Detail
	waitFor(e.T.(*testing.T), "backfill "+id+" ended", func() bool {
		if _, err := store.Drive(context.Background()); err != nil {
			e.T.Fatal(err)
		}
		var err error
		if d, err = store.Get(context.Background(), id); err != nil {
			e.T.Fatal(err)
		}
		return d.Status != backfill.Running
	})
	return d
}

// A backfill over an incremental workflow walks snapshot ranges: by
// snapshot ids in runs of two snapshots, or by days mapped to the changes
// received; its runs get the range params and their ranges are recorded,
// and it never moves the watermark. One that would end after the
// watermark is refused unless it resets the watermark, which hands it the
// snapshots up to its end (refused while a live run is in flight): the
// live runs then go on after it, and no live range overlaps a backfill's.
func TestIncrementalBackfillWalksSnapshotRanges(t *testing.T) {
	t.Parallel()
	g := newGate()
	g.auto = true
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-backfill"))
	ctx := context.Background()
	store := backfill.NewStore(e.Pool, e.Defs, e.Runs)
	key := func(i int) *int64 { v := commit(i).SnapshotID; return &v }
	zero := int64(0)

	// Live: changes 1 to 6.
	for i := 1; i <= 6; i++ {
		e.announce(changeSignal(commit(i)))
	}
	waitFor(t, "watermark at 6", func() bool {
		w := e.watermark("incr-backfill")
		return w.SnapshotID == commit(6).SnapshotID && w.InFlight == nil
	})
	live := len(e.runs("incr-backfill"))

	b, _, err := store.Create(ctx, backfill.CreateRequest{WorkflowID: "incr-backfill", Concurrency: 2, Caller: "o",
		Spec: backfill.Spec{Incremental: &backfill.IncrementalSpec{Table: "sales.orders", FromSnapshotID: &zero,
			ToSnapshotID: key(6), SnapshotsPerRun: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Partitions != 3 || b.Format != backfill.FormatSnapshotRange {
		t.Fatalf("backfill %+v", b)
	}
	d := e.driveUntilEnded(store, b.ID)
	if d.Status != backfill.Succeeded {
		t.Fatalf("backfill %s", d.Status)
	}
	for k, p := range d.Partitions {
		want := incremental.RangeValue(commit(2*k).SnapshotID, commit(2*k+2).SnapshotID)
		if p.Value != want || p.InstanceID == nil {
			t.Fatalf("partition %d: %+v, want %s", k, p, want)
		}
		inst, err := e.Runs.Instance(ctx, "incr-backfill", *p.InstanceID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := e.rangeOf(inst); r.From != commit(2*k).SnapshotID || r.To != commit(2*k+2).SnapshotID || r.Count != 2 {
			t.Errorf("run of partition %d has range %+v", k, r)
		}
	}
	if n := e.count(`SELECT count(*) FROM incremental_run WHERE workflow_id = 'incr-backfill' AND backfill_id = $1
		AND state = 'SUCCEEDED'`, b.ID); n != 3 {
		t.Errorf("%d succeeded backfill ranges, want 3", n)
	}
	if w := e.watermark("incr-backfill"); w.SnapshotID != commit(6).SnapshotID || w.RunsStarted != int64(live) {
		t.Errorf("a backfill moved the watermark: %+v", w)
	}

	// A live run in flight for (6, 7]: a backfill ending at 7 is after the
	// watermark; resetting it waits for the live run.
	g.mu.Lock()
	g.auto = false
	g.mu.Unlock()
	e.announce(changeSignal(commit(7)))
	liveRun := e.waitRuns("incr-backfill", live+4)[live+3]
	_, _, err = store.Create(ctx, backfill.CreateRequest{WorkflowID: "incr-backfill",
		Spec: backfill.Spec{Incremental: &backfill.IncrementalSpec{Table: "sales.orders", FromSnapshotID: key(6), ToSnapshotID: key(7)}}})
	if !errors.Is(err, incremental.ErrInvalid) {
		t.Fatalf("backfill past the watermark: %v", err)
	}
	_, _, err = store.Create(ctx, backfill.CreateRequest{WorkflowID: "incr-backfill",
		Spec: backfill.Spec{Incremental: &backfill.IncrementalSpec{Table: "sales.orders", FromSnapshotID: key(6), ToSnapshotID: key(7),
			ResetWatermark: true}}})
	if !errors.Is(err, incremental.ErrInFlight) {
		t.Fatalf("reset while a live run is in flight: %v", err)
	}
	// The live run fails: (6, 7] stays after the watermark. A backfill
	// that resets the watermark takes it; the next change's live run
	// starts after it.
	g.set(liveRun.InstanceID, stepruntime.FatalError)
	if got := e.Wait(liveRun, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("live run %s", got.Status)
	}
	waitFor(t, "the failed range ended", func() bool { return e.watermark("incr-backfill").InFlight == nil })
	g.mu.Lock()
	g.auto = true
	g.mu.Unlock()
	b2, _, err := store.Create(ctx, backfill.CreateRequest{WorkflowID: "incr-backfill",
		Spec: backfill.Spec{Incremental: &backfill.IncrementalSpec{Table: "sales.orders", FromSnapshotID: key(6), ToSnapshotID: key(7),
			ResetWatermark: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if w := e.watermark("incr-backfill"); w.SnapshotID != commit(7).SnapshotID {
		t.Fatalf("reset_watermark left %+v", w)
	}
	if d := e.driveUntilEnded(store, b2.ID); d.Status != backfill.Succeeded || d.Partitions[0].Value != incremental.RangeValue(commit(6).SnapshotID, commit(7).SnapshotID) {
		t.Fatalf("reset backfill %+v", d)
	}
	e.announce(changeSignal(commit(8)))
	waitFor(t, "watermark at 8", func() bool {
		w := e.watermark("incr-backfill")
		return w.SnapshotID == commit(8).SnapshotID && w.InFlight == nil
	})
	rs, err := incremental.Runs(ctx, e.Pool, "incr-backfill", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.BackfillID != "" || r.FromSnapshotID != commit(7).SnapshotID || r.ToSnapshotID != commit(8).SnapshotID {
		t.Errorf("live range after the reset backfill %+v", r)
	}

	// Days map to the changes received: every change so far was committed
	// on 2026-09-21 (UTC), so the day is (0, 8].
	b3, _, err := store.Create(ctx, backfill.CreateRequest{WorkflowID: "incr-backfill",
		Spec: backfill.Spec{Incremental: &backfill.IncrementalSpec{Table: "sales.orders", FromDate: "2026-09-21", ToDate: "20260921"}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := e.driveUntilEnded(store, b3.ID); d.Status != backfill.Succeeded || len(d.Partitions) != 1 ||
		d.Partitions[0].Value != incremental.RangeValue(0, commit(8).SnapshotID) {
		t.Fatalf("backfill by days %+v", d.Partitions)
	}
	for _, bad := range []backfill.IncrementalSpec{
		{Table: "sales.orders", FromSnapshotID: &zero},
		{Table: "sales.orders", FromSnapshotID: &zero, ToSnapshotID: key(99)},
		{Table: "sales.items", FromSnapshotID: &zero, ToSnapshotID: key(1)},
		{Table: "sales.orders", FromSnapshotID: key(3), ToSnapshotID: key(2)},
		{Table: "sales.orders", FromDate: "yesterday", ToSnapshotID: key(2)},
	} {
		if _, _, err := store.Create(ctx, backfill.CreateRequest{WorkflowID: "incr-backfill",
			Spec: backfill.Spec{Incremental: &bad}}); !errors.Is(err, incremental.ErrInvalid) && !errors.Is(err, backfill.ErrInvalid) {
			t.Errorf("backfill %+v: %v, want invalid", bad, err)
		}
	}
}
