package run

import (
	"errors"
	"fmt"
	"slices"

	"github.com/maestro-aws/maestro/engine/instance"
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
