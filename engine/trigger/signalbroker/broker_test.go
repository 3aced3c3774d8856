package signalbroker_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// env is a test database with a broker over it and, when started, an
// engine whose output signals a sweeper matches.
type env struct {
	*flowtest.Env
	broker  *signalbroker.Broker
	sweeper *signalbroker.Sweeper
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ft := flowtest.New(t)
	return &env{Env: ft, broker: signalbroker.New(ft.Pool, ft.Runs, flowtest.Logger())}
}

// withEngine starts an engine and the sweeper of its output signals.
func (e *env) withEngine() *env {
	e.T.Helper()
	e.sweeper = &signalbroker.Sweeper{Broker: e.broker, Logger: flowtest.Logger(), Interval: 200 * time.Millisecond}
	e.Engine(nil, flow.Config{SignalsAnnounced: e.sweeper.Kick})
	if err := e.sweeper.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(e.sweeper.Stop)
	return e
}

// announce announces signals in one batch and returns what it did.
func (e *env) announce(reqs ...signal.Request) ([]signalbroker.Result, signalbroker.Stats) {
	e.T.Helper()
	res, stats, err := e.broker.Announce(context.Background(), reqs)
	if err != nil {
		e.T.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			e.T.Fatalf("signal %d: %v", i, r.Err)
		}
	}
	return res, stats
}

func (e *env) runs(workflowID string) []*execution.Instance {
	e.T.Helper()
	var out []*execution.Instance
	for iid := int64(1); ; iid++ {
		inst, err := e.Runs.Instance(context.Background(), workflowID, iid, 1)
		if err != nil {
			return out
		}
		out = append(out, inst)
	}
}

