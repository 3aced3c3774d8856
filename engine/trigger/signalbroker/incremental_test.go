package signalbroker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
)

// gate is a step runtime (registered as flowtest.FailType, which the test
// definitions use) whose attempts wait until the test decides how each
// run's step ends: Done (the run succeeds) or FatalError (it fails). With
// auto set, undecided runs succeed at once.
type gate struct {
	mu   sync.Mutex
	out  map[[2]int64]stepruntime.State // by instance id and run id
	auto bool
}

func newGate() *gate { return &gate{out: map[[2]int64]stepruntime.State{}} }

// set decides how run 1 of an instance ends.
func (g *gate) set(instanceID int64, s stepruntime.State) { g.setRun(instanceID, 1, s) }

func (g *gate) setRun(instanceID, runID int64, s stepruntime.State) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out[[2]int64{instanceID, runID}] = s
}

func (g *gate) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (g *gate) Execute(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	g.mu.Lock()
	s, ok := g.out[[2]int64{a.InstanceID, a.RunID}]
	auto := g.auto
	g.mu.Unlock()
	switch {
	case ok:
		return stepruntime.Result{State: s, Message: "decided by the test"}
	case auto:
		return stepruntime.Result{State: stepruntime.Done}
	}
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: 30 * time.Millisecond}
}

func (g *gate) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// incrementalWorkflow is a workflow whose incremental trigger listens to
// sales.orders and whose one step is held by the gate.
func incrementalWorkflow(id string) string {
	return fmt.Sprintf(`{"properties": {"owner": "analyst"},
  "workflow": {"id": %q,
    "signal_triggers": [{"incremental": true, "definitions": {"sales.orders": {}}}],
    "steps": [{"step": {"id": "work", "type": %q}}]}}`, id, flowtest.FailType)
}

// withGate starts an engine whose gate steps the test controls, and the
// sweeper.
func (e *env) withGate(g *gate) *env {
	e.T.Helper()
	e.sweeper = &signalbroker.Sweeper{Broker: e.broker, Logger: flowtest.Logger(), Interval: 200 * time.Millisecond}
	e.Engine(stepruntime.Registry{flowtest.FailType: g}, flow.Config{SignalsAnnounced: e.sweeper.Kick})
	if err := e.sweeper.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(e.sweeper.Stop)
	return e
}

// commit is the i-th commit of the test table: snapshot ids that are not
// in commit order (as Iceberg's), commit times a second apart.
func commit(i int) tablechange.Change {
	id := func(i int) int64 {
		if i == 0 {
			return 0
		}
		return int64(7_000_000_000 - i*1_000_003 + (i%3)*500_000_017)
	}
	op := tablechange.Append
	if i%7 == 0 {
		op = tablechange.Overwrite
	}
	return tablechange.Change{Table: tablechange.TableRef{Namespace: "sales", Table: "orders"}, SnapshotID: id(i),
		ParentSnapshotID: id(i - 1), CommitTime: time.UnixMilli(1_790_000_000_000 + int64(i)*1000).UTC(), Operation: op}
}

func changeSignal(c tablechange.Change) signal.Request {
	return signal.Request{Name: c.Table.String(), Params: c.SignalParams()}
}

// rangeParams reads a run's range params.
type rangeParams struct {
	Table          string `json:"table"`
	From, To       int64
	FromCommitTime int64
	ToCommitTime   int64
	Count          int64
	HasOverwrite   bool
	HasDelete      bool
}

func (e *env) rangeOf(inst *execution.Instance) rangeParams {
	e.T.Helper()
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(inst.RunParams, &ps); err != nil {
		e.T.Fatalf("run params %s: %v", inst.RunParams, err)
	}
	long := func(k string) int64 {
		switch v := ps[k].Value.(type) {
		case float64:
			return int64(v)
		case json.Number:
			n, _ := v.Int64()
			return n
		}
		e.T.Fatalf("run param %s missing in %s", k, inst.RunParams)
		return 0
	}
	table, _ := ps["table"].Value.(string)
	ow, _ := ps["has_overwrite"].Value.(bool)
	del, _ := ps["has_delete"].Value.(bool)
	return rangeParams{Table: table, From: long("from_snapshot_id"), To: long("to_snapshot_id"),
		FromCommitTime: long("from_commit_time"), ToCommitTime: long("to_commit_time"), Count: long("snapshot_count"),
		HasOverwrite: ow, HasDelete: del}
}

func (e *env) watermark(workflowID string) incremental.Watermark {
	e.T.Helper()
	ws, err := incremental.List(context.Background(), e.Pool, workflowID)
	if err != nil {
		e.T.Fatal(err)
	}
	if len(ws) != 1 {
		e.T.Fatalf("%d watermarks of %s, want 1", len(ws), workflowID)
	}
	return ws[0]
}

