package flow_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// effect is a runtime with a side effect: Execute records its intent with
// Attempt.Record and then calls act.
type effect struct {
	before func(a *stepruntime.Attempt)
	act    func(ctx context.Context, a *stepruntime.Attempt, recordErr error) stepruntime.Result
}

func (effect) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (x effect) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	if x.before != nil {
		x.before(a)
	}
	err := a.Record(ctx, map[string]any{"intent": a.UUID})
	return x.act(ctx, a, err)
}

func (effect) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

func (e *env) engineWith(name string, rt stepruntime.Runtime) *flow.Engine {
	rts := testRuntimes()
	rts[name] = rt
	return e.engine(flow.Config{Runtimes: rts})
}

func (e *env) pushEffect() {
	e.push(`{"workflow":{"id":"fx","steps":[{"step":{"id":"s","type":"Effect"}}]}}`)
}

// When Record returns, the intent is in the database, with the attempt
// RUNNING, before the runtime goes on.
func TestRecordIsDurableBeforeTheCallGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type seen struct {
		status, intent string
		err            error
	}
	got := make(chan seen, 1)
	e.engineWith("Effect", effect{act: func(ctx context.Context, a *stepruntime.Attempt, recordErr error) stepruntime.Result {
		var s seen
		s.err = recordErr
		s.err = errors.Join(s.err, e.pool.QueryRow(ctx, `SELECT status, runtime_state->'data'->>'intent' FROM step_instance WHERE uuid = $1`,
			a.UUID).Scan(&s.status, &s.intent))
		got <- s
		return stepruntime.Result{State: stepruntime.Done}
	}})
	e.pushEffect()
	inst := e.start("fx", nil)
	if st := e.wait(inst, 30*time.Second); st.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", st.Status)
	}
	s := <-got
	att, err := e.runs.Attempt(context.Background(), "fx", inst.InstanceID, inst.RunID, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	uuid := att.UUID
	if s.err != nil || s.status != "RUNNING" || s.intent != uuid {
		t.Fatalf("at Record's return the row was %q with intent %q (want RUNNING, %s); err %v", s.status, s.intent, uuid, s.err)
	}
}

// A node whose lease was not renewed within half a lease by its own clock
// records nothing and must not act; once a heartbeat renews the lease the
// side effect goes ahead.
func TestNoSideEffectWhileTheLeaseIsUncertain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu    sync.Mutex
		calls []error
		eng   *flow.Engine
	)
	first := true
	eng = e.engineWith("Effect", effect{
		before: func(*stepruntime.Attempt) {
			mu.Lock()
			defer mu.Unlock()
			if first {
				first = false
				eng.AgeLeases(2 * time.Second)
			}
		},
		act: func(ctx context.Context, a *stepruntime.Attempt, recordErr error) stepruntime.Result {
			mu.Lock()
			calls = append(calls, recordErr)
			mu.Unlock()
			if recordErr != nil {
				var intent *string
				_ = e.pool.QueryRow(ctx, `SELECT runtime_state->'data'->>'intent' FROM step_instance WHERE uuid = $1`, a.UUID).Scan(&intent)
				if intent != nil {
					return stepruntime.Result{State: stepruntime.FatalError, Message: "the refused intent was written"}
				}
				return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: 50 * time.Millisecond, Data: map[string]any{}}
			}
			return stepruntime.Result{State: stepruntime.Done}
		},
	})
	e.pushEffect()
	inst := e.start("fx", nil)
	if st := e.wait(inst, 30*time.Second); st.Status != instance.WorkflowSucceeded {
		t.Fatalf("run ended %s", st.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) < 2 || !errors.Is(calls[0], stepruntime.ErrLeaseUncertain) || calls[len(calls)-1] != nil {
		t.Fatalf("Record results %v, want ErrLeaseUncertain first and success last", calls)
	}
}

// A stop ends a leaf step's call in flight through its context, and a
// Record after that is refused.
func TestStopCancelsTheCallInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	entered := make(chan struct{}, 1)
	after := make(chan error, 1)
	e.engineWith("Effect", blocking{entered: entered, after: after})
	e.pushEffect()
	inst := e.start("fx", nil)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("Execute never ran")
	}
	if _, err := e.runs.Act(context.Background(), "fx", inst.InstanceID, inst.RunID, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-after:
		if !errors.Is(err, stepruntime.ErrAttemptEnding) {
			t.Errorf("Record after the stop: %v, want ErrAttemptEnding", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call's context was not cancelled")
	}
	if st := e.wait(inst, 20*time.Second); st.Status != instance.WorkflowStopped {
		t.Fatalf("run ended %s", st.Status)
	}
}

// blocking's Execute waits for its context to end, then tries to record.
type blocking struct {
	entered chan struct{}
	after   chan error
}

func (blocking) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (b blocking) Execute(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	b.entered <- struct{}{}
	<-ctx.Done()
	b.after <- a.Record(context.Background(), map[string]any{"late": true})
	return stepruntime.Result{State: stepruntime.Stopped}
}

func (blocking) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}