func (e *env) count(sql string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sig(name string, params map[string]any) signal.Request {
	return signal.Request{Name: name, Params: params}
}

// The two-signal trigger of testdata/joined-trigger.json (the shape of
// Maestro's sample-signal-trigger-wf.json: match params, join keys on
// differently named params, a condition, a random dedup_expr, a param):
// signals whose join keys differ start nothing; the partner with equal
// join key values starts exactly one run, whose initiator carries the set;
// repeated deliveries start nothing more. The run reads the trigger's
// param and the signals' params, waits for its step's signal
// dependencies, reads the one that met them, and announces output
// signals, whose lineage, like the set's and the dependencies', is
// recorded.
func TestJoinedTriggerStartsOneRunAndReadsTheSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t).withEngine()
	e.Push(fixture(t, "joined-trigger.json"))

	orders := sig("orders_landed", map[string]any{"region": "emea", "rows": int64(123456), "merchant": "m-7"})
	// Does not satisfy orders_landed's match params: never held.
	e.announce(sig("orders_landed", map[string]any{"region": "apac", "rows": int64(5000), "merchant": "m-7"}))
	e.announce(orders)
	_, stats := e.announce(sig("payments_landed", map[string]any{"currency": "EUR", "rows": int64(60), "payee": "m-8"}))
	if stats.Matched != 0 || len(e.runs("joined-trigger")) != 0 {
		t.Fatalf("join keys differ: %+v, %d runs", stats, len(e.runs("joined-trigger")))
	}
	payments := sig("payments_landed", map[string]any{"currency": "EUR", "rows": int64(60), "payee": "m-7"})
	res, stats := e.announce(payments)
	if stats.Matched != 1 || stats.Started != 1 {
		t.Fatalf("matching partner: %+v", stats)
	}
	// Redelivered: the same signals again, alone and in one batch.
	again, stats := e.announce(orders, payments, orders)
	if stats != (signalbroker.Stats{}) || !again[0].Duplicate || !again[1].Duplicate || !again[2].Duplicate {
		t.Fatalf("redelivery: %+v %+v", stats, again)
	}
	runs := e.runs("joined-trigger")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	var init struct {
		Type      string           `json:"type"`
		Trigger   string           `json:"trigger_uuid"`
		SignalIDs map[string]int64 `json:"signal_id_map"`
		Params    map[string]struct {
			Evaluated any `json:"evaluated_result"`
		} `json:"params"`
	}
	if err := json.Unmarshal(runs[0].Initiator, &init); err != nil {
		t.Fatal(err)
	}
	ordersSeq := again[0].Signal.Seq
	if init.Type != "SIGNAL" || init.Trigger == "" || init.SignalIDs["orders_landed"] != ordersSeq ||
		init.SignalIDs["payments_landed"] != res[0].Signal.Seq || init.Params["batch_label"].Evaluated != "nightly" {
		t.Fatalf("initiator %s", runs[0].Initiator)
	}

	// The step waits for its dependencies: the ledger of a day at least
	// the run's date, hour 00, and today's rates.
	run := runs[0]
	e.WaitStep(run, "reconcile", instance.StepWaitingForSignals, 20*time.Second)
	e.announce(sig("ledger/closed", map[string]any{"day": "20500101", "hour": "00"}),
		sig("fx/rates", map[string]any{"day": "20991231"}))
	if got := e.Wait(run, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run %s", got.Status)
	}
	a, err := e.Runs.Attempt(context.Background(), run.WorkflowID, run.InstanceID, run.RunID, "reconcile", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(a.Params, &ps); err != nil {
		t.Fatal(err)
	}
	if ps["label"].Value != "nightly" || ps["order_rows"].Value != float64(123456) || ps["ledger_day"].Value != "20500101" {
		t.Errorf("params read from the signals: %s", a.Params)
	}
	if !strings.Contains(string(a.Timeline), "announced output signals: reconciled/nightly, reconciled/any") {
		t.Errorf("timeline %s", a.Timeline)
	}

	// The output signals, matched by the sweeper (nothing waits for them).
	st := signal.NewStore(e.Pool)
	out, err := st.Latest(context.Background(), "reconciled/nightly")
	if err != nil || out.Params["merchant_rows"] != int64(246912) || out.Params["day"] != "20500101" {
		t.Fatalf("output signal %+v %v", out, err)
	}
	src, _ := out.Payload["signal_source"].(map[string]any)
	if src["step_id"] != "reconcile" || src["workflow_id"] != "joined-trigger" {
		t.Errorf("signal_source %v", out.Payload)
	}
	waitFor(t, "output signals matched", func() bool { return e.count(`SELECT count(*) FROM signal_pending`) == 0 })

	// Lineage, both ways.
	lin, err := st.LineageOfRun(context.Background(), run.WorkflowID, run.InstanceID, run.RunID, "")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[signal.Relation]int{}
	for _, l := range lin {
		kinds[l.Relation]++
	}
	if kinds[signal.Started] != 2 || kinds[signal.Unblocked] != 2 || kinds[signal.Produced] != 2 {
		t.Errorf("run lineage %+v", lin)
	}
	of, err := st.LineageOfSignal(context.Background(), ordersSeq)
	if err != nil || len(of) != 1 || of[0].Relation != signal.Started || of[0].InstanceID != run.InstanceID ||
		of[0].TriggerUUID != init.Trigger {
		t.Errorf("lineage of the orders signal %+v %v", of, err)
	}
	prod, err := st.LineageOfSignal(context.Background(), out.Seq)
	if err != nil || len(prod) != 1 || prod[0].Relation != signal.Produced || prod[0].StepID != "reconcile" || *prod[0].OutputIndex != 0 {
		t.Errorf("lineage of the output signal %+v %v", prod, err)
	}

	// The trigger's row counts what it did; nothing is held any more but
	// the payments signal for m-8.
	ts, err := trigger.ListSignals(context.Background(), e.Pool, "joined-trigger")
	if err != nil || len(ts) != 1 || ts[0].MatchCount != 1 || ts[0].StartCount != 1 || ts[0].Pending != 1 ||
		ts[0].LastInstanceID == nil || *ts[0].LastInstanceID != 1 {
		t.Fatalf("signal triggers %+v %v", ts, err)
	}
}

