package flow

import (
	"fmt"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// stepAction applies a step action inside the flow actor. It re-checks the
// action against the in-memory state, which may have moved on since the
// API checked it.
func (f *flowActor) stepAction(id string, action run.Action, reason string) error {
	node := f.nodes[id]
	s := f.steps[id]
	if node == nil || s == nil {
		return fmt.Errorf("%w: step %s of %s has no attempt", run.ErrActionNotAllowed, id, f.ref)
	}
	if f.stopping != "" {
		return fmt.Errorf("%w: run %s is stopping", run.ErrActionNotAllowed, f.ref)
	}
	if f.running[id] == nil {
		if err := run.CheckStepAction(s.status, action); err != nil {
			return err
		}
	}
	if reason == "" {
		reason = fmt.Sprintf("%s by user", action)
	}
	if a := f.running[id]; a != nil {
		var to instance.StepStatus
		switch action {
		case run.StepStop:
			to = instance.StepStopped
		case run.StepKill:
			to = instance.StepFatallyFailed
		case run.StepSkip:
			to = instance.StepSkipped
		default:
			return fmt.Errorf("%w: step action %s on a running attempt", run.ErrActionNotAllowed, action)
		}
		a.inbox.send(stepMsg{kind: msgStop, status: to, reason: reason, kill: action == run.StepKill})
		return nil
	}
	// The latest attempt is over (or waits for its automatic retry).
	if t := f.retries[id]; t != nil {
		t.Stop()
		delete(f.retries, id)
	}
	switch action {
	case run.StepRestart:
		if s.status.IsComplete() {
			return fmt.Errorf("%w: step %s is %s and run %s is still running; restart it once the run has ended",
				run.ErrActionNotAllowed, id, s.status, f.ref)
		}
		next := nextRetry(s)
		next.ManualRetries++
		a := newAttempt(f, node, s.attempt+1, next)
		a.rt = f.eng.cfg.Runtimes[string(node.Type())]
		f.steps[id] = &stepSummary{id: id, attempt: a.attempt, status: instance.StepNotCreated, retry: next}
		f.launch(a)
		return nil
	case run.StepSkip:
		return f.recordAttempt(id, s.attempt+1, s.retry, instance.StepSkipped, reason)
	case run.StepStop:
		return f.recordAttempt(id, s.attempt+1, s.retry, instance.StepStopped, reason)
	case run.StepKill:
		if err := f.recordAttempt(id, s.attempt+1, s.retry, instance.StepFatallyFailed, reason); err != nil {
			return err
		}
		if node.Common().EffectiveFailureMode() == workflow.FailureModeFailImmediately {
			f.stopAll(instance.WorkflowFailed, fmt.Sprintf("step %s killed with FAIL_IMMEDIATELY", id))
		}
		return nil
	}
	return fmt.Errorf("%w: step action %s", run.ErrActionNotAllowed, action)
}

// recordAttempt writes a new attempt of a step that ends without running
// (a skip, or a stop or kill of a step waiting for its retry).
func (f *flowActor) recordAttempt(id string, attempt int64, retry instance.RetryInfo, status instance.StepStatus, reason string) error {
	retry.Retryable = false
	return f.recordEnded(id, attempt, retry, status, reason)
}
