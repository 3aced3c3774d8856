package flow

import (
	"errors"
	"fmt"
	"slices"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Step actions, as Maestro names them in its REST paths.
const (
	StepRestart Action = "restart"
	StepSkip    Action = "skip"
	StepStop    Action = "stop"
	StepKill    Action = "kill"
	// StepBypassDependencies lets a step waiting for its signal
	// dependencies go on without them.
	StepBypassDependencies Action = "bypass-dependencies"
)

// Instance actions beyond stop and kill.
const (
	ActionRestart Action = "restart"
	ActionUnblock Action = "unblock"
)

// ErrActionNotAllowed reports an action the target's status does not allow.
var ErrActionNotAllowed = errors.New("action not allowed from the current status")

var (
	liveStepStatuses = []instance.StepStatus{
		instance.StepCreated, instance.StepInitialized, instance.StepPaused, instance.StepWaitingForSignals,
		instance.StepEvaluatingParams, instance.StepWaitingForPermits, instance.StepStarting, instance.StepRunning,
		instance.StepFinishing,
	}
	completeStepStatuses = []instance.StepStatus{
		instance.StepSucceeded, instance.StepCompletedWithError, instance.StepSkipped, instance.StepUnsatisfied,
		instance.StepDisabled,
	}
	retryingStepStatuses = []instance.StepStatus{
		instance.StepUserFailed, instance.StepPlatformFailed, instance.StepTimeoutFailed,
	}
	failedStepStatuses = []instance.StepStatus{
		instance.StepFatallyFailed, instance.StepInternallyFailed, instance.StepStopped, instance.StepTimedOut,
	}
)

// StepActionMap is which step actions each status of a step's latest
// attempt allows:
//   - a live attempt may be stopped (STOPPED), killed (FATALLY_FAILED, the
//     failure mode applies) or skipped (SKIPPED: successors run); one
//     WAITING_FOR_SIGNALS may also bypass its signal dependencies;
//   - a failed attempt waiting for its automatic retry may be restarted at
//     once (a manual retry), skipped, stopped or killed (no more retries);
//   - a failed, stopped or timed-out attempt may be restarted or skipped;
//   - a completed step may be restarted (once its run has ended: a new run
//     from that step).
func StepActionMap() map[instance.StepStatus][]Action {
	m := map[instance.StepStatus][]Action{}
	for _, s := range liveStepStatuses {
		m[s] = []Action{StepStop, StepKill, StepSkip}
	}
	m[instance.StepWaitingForSignals] = append(m[instance.StepWaitingForSignals], StepBypassDependencies)
	for _, s := range retryingStepStatuses {
		m[s] = []Action{StepRestart, StepSkip, StepStop, StepKill}
	}
	for _, s := range failedStepStatuses {
		m[s] = []Action{StepRestart, StepSkip}
	}
	for _, s := range completeStepStatuses {
		m[s] = []Action{StepRestart}
	}
	return m
}

// InstanceActionMap is which actions each workflow instance status allows.
func InstanceActionMap() map[instance.WorkflowStatus][]Action {
	return map[instance.WorkflowStatus][]Action{
		instance.WorkflowCreated:    {ActionStop, ActionKill},
		instance.WorkflowInProgress: {ActionStop, ActionKill},
		instance.WorkflowPaused:     {ActionStop, ActionKill},
		instance.WorkflowSucceeded:  {ActionRestart},
		instance.WorkflowFailed:     {ActionRestart, ActionUnblock},
		instance.WorkflowStopped:    {ActionRestart},
		instance.WorkflowTimedOut:   {ActionRestart},
	}
}

// CheckStepAction returns ErrActionNotAllowed unless action is allowed on a
// step whose latest attempt is status.
func CheckStepAction(status instance.StepStatus, action Action) error {
	if slices.Contains(StepActionMap()[status], action) {
		return nil
	}
	return fmt.Errorf("%w: step action %s from status %s (allowed: %v)", ErrActionNotAllowed, action, status, StepActionMap()[status])
}

// CheckInstanceAction returns ErrActionNotAllowed unless action is allowed
// on a run whose status is status.
func CheckInstanceAction(status instance.WorkflowStatus, action Action) error {
	if slices.Contains(InstanceActionMap()[status], action) {
		return nil
	}
	return fmt.Errorf("%w: instance action %s from status %s (allowed: %v)", ErrActionNotAllowed, action, status, InstanceActionMap()[status])
}

// stepAction applies a step action inside the flow actor. It re-checks the
// action against the in-memory state, which may have moved on since the
// API checked it.
func (f *flowActor) stepAction(id string, action Action, reason string) error {
	node := f.nodes[id]
	s := f.steps[id]
	if node == nil || s == nil {
		return fmt.Errorf("%w: step %s of %s has no attempt", ErrActionNotAllowed, id, f.ref)
	}
	if f.stopping != "" {
		return fmt.Errorf("%w: run %s is stopping", ErrActionNotAllowed, f.ref)
	}
	if f.running[id] == nil {
		if err := CheckStepAction(s.status, action); err != nil {
			return err
		}
	}
	if reason == "" {
		reason = fmt.Sprintf("%s by user", action)
	}
	if a := f.running[id]; a != nil {
		var to instance.StepStatus
		switch action {
		case StepStop:
			to = instance.StepStopped
		case StepKill:
			to = instance.StepFatallyFailed
		case StepSkip:
			to = instance.StepSkipped
		default:
			return fmt.Errorf("%w: step action %s on a running attempt", ErrActionNotAllowed, action)
		}
		a.inbox.send(stepMsg{kind: msgStop, status: to, reason: reason, kill: action == StepKill})
		return nil
	}
	// The latest attempt is over (or waits for its automatic retry).
	if t := f.retries[id]; t != nil {
		t.Stop()
		delete(f.retries, id)
	}
	switch action {
	case StepRestart:
		if s.status.IsComplete() {
			return fmt.Errorf("%w: step %s is %s and run %s is still running; restart it once the run has ended",
				ErrActionNotAllowed, id, s.status, f.ref)
		}
		next := nextRetry(s)
		next.ManualRetries++
		a := newAttempt(f, node, s.attempt+1, next)
		a.rt = f.eng.cfg.Runtimes[string(node.Type())]
		f.steps[id] = &stepSummary{id: id, attempt: a.attempt, status: instance.StepNotCreated, retry: next}
		f.launch(a)
		return nil
	case StepSkip:
		return f.recordAttempt(id, s.attempt+1, s.retry, instance.StepSkipped, reason)
	case StepStop:
		return f.recordAttempt(id, s.attempt+1, s.retry, instance.StepStopped, reason)
	case StepKill:
		if err := f.recordAttempt(id, s.attempt+1, s.retry, instance.StepFatallyFailed, reason); err != nil {
			return err
		}
		if node.Common().EffectiveFailureMode() == workflow.FailureModeFailImmediately {
			f.stopAll(instance.WorkflowFailed, fmt.Sprintf("step %s killed with FAIL_IMMEDIATELY", id))
		}
		return nil
	}
	return fmt.Errorf("%w: step action %s", ErrActionNotAllowed, action)
}

// recordAttempt writes a new attempt of a step that ends without running
// (a skip, or a stop or kill of a step waiting for its retry).
func (f *flowActor) recordAttempt(id string, attempt int64, retry instance.RetryInfo, status instance.StepStatus, reason string) error {
	retry.Retryable = false
	return f.recordEnded(id, attempt, retry, status, reason)
}
