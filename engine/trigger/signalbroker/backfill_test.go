package signalbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	backfilldriver "github.com/maestro-aws/maestro/engine/trigger/backfill"
)

// TestBackfillDownstreamThroughSignals: a backfill's runs produce output
// signals that trigger another workflow. With downstream, the triggered
// runs carry the backfill id and show in its downstream; without, the
// signals are recorded and start nothing; cancelling a downstream
// backfill stops its downstream runs in flight.
func TestBackfillDownstreamThroughSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t).withEngine()
	store := backfill.NewStore(e.Pool, e.Defs, e.Runs)
	d := &backfilldriver.Driver{Store: store, Logger: flowtest.Logger(), Interval: 100 * time.Millisecond}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "daily",
		"steps": [{"step": {"id": "load", "type": "NoOp", "signal_outputs": [
			{"name": "table/daily", "params": {"dt": {"type": "STRING", "value": "${TARGET_RUN_DATE}"}}}]}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "report",
		"signal_triggers": [{"definitions": {"table/daily": {}},
			"params": {"dt": {"type": "STRING", "expression": "params.getFromSignal('table/daily', 'dt')"}}}],
		"steps": [{"step": {"id": "use", "type": "Sleep", "sleep_seconds": 1}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "slowdaily",
		"steps": [{"step": {"id": "load", "type": "NoOp", "signal_outputs": [{"name": "table/slow"}]}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "gated",
		"steps": [{"step": {"id": "nap", "type": "Sleep", "sleep_seconds": 2, "signal_outputs": [{"name": "table/gated"}]}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "gatedreport",
		"signal_triggers": [{"definitions": {"table/gated": {}}}], "steps": [{"step": {"id": "use", "type": "NoOp"}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "slowreport",
		"signal_triggers": [{"definitions": {"table/slow": {}}}],
		"steps": [{"step": {"id": "use", "type": "Sleep", "sleep_seconds": 600}}]}}`)
	ctx := context.Background()
	create := func(wf string, values []string, downstream bool) *backfill.Backfill {
		t.Helper()
		b, _, err := store.Create(ctx, backfill.CreateRequest{WorkflowID: wf, Param: "TARGET_RUN_DATE",
			Spec: backfill.Spec{Values: values}, Concurrency: 2, Downstream: downstream})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	get := func(id string) *backfill.Detail {
		t.Helper()
		d, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	with := create("daily", []string{"20240101", "20240102"}, true)
	without := create("daily", []string{"20240103"}, false)
	waitFor(t, "both backfills to succeed and the downstream runs to end", func() bool {
		a, b := get(with.ID), get(without.ID)
		return a.Status != backfill.Running && b.Status != backfill.Running
	})
	// A downstream backfill ends once its downstream runs have ended.
	a := get(with.ID)
	if ds := a.Downstream["report"]; a.Status != backfill.Succeeded || ds == nil || ds.Counts["SUCCEEDED"] != 2 || len(ds.Runs) != 2 {
		t.Fatalf("downstream backfill %s with downstream %+v", a.Status, ds)
	}
	if n := e.count(`SELECT count(*) FROM signal_instance WHERE name = 'table/daily'`); n != 3 {
		t.Fatalf("%d output signals recorded; want 3 (one per partition, downstream or not)", n)
	}
	waitFor(t, "every output signal to be matched", func() bool { return e.count(`SELECT count(*) FROM signal_pending`) == 0 })
	var reports, ofWith int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE initiator->>'backfill_id' = $1
            AND initiator->>'type' = 'SIGNAL') FROM workflow_instance WHERE workflow_id = 'report'`, with.ID).Scan(&reports, &ofWith); err != nil {
		t.Fatal(err)
	}
	if reports != 2 || ofWith != 2 {
		t.Fatalf("%d report runs, %d of the downstream backfill; want 2 and 2 (none from the other)", reports, ofWith)
	}
	if ds := get(without.ID).Downstream; len(ds) != 0 {
		t.Fatalf("a backfill without downstream has downstream runs %v", ds)
	}

	// Paused, the backfill's downstream is paused with it: the output
	// signal of the run that ends meanwhile is held, and starts its
	// downstream run once the backfill is resumed.
	gated := create("gated", []string{"20240106"}, true)
	waitFor(t, "the gated partition's run to run", func() bool { return get(gated.ID).Counts["IN_PROGRESS"] == 1 })
	if _, err := store.Act(ctx, gated.ID, backfill.ActionPause, "o"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gated partition's run to succeed", func() bool { return get(gated.ID).Counts["SUCCEEDED"] == 1 })
	time.Sleep(time.Second) // sweeps pass meanwhile
	if n := e.count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'gatedreport'`); n != 0 {
		t.Fatalf("a paused backfill's signal started %d downstream runs", n)
	}
	if n := e.count(`SELECT count(*) FROM signal_pending`); n != 1 {
		t.Fatalf("%d signals held; want the paused backfill's one", n)
	}
	if _, err := store.Act(ctx, gated.ID, backfill.ActionResume, "o"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed backfill to end with its downstream run", func() bool {
		g := get(gated.ID)
		ds := g.Downstream["gatedreport"]
		return g.Status == backfill.Succeeded && ds != nil && ds.Counts["SUCCEEDED"] == 1
	})

	// Cancel stops the downstream run in flight.
	slow := create("slowdaily", []string{"20240105"}, true)
	waitFor(t, "the downstream run of the slow partition to run", func() bool {
		ds := get(slow.ID).Downstream["slowreport"]
		return ds != nil && ds.Counts["IN_PROGRESS"] == 1
	})
	if got := get(slow.ID); got.Status != backfill.Running || got.Counts["SUCCEEDED"] != 1 {
		t.Fatalf("a backfill whose downstream run is live is %s (%v)", got.Status, got.Counts)
	}
	if _, err := store.Act(ctx, slow.ID, backfill.ActionCancel, "o"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the downstream run to stop", func() bool {
		ds := get(slow.ID).Downstream["slowreport"]
		return ds.Counts["STOPPED"] == 1
	})
}
