package flow_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Passivation (engine/flow/passivate.go): a run whose steps all wait leaves
// memory after PassivateAfter, and every kind of wake-up brings it back.

const testPassivateAfter = 300 * time.Millisecond

// waitPassive polls until the engine holds n passivated runs and none in
// memory.
func (e *env) waitPassive(eng *flow.Engine, n int) flow.PassiveStats {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := eng.Passivation()
		if s.Passive == n && s.Live == 0 {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("engine holds %d passivated and %d live runs, want %d and 0", s.Passive, s.Live, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// passiveWake reads the run's stored wake time (NULL: in memory).
func (e *env) passiveWake(inst *execution.Instance) *time.Time {
	e.t.Helper()
	var wake *time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT passive_wake_at FROM workflow_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`, inst.WorkflowID, inst.InstanceID, inst.RunID).
		Scan(&wake); err != nil {
		e.t.Fatal(err)
	}
	return wake
}

func (e *env) wantStatus(inst *execution.Instance, within time.Duration, want instance.WorkflowStatus) *execution.Instance {
	e.t.Helper()
	got := e.wait(inst, within)
	if got.Status != want {
		e.t.Fatalf("run %d is %s, want %s (steps %v)", inst.InstanceID, got.Status, want, e.stepStatuses(got))
	}
	return got
}

// A run sleeping in a step leaves memory, its wake time stored; it comes
// back when the sleep is over, without a second attempt, and finishes.
func TestPassivatedSleepComesBackAndFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(`{"workflow":{"id":"pas_sleep","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":3,"transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}}]}}`)
	inst := e.start("pas_sleep", nil)
	e.waitPassive(eng, 1)
	wake := e.passiveWake(inst)
	if wake == nil {
		t.Fatal("a passivated run has no stored wake time")
	}
	if d := time.Until(*wake); d <= 0 || d > 3*time.Second {
		t.Errorf("wake time is %s away, want within the 3 s sleep", d)
	}
	got := e.wantStatus(inst, 20*time.Second, instance.WorkflowSucceeded)
	if a := e.attempts(got, "nap"); len(a) != 1 || a[0] != instance.StepSucceeded {
		t.Errorf("nap attempts %v, want one SUCCEEDED", a)
	}
	// Brought back ahead of its wake time (wakeLead), the attempt still
	// sleeps its full time.
	var slept time.Duration
	if err := e.pool.QueryRow(context.Background(), `SELECT (extract(epoch FROM end_time - start_time) * 1e9)::bigint
        FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = 'nap'`,
		got.WorkflowID, got.InstanceID, got.RunID).Scan(&slept); err != nil {
		t.Fatal(err)
	}
	if slept < 3*time.Second {
		t.Errorf("nap slept %s, want 3s", slept)
	}
	if e.passiveWake(got) != nil {
		t.Error("an ended run keeps its wake time")
	}
	if s := eng.Passivation(); s.Passivations < 1 || s.Activations < 1 {
		t.Errorf("stats %+v: want a passivation and an activation", s)
	}
}

// A failed step's retry backoff: the run leaves memory while it waits and
// comes back for the retry when the backoff is over.
func TestPassivatedRetryBackoffComesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(`{"workflow":{"id":"pas_retry","steps":[{"step":{"id":"f","type":"Flaky","failures":1,
		"retry_policy":{"error_retry_limit":2,"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":3}}}}]}}`)
	inst := e.start("pas_retry", nil)
	e.waitPassive(eng, 1)
	got := e.wantStatus(inst, 20*time.Second, instance.WorkflowSucceeded)
	if a := e.attempts(got, "f"); len(a) != 2 || a[0] != instance.StepUserFailed || a[1] != instance.StepSucceeded {
		t.Errorf("attempts %v, want USER_FAILED then SUCCEEDED", a)
	}
}

// A step waiting for signals leaves memory; the signal's step_update
// brings it back at once (the fallback recheck is minutes away).
func TestPassivatedSignalWaitComesBackOnSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(signalDef("pas_signal", false))
	inst := e.start("pas_signal", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	e.waitPassive(eng, 1)
	e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": int64(100)}, "")
	e.wantStatus(inst, 10*time.Second, instance.WorkflowSucceeded)
}

// A step paused at a breakpoint leaves memory; resuming it brings it back.
func TestPassivatedBreakpointComesBackOnResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(`{"workflow":{"id":"pas_bp","steps":[{"step":{"id":"b","type":"NoOp"}}]}}`)
	e.setBreakpoint("pas_bp", "b", 0)
	inst := e.start("pas_bp", nil)
	e.waitStep(inst, "b", instance.StepPaused)
	e.waitPassive(eng, 1)
	if n := e.resumePaused("b", "workflow_id = $1", "pas_bp"); n != 1 {
		t.Fatalf("resumed %d attempts, want 1", n)
	}
	e.wantStatus(inst, 10*time.Second, instance.WorkflowSucceeded)
}

// awaiter is a step runtime whose attempts wait for an outside report
// (stepruntime.Woken) and poll only hourly: its Execute succeeds once the
// attempt is released.
type awaiter struct {
	mu       sync.Mutex
	released map[string]bool
}

func (w *awaiter) release(a string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.released[a] = true
}

func (*awaiter) WakesOnUpdate() {}

func (w *awaiter) Start(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (w *awaiter) Execute(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released[a.WorkflowID] {
		return stepruntime.Result{State: stepruntime.Done}
	}
	return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Hour}
}

func (w *awaiter) Terminate(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Stopped}
}

// stepUpdate does what an external completion (engine/stepruntime/completion)
// does once it has stored the report: a step_update message for the step.
func (e *env) stepUpdate(inst *execution.Instance, stepID string) {
	e.t.Helper()
	ctx := context.Background()
	ref := run.Ref{WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID, RunID: inst.RunID}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var group int32
		if err := tx.QueryRow(ctx, `SELECT group_id FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
			ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&group); err != nil {
			return err
		}
		_, err := queue.Enqueue(ctx, tx, queue.StepUpdate, group, run.StepUpdateMessage{Ref: ref, Group: group, StepID: stepID})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// A step waiting for an external completion leaves memory; the
// completion's step_update brings it back and it finishes at once, not at
// its hourly poll.
func TestPassivatedExternalCompletionComesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := &awaiter{released: map[string]bool{}}
	rts := testRuntimes()
	rts["Gauge"] = w
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter, Runtimes: rts})
	e.push(`{"workflow":{"id":"pas_ext","steps":[{"step":{"id":"job","type":"Gauge"}}]}}`)
	inst := e.start("pas_ext", nil)
	e.waitStep(inst, "job", instance.StepRunning)
	e.waitPassive(eng, 1)
	w.release("pas_ext")
	e.stepUpdate(inst, "job")
	e.wantStatus(inst, 10*time.Second, instance.WorkflowSucceeded)
}

// Stop and kill of a passivated run: the action brings it back and ends it.
func TestPassivatedRunStopAndKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(withStrategy(`{"workflow":{"id":"pas_stop","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":3600}}]}}`,
		`{"rule":"PARALLEL","workflow_concurrency":10}`))
	stop, kill := e.start("pas_stop", nil), e.start("pas_stop", nil)
	e.waitPassive(eng, 2)
	ctx := context.Background()
	if _, err := e.runs.Act(ctx, "pas_stop", stop.InstanceID, stop.RunID, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runs.Act(ctx, "pas_stop", kill.InstanceID, kill.RunID, run.ActionKill); err != nil {
		t.Fatal(err)
	}
	e.wantStatus(stop, 10*time.Second, instance.WorkflowStopped)
	e.wantStatus(kill, 10*time.Second, instance.WorkflowFailed)
	if st := e.stepStatuses(stop)["nap"]; st != instance.StepStopped {
		t.Errorf("stopped run's step is %s, want STOPPED", st)
	}
}

// A step action on a passivated run's step brings the run back to apply it.
func TestPassivatedRunStepAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(`{"workflow":{"id":"pas_step","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":3600}}]}}`)
	inst := e.start("pas_step", nil)
	e.waitPassive(eng, 1)
	if _, err := e.runs.StepAct(context.Background(), "pas_step", inst.InstanceID, inst.RunID, "nap", run.StepStop); err != nil {
		t.Fatal(err)
	}
	e.wantStatus(inst, 10*time.Second, instance.WorkflowStopped)
	if st := e.stepStatuses(inst)["nap"]; st != instance.StepStopped {
		t.Errorf("step is %s, want STOPPED", st)
	}
}

// The run's own timeout and a step's timeout are wake times too.
func TestPassivatedRunTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(`{"workflow":{"id":"pas_wf_timeout","timeout":"3s","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":3600}}]}}`)
	e.push(`{"workflow":{"id":"pas_step_timeout","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":3600,"timeout":"3s",
		"retry_policy":{"timeout_retry_limit":0}}}]}}`)
	wf, step := e.start("pas_wf_timeout", nil), e.start("pas_step_timeout", nil)
	e.waitPassive(eng, 2)
	e.wantStatus(wf, 20*time.Second, instance.WorkflowTimedOut)
	e.wantStatus(step, 20*time.Second, instance.WorkflowFailed)
	if st := e.stepStatuses(step)["nap"]; st != instance.StepTimedOut {
		t.Errorf("step is %s, want TIMED_OUT", st)
	}
}

// A subworkflow step waiting for its child leaves memory with its run;
// the child's end brings the parent back at once.
func TestPassivatedParentComesBackWhenChildEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: testPassivateAfter})
	e.push(`{"workflow":{"id":"pas_child","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":4}}]}}`)
	e.push(`{"workflow":{"id":"pas_parent","steps":[{"subworkflow":{"id":"sub","params":{"subworkflow_id":{"type":"STRING","value":"pas_child"}}}}]}}`)
	parent := e.start("pas_parent", nil)
	e.waitPassive(eng, 2)
	start := time.Now()
	e.wantStatus(parent, 30*time.Second, instance.WorkflowSucceeded)
	t.Logf("parent ended %s after both runs were passivated", time.Since(start))
}

// kill -9 of an engine holding passivated runs: the node that takes its
// groups over enumerates them without rebuilding them, and every one
// finishes when it is due.
func TestPassivatedRunsSurviveCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(withStrategy(`{"workflow":{"id":"pas_crash","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":8,"transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}}]}}`, `{"rule":"PARALLEL","workflow_concurrency":20}`))
	a := e.engine(flow.Config{NodeID: "node-a", PassivateAfter: testPassivateAfter, Lease: time.Second})
	var insts []*execution.Instance
	for range 10 {
		insts = append(insts, e.start("pas_crash", nil))
	}
	e.waitPassive(a, len(insts))
	a.Crash()
	b := e.engine(flow.Config{NodeID: "node-b", PassivateAfter: testPassivateAfter, Lease: time.Second})
	// Taken over: enumerated into b's index, not rebuilt.
	deadline := time.Now().Add(20 * time.Second)
	for b.Passivation().Passive < len(insts) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := b.Passivation(); s.Passive != len(insts) || s.Live != 0 {
		t.Errorf("after the takeover b holds %d passivated and %d live runs, want %d and 0", s.Passive, s.Live, len(insts))
	}
	for _, inst := range insts {
		got := e.wantStatus(inst, 30*time.Second, instance.WorkflowSucceeded)
		for _, step := range []string{"nap", "after"} {
			if at := e.attempts(got, step); len(at) != 1 || at[0] != instance.StepSucceeded {
				t.Errorf("run %d step %s attempts %v, want one SUCCEEDED", got.InstanceID, step, at)
			}
		}
	}
}

// Wake-ups racing the hand-off: with a 10 ms threshold runs leave memory
// and come back all the time, while their signals arrive and stop actions
// come at random moments. None may be lost: a lost signal wake-up would
// leave its run waiting for the 15-minute fallback, a lost stop its run
// sleeping for an hour.
func TestPassivationRacesWakeUps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng := e.engine(flow.Config{PassivateAfter: 10 * time.Millisecond})
	e.push(withStrategy(signalDef("pas_race_sig", false), `{"rule":"PARALLEL","workflow_concurrency":100}`))
	e.push(withStrategy(`{"workflow":{"id":"pas_race_stop","steps":[{"step":{"id":"nap","type":"Sleep","sleep_seconds":3600}}]}}`,
		`{"rule":"PARALLEL","workflow_concurrency":100}`))
	const n = 20
	var gated, sleeping []*execution.Instance
	for i := range n {
		dt := fmt.Sprintf("2026-12-%02d", i+1)
		gated = append(gated, e.start("pas_race_sig", workflow.Params{"dt": workflow.LiteralParam(workflow.ParamTypeString, dt)}))
		sleeping = append(sleeping, e.start("pas_race_stop", nil))
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		e.announce("ready_eu", map[string]any{"dt": fmt.Sprintf("2026-12-%02d", i+1), "watermark": int64(100)}, "")
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		if _, err := e.runs.Act(ctx, "pas_race_stop", sleeping[i].InstanceID, sleeping[i].RunID, run.ActionStop); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		e.wantStatus(gated[i], 60*time.Second, instance.WorkflowSucceeded)
		e.wantStatus(sleeping[i], 60*time.Second, instance.WorkflowStopped)
	}
	s := eng.Passivation()
	if s.Passivations == 0 {
		t.Errorf("no run was passivated: %+v", s)
	}
	t.Logf("%d passivations, %d activations", s.Passivations, s.Activations)
}

