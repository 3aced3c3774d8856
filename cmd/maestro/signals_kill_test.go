package main

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
)

// The producer's step announces an output signal when it succeeds; the
// consumer's signal trigger subscribes to it.
const (
	producerWorkflow = `{"properties":{"owner":"tester"},"workflow":{"id":"producer","steps":[
		{"step":{"id":"emit","type":"NoOp","signal_outputs":[{"name":"orders/ready","params":{"day":{"value":"20260501","type":"STRING"}}}]}}]}}`
	consumerWorkflow = `{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"consumer",
		"signal_triggers":[{"definitions":{"orders/ready":{"match_params":{"day":{"value":"20260101","operator":">="}}}}}],
		"steps":[{"step":{"id":"load","type":"NoOp",
			"params":{"day":{"expression":"params.getFromSignal('orders/ready', 'day')","type":"STRING"}}}}]}}`
)

// A step's output signal is stored with its terminal state; the broker's
// sweeper matches it after that commit. Kill -9 the only engine while its
// sweep holds the claimed signal inside its transaction (after the step
// succeeded, before the signal was matched): nothing downstream has
// started. Restarted, the engine's sweeper catches up, and the consumer
// gets exactly one run, which reads the signal's params; the signal is
// stored once and the producer's step ran once.
func TestKilledEngineMatchesAnOutputSignalOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	f := pushAndStart(t, dsn, 1, producerWorkflow)
	pushDefinitions(t, definition.NewStore(f.pool), consumerWorkflow)
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := f.pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	first := engineProcess(t, dsn, "n1", "4", "MAESTRO_TEST_SIGNAL_PAUSE=2m", "MAESTRO_SIGNAL_SWEEP=100ms")
	// The sweep has claimed the signal when its pending row is there but
	// locked by the sweep's open transaction.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var pending, free int
		err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM signal_pending),
			(SELECT count(*) FROM (SELECT seq FROM signal_pending FOR UPDATE SKIP LOCKED) p)`).Scan(&pending, &free)
		if err != nil {
			t.Fatal(err)
		}
		if pending == 1 && free == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweep never claimed the output signal: %d pending, %d unlocked", pending, free)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	if n := count(`SELECT count(*) FROM step_instance WHERE workflow_id = 'producer' AND status = 'SUCCEEDED'`); n != 1 {
		t.Fatalf("producer's step: %d succeeded attempts before the kill, want 1", n)
	}
	if n := count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'consumer'`); n != 0 {
		t.Fatalf("%d consumer runs before the signal was matched", n)
	}

	engineProcess(t, dsn, "n1", "4", "MAESTRO_SIGNAL_SWEEP=100ms")
	consumer := &killFixture{pool: f.pool, runs: f.runs, workflowID: "consumer",
		insts: []*execution.Instance{{WorkflowID: "consumer", InstanceID: 1}}}
	waitUntil(t, 60*time.Second, "the consumer's run", func() bool {
		return count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'consumer'`) > 0
	})
	consumer.checkAllSucceeded(t, 60*time.Second)
	f.checkAllSucceeded(t, 60*time.Second)
	waitUntil(t, 30*time.Second, "no signal left to match", func() bool {
		return count(`SELECT count(*) FROM signal_pending`) == 0
	})

	if n := count(`SELECT count(*) FROM workflow_instance WHERE workflow_id = 'consumer'`); n != 1 {
		t.Errorf("%d consumer runs, want exactly 1", n)
	}
	if n := count(`SELECT count(*) FROM signal_instance WHERE name = 'orders/ready'`); n != 1 {
		t.Errorf("%d orders/ready signal instances, want 1", n)
	}
	if n := count(`SELECT count(*) FROM step_instance WHERE workflow_id = 'producer'`); n != 1 {
		t.Errorf("%d producer step attempts, want 1 (the step ran before the kill)", n)
	}
	if n := count(`SELECT count(*) FROM signal_lineage WHERE kind = 'STARTED' AND workflow_id = 'consumer'`); n != 1 {
		t.Errorf("%d STARTED lineage rows for the consumer, want 1", n)
	}
	a, err := f.runs.Attempt(ctx, "consumer", 1, 1, "load", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != instance.StepSucceeded || !jsonHasValue(a.Params, "day", "20260501") {
		t.Errorf("consumer's step %s, params %s: want it to read day 20260501 from the signal", a.Status, a.Params)
	}
}

// waitUntil polls cond until it holds, failing the test after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jsonHasValue reports whether evaluated params (name -> {value, ...})
// give name the value want.
func jsonHasValue(params []byte, name string, want any) bool {
	var ps map[string]struct {
		Value any `json:"value"`
	}
	return json.Unmarshal(params, &ps) == nil && ps[name].Value == want
}
