package flow_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// counted is an inline runtime (like NoOp) that counts its executions.
type counted struct{ n atomic.Int64 }

func (c *counted) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}
func (c *counted) Execute(context.Context, *stepruntime.Attempt) stepruntime.Result {
	c.n.Add(1)
	return stepruntime.Result{State: stepruntime.Done}
}
func (c *counted) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}
func (c *counted) RunsInline() {}

// typedChain is a chain of n steps of type typ, ids s0 ... s(n-1).
func typedChain(id, typ string, n int) string {
	return strings.ReplaceAll(chainJSON(id, n), `"type":"NoOp"`, fmt.Sprintf(`"type":%q`, typ))
}

// durableSteps reads which steps of a run have a row, and with which
// statuses, by step index.
func (e *env) durableSteps(inst *execution.Instance) map[int][]instance.StepStatus {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT step_id, status FROM step_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`, inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int][]instance.StepStatus{}
	for rows.Next() {
		var id string
		var st instance.StepStatus
		if err := rows.Scan(&id, &st); err != nil {
			e.t.Fatal(err)
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "s"))
		out[i] = append(out[i], st)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// gate is a runtime whose Execute waits until open is closed; entered
// counts the calls that reached it.
type gate struct {
	open    chan struct{}
	entered atomic.Int64
}

func (g *gate) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}
func (g *gate) Execute(ctx context.Context, _ *stepruntime.Attempt) stepruntime.Result {
	g.entered.Add(1)
	select {
	case <-g.open:
		return stepruntime.Result{State: stepruntime.Done}
	case <-ctx.Done():
		return stepruntime.Result{State: stepruntime.PlatformError, Message: ctx.Err().Error()}
	}
}
func (g *gate) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// A node dies while its chains run ahead of their writes: one batch of
// the node's writes is in flight (held by a lock on the flow groups), the
// chains go on in memory and queue later writes behind it, and the node is
// killed. What is durable is a prefix of each run (no step without its
// predecessor's SUCCEEDED, no run ended before its steps), and the node
// that takes the groups over finishes every run with one SUCCEEDED
// attempt per step.
func TestCrashWithWritesBehindInFlight(t *testing.T) {
	t.Parallel()
	// One pipeline, and two open whatever the database's distance (a
	// second transaction in flight while the first is held).
	for name, remote := range map[string]time.Duration{"near": 0, "remote": -1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			crashWithWritesBehindInFlight(t, remote)
		})
	}
}

func crashWithWritesBehindInFlight(t *testing.T, remote time.Duration) {
	const runs, steps = 6, 40
	e := newEnv(t)
	c := &counted{}
	g := &gate{open: make(chan struct{})}
	rts := testRuntimes()
	rts["Gauge"] = c // step types the test validator knows
	rts["Exclusive"] = g
	def := typedChain("ahead", "Gauge", steps)
	def = strings.Replace(def, `"id":"s0","type":"Gauge"`, `"id":"s0","type":"Exclusive"`, 1)
	e.push(withStrategy(def, `{"rule":"PARALLEL","workflow_concurrency":100}`))
	a := e.engine(flow.Config{NodeID: "node-a", Runtimes: rts, Lease: 2 * time.Second, WriterRemoteCommit: remote})
	var insts []*execution.Instance
	for range runs {
		insts = append(insts, e.start("ahead", nil))
	}
	waitFor(t, 30*time.Second, "every run at its gate", func() bool { return g.entered.Load() >= runs })
	// The database stops taking the node's writes: a transaction holds the
	// rows of the flow groups, which each batch share-locks first.
	ctx := context.Background()
	lock, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `SELECT 1 FROM flow_group FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	// The chains go on in memory while a batch waits on the lock and the
	// later writes queue behind it.
	waitFor(t, 10*time.Second, "the chains to run ahead of their writes", func() bool {
		return c.n.Load() >= int64(runs*5)
	})
	crashed := make(chan struct{})
	go func() {
		a.Crash()
		close(crashed)
	}()
	time.Sleep(100 * time.Millisecond)
	// The batch in flight commits now (or never): the node is gone either
	// way, and it wrote nothing after.
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-crashed:
	case <-time.After(30 * time.Second):
		t.Fatal("the crashed node did not stop")
	}
	executed := c.n.Load()
	durable := 0
	for _, inst := range insts {
		got := e.durableSteps(inst)
		for i := range steps {
			sts := got[i]
			if len(sts) > 1 || (i > 0 && len(sts) == 1 && sts[0] != instance.StepSucceeded) {
				// s0, the gate, may be durable STARTING; an inline step is
				// written once, SUCCEEDED.
				t.Fatalf("run %d step s%d: %v, want at most one SUCCEEDED", inst.InstanceID, i, sts)
			}
			if i > 0 && len(sts) == 1 {
				durable++
				if prev := got[i-1]; len(prev) != 1 || prev[0] != instance.StepSucceeded {
					t.Errorf("run %d: s%d is durable while s%d is %v", inst.InstanceID, i, i-1, prev)
				}
			}
		}
		if r := e.instanceStatus(inst); r != instance.WorkflowInProgress && len(got) < steps {
			t.Errorf("run %d is %s with %d of %d steps durable", inst.InstanceID, r, len(got), steps)
		}
	}
	if int64(durable) >= executed {
		t.Fatalf("%d steps durable of %d executed: nothing was in flight at the crash", durable, executed)
	}
	t.Logf("at the crash: %d steps executed, %d durable", executed, durable)
	e.engine(flow.Config{NodeID: "node-b", Runtimes: rts, Lease: time.Second})
	for _, inst := range insts {
		if got := e.wait(inst, time.Minute); got.Status != instance.WorkflowSucceeded {
			t.Fatalf("run %d ended %s", inst.InstanceID, got.Status)
		}
		for i, sts := range e.durableSteps(inst) {
			if len(sts) != 1 || sts[0] != instance.StepSucceeded {
				t.Errorf("run %d step s%d: %v, want one SUCCEEDED attempt", inst.InstanceID, i, sts)
			}
		}
	}
}

