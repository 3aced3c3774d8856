package execution

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
)

// BypassDependencies lets the latest attempt of a step WAITING_FOR_SIGNALS
// go on as if its signal dependencies were met. The bypass is recorded on
// the attempt's wait in the same transaction as the step_update that wakes
// it, so it survives an engine restart; the engine notes it on the step's
// timeline ("signal dependencies bypassed by <user>"). Any other status, or
// an ended run, is ErrConflict.
func (s *Service) BypassDependencies(ctx context.Context, workflowID string, instanceID, runID int64, stepID, user string) (*StepActionResult, error) {
	action := run.StepBypassDependencies
	inst, a, err := s.actionTarget(ctx, workflowID, instanceID, runID, stepID, action)
	if err != nil {
		return nil, err
	}
	if inst.Status.IsTerminal() {
		return nil, fmt.Errorf("%w: step action %s: workflow instance %s/%d has ended (%s)",
			ErrConflict, action, workflowID, instanceID, inst.Status)
	}
	if user == "" {
		user = definition.Anonymous
	}
	ref := run.Ref{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID}
	key := signal.WaitKey{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID, StepID: stepID, AttemptID: a.AttemptID}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		ok, err := signal.Bypass(ctx, tx, key, user)
		if err != nil {
			return err
		}
		if !ok {
			return errNoLongerWaiting
		}
		_, err = queue.Enqueue(ctx, tx, queue.StepUpdate, inst.groupID,
			run.StepUpdateMessage{Ref: ref, Group: inst.groupID, StepID: stepID})
		return err
	})
	if errors.Is(err, errNoLongerWaiting) {
		return nil, fmt.Errorf("%w: %w: step %s attempt %d of %s is no longer waiting for signals (or was bypassed already)",
			ErrConflict, run.ErrActionNotAllowed, stepID, a.AttemptID, ref)
	}
	if err != nil {
		return nil, err
	}
	return &StepActionResult{WorkflowID: workflowID, InstanceID: instanceID, RunID: inst.RunID, StepID: stepID,
		Action: action, Status: "ACCEPTED"}, nil
}

var errNoLongerWaiting = errors.New("no longer waiting for signals")