// A node whose groups were taken over while its runs were passivated (it
// kept running, unaware) cannot bring them back: the bring-back checks the
// group's ownership in its statement. Woken meanwhile, the runs wait for
// the node's heartbeat to claim the expired groups again, and then finish
// with one attempt per step.
func TestPassivatedRunsOfALostGroupAreNotBroughtBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.push(withStrategy(`{"workflow":{"id":"pas_stale","steps":[
		{"step":{"id":"nap","type":"Sleep","sleep_seconds":3,"transition":{"successors":{"after":"true"}}}},
		{"step":{"id":"after","type":"NoOp"}}]}}`, `{"rule":"PARALLEL","workflow_concurrency":20}`))
	eng := e.engine(flow.Config{NodeID: "node-a", PassivateAfter: testPassivateAfter, Lease: time.Second})
	var insts []*execution.Instance
	for range 4 {
		insts = append(insts, e.start("pas_stale", nil))
	}
	e.waitPassive(eng, len(insts))
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE flow_group SET owner = 'thief', generation = generation + 1,
        expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	for _, inst := range insts {
		e.stepUpdate(inst, "nap") // refused until node-a holds the group again
	}
	for _, inst := range insts {
		got := e.wantStatus(inst, 30*time.Second, instance.WorkflowSucceeded)
		for _, step := range []string{"nap", "after"} {
			if at := e.attempts(got, step); len(at) != 1 || at[0] != instance.StepSucceeded {
				t.Errorf("run %d step %s attempts %v, want one SUCCEEDED", got.InstanceID, step, at)
			}
		}
	}
}
