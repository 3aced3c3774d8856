package signalbroker_test

import (
	"context"
	"testing"

	"github.com/maestro-aws/maestro/engine/ops"
)

// While an operator has paused every trigger, signals are stored but start
// no triggered run: they are kept (signal_trigger_deferred). A sweep while
// still paused matches nothing; once resumed, the sweep matches them
// against the triggers and each set starts its run, once.
func TestPausedTriggersKeepSignalsUntilResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "paused-pair",
		"signal_triggers": [{"definitions": {"a": {"join_keys": ["dt"]}, "b": {"join_keys": ["dt"]}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	store := ops.New(e.Pool)
	ctx := context.Background()
	if _, err := store.SetTriggersPaused(ctx, true, "ops", "maintenance"); err != nil {
		t.Fatal(err)
	}
	_, stats := e.announce(sig("a", map[string]any{"dt": "d1"}), sig("unrelated", map[string]any{"x": "y"}))
	_, stats2 := e.announce(sig("b", map[string]any{"dt": "d1"}))
	if stats.Stored != 2 || stats.Deferred != 1 || stats2.Deferred != 1 || stats.Matched+stats2.Matched != 0 {
		t.Fatalf("paused: %+v then %+v, want both trigger signals kept and nothing matched", stats, stats2)
	}
	if n := len(e.runs("paused-pair")); n != 0 {
		t.Fatalf("%d runs started while paused", n)
	}
	if st, n, err := e.broker.ProcessDeferred(ctx, 100); err != nil || n != 0 || st.Started != 0 {
		t.Fatalf("sweep while paused: %+v %d %v, want nothing", st, n, err)
	}
	m, err := store.Maintenance(ctx)
	if err != nil || m.DeferredSignals != 2 {
		t.Fatalf("maintenance %+v %v, want 2 signals kept", m, err)
	}
	if _, err := store.SetTriggersPaused(ctx, false, "ops", ""); err != nil {
		t.Fatal(err)
	}
	st, n, err := e.broker.ProcessDeferred(ctx, 100)
	if err != nil || n != 2 || st.Matched != 1 || st.Started != 1 {
		t.Fatalf("sweep after resuming: %+v %d %v, want the pair matched once", st, n, err)
	}
	if st, n, err := e.broker.ProcessDeferred(ctx, 100); err != nil || n != 0 || st.Started != 0 {
		t.Fatalf("second sweep: %+v %d %v, want nothing left", st, n, err)
	}
	if runs := e.runs("paused-pair"); len(runs) != 1 {
		t.Fatalf("%d runs after resuming, want 1", len(runs))
	}
	if n := e.count(`SELECT count(*) FROM signal_trigger_deferred`); n != 0 {
		t.Errorf("%d signals still kept", n)
	}
}
