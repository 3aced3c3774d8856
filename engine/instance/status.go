// Package instance models what a run of a workflow is made of: workflow
// instances, step attempts, their statuses and the legal transitions between
// them, and the timeline each keeps.
package instance

import (
	"errors"
	"fmt"
)

// ErrInvalidTransition reports a status change the state machine forbids.
var ErrInvalidTransition = errors.New("invalid status transition")

// WorkflowStatus is the status of a workflow instance run.
type WorkflowStatus string

// Workflow instance statuses, as in Maestro.
const (
	WorkflowCreated    WorkflowStatus = "CREATED"
	WorkflowInProgress WorkflowStatus = "IN_PROGRESS"
	WorkflowPaused     WorkflowStatus = "PAUSED"
	WorkflowTimedOut   WorkflowStatus = "TIMED_OUT"
	WorkflowStopped    WorkflowStatus = "STOPPED"
	WorkflowFailed     WorkflowStatus = "FAILED"
	WorkflowSucceeded  WorkflowStatus = "SUCCEEDED"
)

// IsTerminal reports whether the run is over.
func (s WorkflowStatus) IsTerminal() bool {
	switch s {
	case WorkflowTimedOut, WorkflowStopped, WorkflowFailed, WorkflowSucceeded:
		return true
	}
	return false
}

var workflowTransitions = map[WorkflowStatus][]WorkflowStatus{
	WorkflowCreated:    {WorkflowInProgress, WorkflowStopped, WorkflowFailed, WorkflowTimedOut},
	WorkflowInProgress: {WorkflowPaused, WorkflowSucceeded, WorkflowFailed, WorkflowStopped, WorkflowTimedOut},
	WorkflowPaused:     {WorkflowInProgress, WorkflowStopped, WorkflowFailed, WorkflowTimedOut},
}

// CheckWorkflowTransition returns ErrInvalidTransition unless from → to is legal.
func CheckWorkflowTransition(from, to WorkflowStatus) error {
	for _, s := range workflowTransitions[from] {
		if s == to {
			return nil
		}
	}
	return fmt.Errorf("%w: workflow instance %s -> %s", ErrInvalidTransition, from, to)
}

// StepStatus is the status of one step attempt.
type StepStatus string

// Step attempt statuses, as in Maestro.
const (
	StepNotCreated         StepStatus = "NOT_CREATED"
	StepCreated            StepStatus = "CREATED"
	StepInitialized        StepStatus = "INITIALIZED"
	StepPaused             StepStatus = "PAUSED"
	StepWaitingForSignals  StepStatus = "WAITING_FOR_SIGNALS"
	StepEvaluatingParams   StepStatus = "EVALUATING_PARAMS"
	StepWaitingForPermits  StepStatus = "WAITING_FOR_PERMITS"
	StepStarting           StepStatus = "STARTING"
	StepRunning            StepStatus = "RUNNING"
	StepFinishing          StepStatus = "FINISHING"
	StepDisabled           StepStatus = "DISABLED"
	StepUnsatisfied        StepStatus = "UNSATISFIED"
	StepSkipped            StepStatus = "SKIPPED"
	StepSucceeded          StepStatus = "SUCCEEDED"
	StepCompletedWithError StepStatus = "COMPLETED_WITH_ERROR"
	StepUserFailed         StepStatus = "USER_FAILED"
	StepPlatformFailed     StepStatus = "PLATFORM_FAILED"
	StepTimeoutFailed      StepStatus = "TIMEOUT_FAILED"
	StepFatallyFailed      StepStatus = "FATALLY_FAILED"
	StepInternallyFailed   StepStatus = "INTERNALLY_FAILED"
	StepStopped            StepStatus = "STOPPED"
	StepTimedOut           StepStatus = "TIMED_OUT"
)

// IsTerminal reports whether the attempt is over. USER_FAILED,
// PLATFORM_FAILED and TIMEOUT_FAILED end an attempt that will be retried as
// a new attempt.
func (s StepStatus) IsTerminal() bool {
	switch s {
	case StepDisabled, StepUnsatisfied, StepSkipped, StepSucceeded, StepCompletedWithError,
		StepUserFailed, StepPlatformFailed, StepTimeoutFailed,
		StepFatallyFailed, StepInternallyFailed, StepStopped, StepTimedOut:
		return true
	}
	return false
}

// IsComplete reports whether downstream steps may treat the step as done:
// it finished successfully, was skipped, or failed with IGNORE_FAILURE.
func (s StepStatus) IsComplete() bool {
	switch s {
	case StepDisabled, StepUnsatisfied, StepSkipped, StepSucceeded, StepCompletedWithError:
		return true
	}
	return false
}

// IsRetryable reports whether the attempt ended in a failure that a new
// attempt may fix.
func (s StepStatus) IsRetryable() bool {
	return s == StepUserFailed || s == StepPlatformFailed || s == StepTimeoutFailed
}

// failed ends reachable from any live status.
var stepEnds = []StepStatus{
	StepUserFailed, StepPlatformFailed, StepTimeoutFailed, StepFatallyFailed,
	StepInternallyFailed, StepStopped, StepTimedOut, StepCompletedWithError, StepSkipped,
}

func with(ss ...StepStatus) []StepStatus { return append(ss, stepEnds...) }

// stepTransitions is the step state machine (docs/engine.md draws it).
var stepTransitions = map[StepStatus][]StepStatus{
	StepNotCreated:        {StepCreated},
	StepCreated:           with(StepInitialized, StepUnsatisfied, StepDisabled),
	StepInitialized:       with(StepPaused, StepWaitingForSignals),
	StepPaused:            with(StepWaitingForSignals),
	StepWaitingForSignals: with(StepEvaluatingParams),
	StepEvaluatingParams:  with(StepWaitingForPermits),
	StepWaitingForPermits: with(StepStarting),
	StepStarting:          with(StepRunning),
	StepRunning:           with(StepFinishing),
	StepFinishing:         with(StepSucceeded),
}

// CheckStepTransition returns ErrInvalidTransition unless from → to is legal.
func CheckStepTransition(from, to StepStatus) error {
	for _, s := range stepTransitions[from] {
		if s == to {
			return nil
		}
	}
	return fmt.Errorf("%w: step %s -> %s", ErrInvalidTransition, from, to)
}