// The oldest held signal is consumed first; each set starts a run of its
// own, and a signal is used by one set only.
func TestEachSetStartsItsOwnRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "pair",
		"signal_triggers": [{"definitions": {"a": {"join_keys": ["dt"]}, "b": {"join_keys": ["day"]}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	e.announce(sig("a", map[string]any{"dt": "d1", "n": int64(1)}), sig("a", map[string]any{"dt": "d1", "n": int64(2)}),
		sig("a", map[string]any{"dt": "d2", "n": int64(3)}))
	_, stats := e.announce(sig("b", map[string]any{"day": "d1", "n": int64(1)}), sig("b", map[string]any{"day": "d1", "n": int64(2)}),
		sig("b", map[string]any{"day": "d1", "n": int64(3)}))
	if stats.Matched != 2 || stats.Started != 2 {
		t.Fatalf("%+v, want 2 sets (the third b waits)", stats)
	}
	runs := e.runs("pair")
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	var first, second struct {
		SignalIDs map[string]int64 `json:"signal_id_map"`
	}
	_ = json.Unmarshal(runs[0].Initiator, &first)
	_ = json.Unmarshal(runs[1].Initiator, &second)
	if first.SignalIDs["a"] >= second.SignalIDs["a"] || first.SignalIDs["b"] >= second.SignalIDs["b"] {
		t.Errorf("sets %v then %v: the oldest a is used first", first.SignalIDs, second.SignalIDs)
	}
	if n := e.count(`SELECT count(*) FROM signal_trigger_pending WHERE signal_name = 'b'`); n != 1 {
		t.Errorf("%d b signals held, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM signal_trigger_pending WHERE signal_name = 'a'`); n != 1 {
		t.Errorf("%d a signals held, want the d2 one", n)
	}
}

// Triggers follow the active version: a new version without the trigger
// drops it and what it held; signal_trigger_disabled stops it and forgets
// what it held; re-enabled, it matches signals from then on; a condition
// that is false consumes the set without a run; a signal announced before
// the trigger existed does not count.
func TestTriggersFollowTheActiveVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.announce(sig("early", map[string]any{"k": "x"}))
	const v1 = `{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "wf",
		"signal_triggers": [{"definitions": {"early": {"join_keys": ["k"]}, "late": {"join_keys": ["k"]}}},
			{"definitions": {"solo": {}}, "params": {"v": {"expression": "params.getFromSignal('solo', 'v')", "type": "LONG"}},
			 "condition": "v > 10"}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`
	e.Push(v1)
	if _, stats := e.announce(sig("late", map[string]any{"k": "x"})); stats.Matched != 0 {
		t.Fatalf("a signal from before the trigger counted: %+v", stats)
	}
	if _, stats := e.announce(sig("solo", map[string]any{"v": int64(5)})); stats.Matched != 1 || stats.Started != 0 {
		t.Fatalf("false condition: %+v", stats)
	}
	ts, _ := trigger.ListSignals(ctx, e.Pool, "wf")
	if len(ts) != 2 || !strings.Contains(ts[1].Error, "is false") || ts[0].Pending != 1 {
		t.Fatalf("triggers %+v", ts)
	}
	if _, stats := e.announce(sig("solo", map[string]any{"v": int64(50)})); stats.Started != 1 {
		t.Fatalf("true condition: %+v", stats)
	}

	off := true
	if _, err := e.Defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{SignalTriggerDisabled: &off}}, definitionActor()); err != nil {
		t.Fatal(err)
	}
	if _, stats := e.announce(sig("solo", map[string]any{"v": int64(60)})); stats.Matched != 0 {
		t.Fatalf("disabled trigger matched: %+v", stats)
	}
	if n := e.count(`SELECT count(*) FROM signal_trigger_pending`); n != 0 {
		t.Fatalf("%d signals held by disabled triggers", n)
	}
	on := false
	if _, err := e.Defs.UpdateProperties(ctx, "wf", workflow.PropertiesChange{Set: &workflow.Properties{SignalTriggerDisabled: &on}}, definitionActor()); err != nil {
		t.Fatal(err)
	}
	e.announce(sig("early", map[string]any{"k": "y"}))
	if _, stats := e.announce(sig("late", map[string]any{"k": "y"}), sig("solo", map[string]any{"v": int64(70)})); stats.Started != 2 {
		t.Fatalf("re-enabled: %+v", stats)
	}

	// A new version keeps the first trigger (same definition: same row) and
	// drops the second.
	before, _ := trigger.ListSignals(ctx, e.Pool, "wf")
	e.PushAs(`{"workflow": {"id": "wf", "signal_triggers": [{"definitions": {"early": {"join_keys": ["k"]}, "late": {"join_keys": ["k"]}}}],
		"steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`, "o")
	after, _ := trigger.ListSignals(ctx, e.Pool, "wf")
	if len(after) != 1 || after[0].UUID != before[0].UUID || after[0].Version != 2 || after[0].StartCount != 1 {
		t.Fatalf("after v2: %+v", after)
	}
	if _, stats := e.announce(sig("solo", map[string]any{"v": int64(80)})); stats.Matched != 0 {
		t.Fatalf("dropped trigger matched: %+v", stats)
	}
	if _, err := e.Defs.Deactivate(ctx, "wf", definitionActor()); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM signal_subscription`); n != 0 {
		t.Fatalf("%d subscriptions of an inactive workflow", n)
	}
	if got := len(e.runs("wf")); got != 3 {
		t.Fatalf("%d runs, want 3", got)
	}
}

// A step's output signal starts another workflow's run and unblocks a
// waiting step, through the sweeper, once.
func TestOutputSignalsTriggerAndUnblock(t *testing.T) {
	t.Parallel()
	e := newEnv(t).withEngine()
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "producer",
		"params": {"dt": {"type": "STRING", "value": "2026-01-02"}},
		"steps": [{"step": {"id": "load", "type": "NoOp", "signal_outputs": [
			{"name": "table/sales", "params": {"dt": {"type": "STRING", "value": "${dt}"}}}]}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "consumer",
		"signal_triggers": [{"definitions": {"table/sales": {}},
			"params": {"dt": {"type": "STRING", "expression": "params.getFromSignal('table/sales', 'dt')"}}}],
		"params": {"day": {"type": "STRING", "expression": "params.getFromSignal('dt')"}},
		"steps": [{"step": {"id": "use", "type": "NoOp"}}]}}`)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "waiter",
		"steps": [{"step": {"id": "gate", "type": "NoOp", "signal_dependencies": [{"name": "table/sales",
			"match_params": {"dt": {"param": {"type": "STRING", "value": "2026-01-02"}, "operator": "="}}}]}}]}}`)
	waiting := e.Start("waiter")
	e.WaitStep(waiting, "gate", instance.StepWaitingForSignals, 20*time.Second)
	if got := e.Wait(e.Start("producer"), 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("producer %s", got.Status)
	}
	if got := e.Wait(waiting, 30*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("waiter %s", got.Status)
	}
	waitFor(t, "the consumer run", func() bool { return len(e.runs("consumer")) == 1 })
	c := e.Wait(e.runs("consumer")[0], 30*time.Second)
	if c.Status != instance.WorkflowSucceeded || !strings.Contains(string(c.Params), `"2026-01-02"`) {
		t.Fatalf("consumer %s %s", c.Status, c.Params)
	}
	time.Sleep(500 * time.Millisecond) // a further sweep finds nothing to do
	if n := len(e.runs("consumer")); n != 1 {
		t.Fatalf("%d consumer runs", n)
	}
}

// A pending output signal left by a crash (committed with the step, not
// matched) is matched by the next sweep, once, even when several sweepers
// race for it.
func TestSweepCatchesUpOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Push(`{"properties": {"owner": "o", "run_strategy": "PARALLEL"}, "workflow": {"id": "c",
		"signal_triggers": [{"definitions": {"out": {}}}], "steps": [{"step": {"id": "s", "type": "NoOp"}}]}}`)
	ctx := context.Background()
	// What the terminal write leaves: stored signals marked pending.
	if _, err := e.Pool.Exec(ctx, `WITH s AS (INSERT INTO signal_instance (name, instance_id, params)
		SELECT 'out', 'o-' || g, jsonb_build_object('g', g) FROM generate_series(1, 250) g RETURNING seq, name)
		INSERT INTO signal_pending (seq, name) SELECT seq, name FROM s`); err != nil {
		t.Fatal(err)
	}
	done := make(chan signalbroker.Stats, 4)
	for range 4 {
		go func() {
			var total signalbroker.Stats
			sw := &signalbroker.Sweeper{Broker: e.broker, Logger: flowtest.Logger(), Batch: 20,
				Swept: func(s signalbroker.Stats) { total.Add(s) }}
			sw.Sweep(ctx)
			done <- total
		}()
	}
	var total signalbroker.Stats
	for range 4 {
		s := <-done
		total.Add(s)
	}
	if total.Started != 250 || len(e.runs("c")) != 250 || e.count(`SELECT count(*) FROM signal_pending`) != 0 {
		t.Fatalf("started %d, %d runs, %d pending", total.Started, len(e.runs("c")), e.count(`SELECT count(*) FROM signal_pending`))
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func definitionActor() definition.Actor { return definition.Actor{Name: "o", Admin: true} }