// recordsFirst is effect declaring stepruntime.RecordsFirst: its attempts
// are not written STARTING before Start, and their first write is the
// recorded intent.
type recordsFirst struct{ effect }

func (recordsFirst) RecordsFirst() {}

// A step's side effect follows its predecessors' terminal writes, written
// behind, only once they are durable: the effect sees them in the
// database, and its own attempt RUNNING with the recorded intent, whether
// STARTING was written before Start (effect) or not (recordsFirst).
func TestSideEffectWaitsForWritesBehind(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(effect) stepruntime.Runtime{
		"starting written first": func(x effect) stepruntime.Runtime { return x },
		"records first":          func(x effect) stepruntime.Runtime { return recordsFirst{x} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var mu sync.Mutex
			var seen []string
			e.engineWith("Effect", wrap(effect{act: func(ctx context.Context, a *stepruntime.Attempt, recordErr error) stepruntime.Result {
				if recordErr != nil {
					return stepruntime.Result{State: stepruntime.FatalError, Message: recordErr.Error()}
				}
				var n int
				var own, intent string
				err := e.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE step_id <> 's3' AND status = 'SUCCEEDED'),
                        max(status) FILTER (WHERE step_id = 's3'), max(runtime_state->'data'->>'intent') FILTER (WHERE step_id = 's3')
                    FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
					a.WorkflowID, a.InstanceID, a.RunID).Scan(&n, &own, &intent)
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%d predecessors durable, own %s, intent recorded %t, err %v", n, own, intent == a.UUID, err))
				mu.Unlock()
				return stepruntime.Result{State: stepruntime.Done}
			}}))
			def := chainJSON("fxchain", 4)
			def = strings.Replace(def, `"id":"s3","type":"NoOp"`, `"id":"s3","type":"Effect"`, 1)
			e.push(def)
			for range 5 {
				if got := e.wait(e.start("fxchain", nil), 30*time.Second); got.Status != instance.WorkflowSucceeded {
					t.Fatalf("run ended %s", got.Status)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 5 {
				t.Fatalf("effects: %v", seen)
			}
			for _, s := range seen {
				if s != "3 predecessors durable, own RUNNING, intent recorded true, err <nil>" {
					t.Errorf("effect acted with %s", s)
				}
			}
		})
	}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	flowtest.WaitFor(t, within, what, cond)
}

// waitDurable polls until n steps of the run are durable.
func (e *env) waitDurable(inst *execution.Instance, n int) {
	e.t.Helper()
	flowtest.WaitFor(e.t, time.Minute, fmt.Sprintf("%d durable steps of run %d", n, inst.InstanceID), func() bool {
		return len(e.durableSteps(inst)) >= n
	})
}

// instanceStatus is the run's status in the database.
func (e *env) instanceStatus(inst *execution.Instance) instance.WorkflowStatus {
	e.t.Helper()
	var st instance.WorkflowStatus
	err := e.pool.QueryRow(context.Background(), `SELECT status FROM workflow_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`, inst.WorkflowID, inst.InstanceID, inst.RunID).Scan(&st)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// A write behind that fails (a trigger refuses step s2's row) takes every
// later write of its run with it: nothing is written past it, the flow is
// dropped and rebuilt from the database, and once the write can be made
// the run finishes with one SUCCEEDED attempt per step.
func TestNothingWrittenPastAFailedWriteBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `
CREATE FUNCTION refuse_s2() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.step_id = 's2' THEN RAISE EXCEPTION 'step s2 refused by the test'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_s2 BEFORE INSERT ON step_instance FOR EACH ROW EXECUTE FUNCTION refuse_s2();`); err != nil {
		t.Fatal(err)
	}
	e.engine(flow.Config{ReconcileInterval: 300 * time.Millisecond})
	e.push(chainJSON("refused", 6))
	inst := e.start("refused", nil)
	e.waitDurable(inst, 2)
	// Long enough for the flow to be dropped and rebuilt, and to fail
	// again, several times.
	time.Sleep(1500 * time.Millisecond)
	got := e.durableSteps(inst)
	for i := 2; i < 6; i++ {
		if len(got[i]) > 0 {
			t.Errorf("s%d is durable (%v) although s2's write failed", i, got[i])
		}
	}
	if st := e.instanceStatus(inst); st != instance.WorkflowInProgress {
		t.Errorf("run is %s", st)
	}
	if _, err := e.pool.Exec(ctx, `DROP TRIGGER refuse_s2 ON step_instance`); err != nil {
		t.Fatal(err)
	}
	if r := e.wait(inst, time.Minute); r.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", r.Status)
	}
	for i, sts := range e.durableSteps(inst) {
		if len(sts) != 1 || sts[0] != instance.StepSucceeded {
			t.Errorf("s%d: %v, want one SUCCEEDED attempt", i, sts)
		}
	}
}