func (e *env) waitRuns(workflowID string, n int) []*execution.Instance {
	e.T.Helper()
	waitFor(e.T.(*testing.T), fmt.Sprintf("%d runs of %s", n, workflowID), func() bool { return len(e.runs(workflowID)) >= n })
	return e.runs(workflowID)
}

// Three changes arriving while a run is in flight start exactly one next
// run, once the first has succeeded, covering all three; the watermark
// moves only when a run succeeds, to the end of its range.
func TestIncrementalCoalescesChangesDuringARun(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-coalesce"))

	if _, stats := e.announce(changeSignal(commit(1))); stats.Started != 1 {
		t.Fatalf("first change: %+v", stats)
	}
	first := e.runs("incr-coalesce")[0]
	if r := e.rangeOf(first); r != (rangeParams{Table: "sales.orders", From: 0, To: commit(1).SnapshotID, FromCommitTime: 0,
		ToCommitTime: commit(1).CommitTime.UnixMilli(), Count: 1}) {
		t.Fatalf("first range %+v", r)
	}
	e.WaitStep(first, "work", instance.StepRunning, 20*time.Second)
	for i := 2; i <= 4; i++ {
		if _, stats := e.announce(changeSignal(commit(i))); stats.Started != 0 {
			t.Fatalf("change %d during the run started one: %+v", i, stats)
		}
	}
	if w := e.watermark("incr-coalesce"); w.SnapshotID != 0 || w.InFlight == nil || *w.InFlight != first.InstanceID ||
		w.LatestSnapshotID != commit(4).SnapshotID {
		t.Fatalf("watermark during the run %+v", w)
	}
	g.set(first.InstanceID, stepruntime.Done)
	if got := e.Wait(first, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("first run %s", got.Status)
	}
	runs := e.waitRuns("incr-coalesce", 2)
	second := runs[1]
	if r := e.rangeOf(second); r != (rangeParams{Table: "sales.orders", From: commit(1).SnapshotID, To: commit(4).SnapshotID,
		FromCommitTime: commit(1).CommitTime.UnixMilli(), ToCommitTime: commit(4).CommitTime.UnixMilli(), Count: 3}) {
		t.Fatalf("second range %+v", r)
	}
	if w := e.watermark("incr-coalesce"); w.SnapshotID != commit(1).SnapshotID {
		t.Fatalf("watermark after the first run %+v", w)
	}
	g.set(second.InstanceID, stepruntime.Done)
	e.Wait(second, 30*time.Second)
	waitFor(t, "watermark at the fourth commit", func() bool {
		w := e.watermark("incr-coalesce")
		return w.SnapshotID == commit(4).SnapshotID && w.InFlight == nil
	})
	if n := len(e.runs("incr-coalesce")); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	if n := e.count(`SELECT count(*) FROM incremental_run WHERE workflow_id = 'incr-coalesce' AND state = 'SUCCEEDED'`); n != 2 {
		t.Fatalf("%d succeeded ranges, want 2", n)
	}
	// The runs' status events the engine wrote carry their range.
	rows, err := e.Pool.Query(context.Background(), `SELECT payload::text FROM maestro_event
		WHERE workflow_id = 'incr-coalesce' AND kind = 2 ORDER BY tx, event_id`)
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	carried := map[int64]int{}
	for _, p := range payloads {
		var ev struct {
			Instance int64                   `json:"i"`
			New      string                  `json:"n"`
			Range    *event.IncrementalRange `json:"x"`
		}
		if err := json.Unmarshal([]byte(p), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.New != "IN_PROGRESS" && ev.New != "SUCCEEDED" {
			continue
		}
		want := event.IncrementalRange{Table: "sales.orders", FromSnapshotID: 0, ToSnapshotID: commit(1).SnapshotID,
			ToCommitTime: commit(1).CommitTime.UnixMilli()}
		if ev.Instance == second.InstanceID {
			want = event.IncrementalRange{Table: "sales.orders", FromSnapshotID: commit(1).SnapshotID, ToSnapshotID: commit(4).SnapshotID,
				FromCommitTime: commit(1).CommitTime.UnixMilli(), ToCommitTime: commit(4).CommitTime.UnixMilli()}
		}
		if ev.Range == nil || *ev.Range != want {
			t.Errorf("run %d's %s event carries %+v, want %+v", ev.Instance, ev.New, ev.Range, want)
		}
		carried[ev.Instance]++
	}
	if carried[first.InstanceID] != 2 || carried[second.InstanceID] != 2 {
		t.Errorf("status events with the range: %v, want 2 per run", carried)
	}
}

// A FAILED run leaves the watermark where it was: the next run (started
// by the next change) covers the failed range and the new change.
func TestIncrementalFailedRunIsCoveredByTheNext(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-fail"))

	e.announce(changeSignal(commit(1)))
	first := e.runs("incr-fail")[0]
	g.set(first.InstanceID, stepruntime.FatalError)
	if got := e.Wait(first, 30*time.Second); got.Status != instance.WorkflowFailed {
		t.Fatalf("first run %s", got.Status)
	}
	waitFor(t, "range ended", func() bool { return e.watermark("incr-fail").InFlight == nil })
	if w := e.watermark("incr-fail"); w.SnapshotID != 0 {
		t.Fatalf("watermark moved after a failure: %+v", w)
	}
	// Nothing new: no run (a failing job is not retried in a loop).
	e.sweeper.Sweep(context.Background())
	if n := len(e.runs("incr-fail")); n != 1 {
		t.Fatalf("%d runs before the next change", n)
	}
	if _, stats := e.announce(changeSignal(commit(2))); stats.Started != 1 {
		t.Fatalf("next change: %+v", stats)
	}
	second := e.runs("incr-fail")[1]
	if r := e.rangeOf(second); r.From != 0 || r.To != commit(2).SnapshotID || r.Count != 2 || r.FromCommitTime != 0 {
		t.Fatalf("range after the failure %+v", r)
	}
	g.set(second.InstanceID, stepruntime.Done)
	e.Wait(second, 30*time.Second)
	waitFor(t, "watermark at the second commit", func() bool { return e.watermark("incr-fail").SnapshotID == commit(2).SnapshotID })
}

// A redelivered change (the same signal, or the same snapshot under
// another signal instance id) starts nothing and counts once; an
// overwrite in a range is flagged; a signal of the trigger's name that is
// not a table change is refused and starts nothing.
func TestIncrementalRedeliveryAndFlags(t *testing.T) {
	t.Parallel()
	g := newGate()
	g.auto = true
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-redeliver"))

	res, _, err := e.broker.Announce(context.Background(), []signal.Request{{Name: "sales.orders", Params: map[string]any{"table": "sales.orders"}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	if n := len(e.runs("incr-redeliver")); n != 0 {
		t.Fatalf("a signal without snapshot_id started %d runs", n)
	}
	e.announce(changeSignal(commit(6)))
	first := e.runs("incr-redeliver")[0]
	e.Wait(first, 30*time.Second)
	waitFor(t, "watermark at commit 6", func() bool { return e.watermark("incr-redeliver").SnapshotID == commit(6).SnapshotID })
	// Redelivered: the same request, and the same snapshot with another
	// instance id.
	again := changeSignal(commit(6))
	again.Params["signal"] = "redelivered"
	_, stats := e.announce(changeSignal(commit(6)), again)
	if stats.Started != 0 {
		t.Fatalf("redelivery started a run: %+v", stats)
	}
	e.announce(changeSignal(commit(7)))
	runs := e.waitRuns("incr-redeliver", 2)
	if r := e.rangeOf(runs[1]); !r.HasOverwrite || r.HasDelete || r.Count != 1 || r.From != commit(6).SnapshotID {
		t.Fatalf("range with an overwrite %+v", r)
	}
	e.sweeper.Sweep(context.Background())
	if n := len(e.runs("incr-redeliver")); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	if n := e.count(`SELECT count(*) FROM incremental_change WHERE workflow_id = 'incr-redeliver'`); n != 2 {
		t.Fatalf("%d changes stored, want 2", n)
	}
}

// Two brokers deliver 40 changes concurrently, in interleaved order, and
// two sweeps race to start the ranges owed, while every run succeeds at
// once: the ranges chain from 0 to the last commit,
// each starting where the previous ended (no overlap, no gap), and every
// change lies in exactly one range.
func TestIncrementalConcurrentDeliveriesNeverOverlap(t *testing.T) {
	t.Parallel()
	g := newGate()
	g.auto = true
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-race"))
	other := signalbroker.New(e.Pool, e.Runs, flowtest.Logger())
	// A second process's sweep races the engine's for the ranges owed.
	sweep2 := &signalbroker.Sweeper{Broker: other, Logger: flowtest.Logger(), Interval: 20 * time.Millisecond}
	if err := sweep2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sweep2.Stop)

	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < 4; w++ {
		b := e.broker
		if w%2 == 1 {
			b = other
		}
		wg.Add(1)
		go func(w int, b *signalbroker.Broker) {
			defer wg.Done()
			for i := 1 + w; i <= n; i += 4 {
				if _, _, err := b.Announce(context.Background(), []signal.Request{changeSignal(commit(i))}); err != nil {
					errs <- err
					return
				}
			}
		}(w, b)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFor(t, "watermark at the last commit", func() bool {
		w := e.watermark("incr-race")
		return w.SnapshotID == commit(n).SnapshotID && w.InFlight == nil
	})
	checkChain(t, e, "incr-race", n)
}

// checkChain checks that the succeeded ranges of a workflow chain from 0
// to the n-th commit and that each of the n commits lies in exactly one.
func checkChain(t *testing.T, e *env, workflowID string, n int) {
	t.Helper()
	rs, err := incremental.Runs(context.Background(), e.Pool, workflowID, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rs, func(a, b incremental.RunRange) int { return int(a.InstanceID - b.InstanceID) })
	var ok []incremental.RunRange
	for _, r := range rs {
		if r.State == "SUCCEEDED" {
			ok = append(ok, r)
		}
	}
	prev := int64(0)
	for _, r := range ok {
		if r.FromSnapshotID != prev {
			t.Fatalf("range of run %d starts at %d, the previous ended at %d: %+v", r.InstanceID, r.FromSnapshotID, prev, ok)
		}
		prev = r.ToSnapshotID
	}
	if prev != commit(n).SnapshotID {
		t.Fatalf("ranges end at %d, want %d", prev, commit(n).SnapshotID)
	}
	for i := 1; i <= n; i++ {
		c := commit(i).CommitTime.UnixMilli()
		in := 0
		for _, r := range ok {
			if c > r.FromCommitTime && c <= r.ToCommitTime {
				in++
			}
		}
		if in != 1 {
			t.Fatalf("commit %d lies in %d succeeded ranges: %+v", i, in, ok)
		}
	}
	// Every run the trigger started has its range (none without).
	runs := e.runs(workflowID)
	if len(runs) != len(rs) {
		t.Fatalf("%d runs, %d ranges", len(runs), len(rs))
	}
}

// The restart of a FAILED incremental run whose range is still the next
// one takes the range back: it is in flight again (a change meanwhile
// waits), and its success moves the watermark to the range's end; the
// change that waited then gets one run after it. A restart once the
// watermark has moved past the range re-processes it without moving
// anything.
func TestIncrementalRestartTakesTheRangeBack(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-restart"))
	ctx := context.Background()

	e.announce(changeSignal(commit(1)))
	first := e.runs("incr-restart")[0]
	g.set(first.InstanceID, stepruntime.FatalError)
	e.Wait(first, 30*time.Second)
	waitFor(t, "the failed range ended", func() bool { return e.watermark("incr-restart").InFlight == nil })

	restarted, err := e.Runs.Restart(ctx, execution.RestartRequest{WorkflowID: "incr-restart", InstanceID: first.InstanceID,
		Policy: execution.RestartFromBeginning})
	if err != nil {
		t.Fatal(err)
	}
	if w := e.watermark("incr-restart"); w.InFlight == nil || *w.InFlight != first.InstanceID {
		t.Fatalf("the restart did not take the range back: %+v", w)
	}
	if _, stats := e.announce(changeSignal(commit(2))); stats.Started != 0 {
		t.Fatalf("a change during the restarted run started one: %+v", stats)
	}
	g.setRun(first.InstanceID, restarted.RunID, stepruntime.Done)
	if got := e.Wait(restarted, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("restarted run %s", got.Status)
	}
	second := e.waitRuns("incr-restart", 2)[1]
	if r := e.rangeOf(second); r.From != commit(1).SnapshotID || r.To != commit(2).SnapshotID || r.Count != 1 {
		t.Fatalf("the run after the restart covers %+v", r)
	}
	g.set(second.InstanceID, stepruntime.Done)
	waitFor(t, "watermark at 2", func() bool {
		w := e.watermark("incr-restart")
		return w.SnapshotID == commit(2).SnapshotID && w.InFlight == nil
	})

	// Restarting the first run again: its range is behind the watermark.
	again, err := e.Runs.Restart(ctx, execution.RestartRequest{WorkflowID: "incr-restart", InstanceID: first.InstanceID,
		Policy: execution.RestartFromBeginning})
	if err != nil {
		t.Fatal(err)
	}
	if w := e.watermark("incr-restart"); w.InFlight != nil {
		t.Fatalf("a restart behind the watermark took a range: %+v", w)
	}
	g.setRun(first.InstanceID, again.RunID, stepruntime.Done)
	e.Wait(again, 30*time.Second)
	e.sweeper.Sweep(ctx)
	if w := e.watermark("incr-restart"); w.SnapshotID != commit(2).SnapshotID || w.InFlight != nil || len(e.runs("incr-restart")) != 2 {
		t.Fatalf("after re-processing behind the watermark: %+v", w)
	}
	checkChain(t, e, "incr-restart", 2)
}
