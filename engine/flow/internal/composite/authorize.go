package composite

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A step that starts another workflow acts for the owner of its own
// workflow: the child is created only when that owner may start the
// target directly (docs/security.md, "Runs started by steps"). Without
// this, anyone could run anyone's workflow, with params of their choosing,
// by pushing a workflow of their own with a subworkflow step.

// sqlWorkflowAccess reads a workflow's owner (properties.owner, else its
// creator) and the operators its properties name.
const sqlWorkflowAccess = `SELECT owner, properties->'access_control'->'operators' FROM workflow WHERE workflow_id = $1`

// workflowAccess returns the owner and operators of workflowID; ok is
// false when the workflow does not exist.
func workflowAccess(ctx context.Context, q run.Tx, workflowID string) (owner string, operators []string, ok bool, err error) {
	var raw []byte
	err = q.QueryRow(ctx, sqlWorkflowAccess, workflowID).Scan(&owner, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("read the owner of workflow %s: %w", workflowID, err)
	}
	return owner, workflow.Operators(raw), true, nil
}

// authorizeChild decides, in the transaction that would create the child,
// whether the owner of the parent run's workflow may start target. It
// returns the principal the child is started for (recorded in its
// initiator), or a *childError naming the target when the owner may not.
func (h *host) authorizeChild(ctx context.Context, q run.Tx, parent run.Ref, target string) (string, error) {
	parentID := instance.RootWorkflowID(parent.WorkflowID)
	by, _, ok, err := workflowAccess(ctx, q, parentID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &childError{msg: fmt.Sprintf("workflow %s of the parent run does not exist", parentID)}
	}
	owner, operators, exists, err := workflowAccess(ctx, q, target)
	if err != nil {
		return "", err
	}
	// Starting a run is an operator's action (access_control.operators).
	err = h.Policy.Decide(by, authz.Operator, authz.Target{Kind: "workflow", ID: target, Exists: exists, Owner: owner, Operators: operators})
	if err != nil {
		return "", &childError{msg: fmt.Sprintf("subworkflow %s may not be started by a step of %s: its owner %s may not start it directly (%v)",
			target, parentID, by, err)}
	}
	return by, nil
}
