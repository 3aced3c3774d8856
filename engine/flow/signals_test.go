package flow_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
)

// signalDef is a workflow whose step "gated" waits for a signal
// ready_<region> with dt equal to the run's dt and a watermark of at
// least 100, and (when both is set) for a signal "other" too.
func signalDef(id string, both bool) string {
	other := ""
	if both {
		other = `,{"name":"other"}`
	}
	return `{"workflow":{"id":"` + id + `","params":{
			"dt":{"type":"STRING","value":"2026-11-21"},"region":{"type":"STRING","value":"eu"}},
		"steps":[{"step":{"id":"gated","type":"NoOp","signal_dependencies":[
			{"name":"ready_${region}","match_params":{
				"dt":{"param":{"type":"STRING","value":"${dt}"},"operator":"="},
				"watermark":{"param":{"type":"LONG","expression":"50 * 2"},"operator":">="}}}` + other + `]}}]}}`
}

// announced is what announcing one signal did.
type announced struct {
	Signal    *signal.Signal
	Duplicate bool
	Woken     int
}

func (e *env) announce(name string, params map[string]any, requestID string) announced {
	e.t.Helper()
	b := signalbroker.New(e.pool, e.runs, testLogger())
	res, stats, err := b.Announce(context.Background(), []signal.Request{{Name: name, Params: params, RequestID: requestID}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		e.t.Fatalf("announce %s: %v", name, err)
	}
	return announced{Signal: res[0].Signal, Duplicate: res[0].Duplicate, Woken: stats.Woken}
}

// settled waits until the engine has handled every step_update message.
func (e *env) settled() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM maestro_queue_step_update`).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d step_update messages still pending", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stillWaiting checks, after the engine has handled its wakes, that the
// step is WAITING_FOR_SIGNALS.
func (e *env) stillWaiting(inst *execution.Instance, step string) {
	e.t.Helper()
	e.settled()
	if st := e.stepStatuses(inst)[step]; st != instance.StepWaitingForSignals {
		e.t.Fatalf("step %s is %s, want WAITING_FOR_SIGNALS", step, st)
	}
}

func (e *env) timeline(inst *execution.Instance, step string) string {
	e.t.Helper()
	a, err := e.runs.Attempt(context.Background(), inst.WorkflowID, inst.InstanceID, inst.RunID, step, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(a.Timeline)
}

// A step waits until a signal matching its dependency (name interpolated,
// match params evaluated with the workflow's params) arrives; signals
// with another name or non-matching params wake it but do not let it run.
func TestSignalDependencyWaitsForMatchingSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(signalDef("gated_one", false))
	inst := e.start("gated_one", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)

	e.announce("ready_us", map[string]any{"dt": "2026-11-21", "watermark": int64(100)}, "")
	if res := e.announce("ready_eu", map[string]any{"dt": "2026-11-20", "watermark": int64(100)}, ""); res.Woken != 1 {
		t.Fatalf("announcement woke %d steps, want 1", res.Woken)
	}
	e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": int64(99)}, "")
	e.announce("ready_eu", map[string]any{"dt": "2026-11-21"}, "")
	e.stillWaiting(inst, "gated")

	match := e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": "150"}, "")
	got := e.wait(inst, 10*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run %s, steps %v", got.Status, e.stepStatuses(got))
	}
	tl := e.timeline(got, "gated")
	for _, want := range []string{"waiting for signals: ready_eu(dt = 2026-11-21, watermark >= 100)",
		"signal dependency ready_eu met by signal instance " + strconv.FormatInt(match.Signal.Seq, 10)} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %q: %s", want, tl)
		}
	}
}

// Every dependency needs its own signal; a signal stored before the run
// started counts (signals are matched against all stored instances).
func TestSignalDependenciesNeedAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(signalDef("gated_two", true))
	e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": int64(100)}, "")
	inst := e.start("gated_two", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	e.stillWaiting(inst, "gated")
	e.announce("other", nil, "")
	if got := e.wait(inst, 10*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run %s", got.Status)
	}
}

// The same request id twice is one signal: the repeat answers the stored
// instance, says duplicate, and wakes no one.
func TestSignalRequestIDIsOneSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(signalDef("gated_dup", false))
	inst := e.start("gated_dup", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	params := map[string]any{"dt": "2026-11-20", "watermark": int64(1)}
	first := e.announce("ready_eu", params, "req-1")
	second := e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": int64(500)}, "req-1")
	if first.Duplicate || !second.Duplicate || second.Signal.Seq != first.Signal.Seq || second.Woken != 0 {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	// The repeat's (matching) params were not stored.
	e.stillWaiting(inst, "gated")
}

// bypass-dependencies lets a waiting step run, recorded on its timeline;
// from any other status it is a conflict.
func TestBypassDependencies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(signalDef("gated_bypass", false))
	inst := e.start("gated_bypass", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	res, err := e.runs.BypassDependencies(context.Background(), inst.WorkflowID, inst.InstanceID, 0, "gated", "alice")
	if err != nil || res.Status != "ACCEPTED" {
		t.Fatalf("bypass: %+v %v", res, err)
	}
	got := e.wait(inst, 10*time.Second)
	if got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run %s", got.Status)
	}
	if tl := e.timeline(got, "gated"); !strings.Contains(tl, "signal dependencies bypassed by alice") {
		t.Errorf("timeline: %s", tl)
	}
	_, err = e.stepAct(got, "gated", run.StepBypassDependencies)
	if !errors.Is(err, execution.ErrConflict) || !errors.Is(err, run.ErrActionNotAllowed) {
		t.Fatalf("bypass of a SUCCEEDED step: %v", err)
	}
}

// A waiting step survives an engine crash: the new owner resumes it still
// waiting, and it runs when the signal arrives. A bypass recorded while no
// engine runs is honoured by the next owner.
func TestSignalWaitSurvivesEngineRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.engine(flow.Config{})
	e.push(withStrategy(signalDef("gated_restart", false), `"PARALLEL"`))
	waitSignal := e.start("gated_restart", nil)
	waitBypass := e.start("gated_restart", nil)
	e.waitStep(waitSignal, "gated", instance.StepWaitingForSignals)
	e.waitStep(waitBypass, "gated", instance.StepWaitingForSignals)
	first.Crash()

	// Recorded durably with the step_update; nobody handles it yet.
	if _, err := e.runs.BypassDependencies(context.Background(), waitBypass.WorkflowID, waitBypass.InstanceID, 0, "gated", "bob"); err != nil {
		t.Fatal(err)
	}
	e.engine(flow.Config{})
	if got := e.wait(waitBypass, 20*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("bypassed run %s", got.Status)
	}
	e.stillWaiting(waitSignal, "gated")
	e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": int64(100)}, "")
	if got := e.wait(waitSignal, 10*time.Second); got.Status != instance.WorkflowSucceeded {
		t.Fatalf("run %s", got.Status)
	}
	if n := len(e.attempts(waitSignal, "gated")); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// Stop, skip and the step's timeout all apply while a step waits.
func TestStopSkipAndTimeoutWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine(flow.Config{})
	e.push(withStrategy(signalDef("gated_stop", false), `"PARALLEL"`))
	e.push(strings.Replace(signalDef("gated_timeout", false), `"type":"NoOp",`, `"type":"NoOp","timeout":"1s",`, 1))

	inst := e.start("gated_stop", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	e.mustStepAct(inst, "gated", run.StepStop)
	if got := e.wait(inst, 10*time.Second); got.Status != instance.WorkflowStopped || e.stepStatuses(got)["gated"] != instance.StepStopped {
		t.Errorf("stop: run %s, steps %v", got.Status, e.stepStatuses(got))
	}

	inst = e.start("gated_stop", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	e.mustStepAct(inst, "gated", run.StepSkip)
	if got := e.wait(inst, 10*time.Second); got.Status != instance.WorkflowSucceeded || e.stepStatuses(got)["gated"] != instance.StepSkipped {
		t.Errorf("skip: run %s, steps %v", got.Status, e.stepStatuses(got))
	}

	inst = e.start("gated_stop", nil)
	e.waitStep(inst, "gated", instance.StepWaitingForSignals)
	if _, err := e.runs.Act(context.Background(), inst.WorkflowID, inst.InstanceID, 0, run.ActionStop); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(inst, 10*time.Second); got.Status != instance.WorkflowStopped {
		t.Errorf("instance stop: run %s", got.Status)
	}

	inst = e.start("gated_timeout", nil)
	if got := e.wait(inst, 10*time.Second); got.Status != instance.WorkflowFailed || e.stepStatuses(got)["gated"] != instance.StepTimedOut {
		t.Errorf("timeout: run %s, steps %v", got.Status, e.stepStatuses(got))
	}
	// An arriving signal does not wake the ended attempts.
	if res := e.announce("ready_eu", map[string]any{"dt": "2026-11-21", "watermark": int64(100)}, ""); res.Woken != 0 {
		t.Errorf("a signal woke %d ended attempts", res.Woken)
	}
}
