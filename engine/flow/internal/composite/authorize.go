package composite

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// A step that starts another workflow acts for the owner of its own
// workflow: the child is created only when that owner may start the
// target directly (docs/security.md, "Runs started by steps"). Without
// this, anyone could run anyone's workflow, with params of their choosing,
// by pushing a workflow of their own with a subworkflow step.

// sqlWorkflowOwner reads a workflow's owner (properties.owner, else its
// creator).
const sqlWorkflowOwner = `SELECT owner FROM workflow WHERE workflow_id = $1`

// workflowOwner returns the owner of workflowID; ok is false when the
// workflow does not exist.
func workflowOwner(ctx context.Context, q run.Tx, workflowID string) (owner string, ok bool, err error) {
	err = q.QueryRow(ctx, sqlWorkflowOwner, workflowID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the owner of workflow %s: %w", workflowID, err)
	}
	return owner, true, nil
}

// authorizeChild decides, in the transaction that would create the child,
// whether the owner of the parent run's workflow may start target. It
// returns the principal the child is started for (recorded in its
// initiator), or a *childError naming the target when the owner may not.
func (h *host) authorizeChild(ctx context.Context, q run.Tx, parent run.Ref, target string) (string, error) {
	parentID := instance.RootWorkflowID(parent.WorkflowID)
	by, ok, err := workflowOwner(ctx, q, parentID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &childError{msg: fmt.Sprintf("workflow %s of the parent run does not exist", parentID)}
	}
	owner, exists, err := workflowOwner(ctx, q, target)
	if err != nil {
		return "", err
	}
	err = h.Policy.Decide(by, authz.Owner, authz.Target{Kind: "workflow", ID: target, Exists: exists, Owner: owner})
	if err != nil {
		return "", &childError{msg: fmt.Sprintf("subworkflow %s may not be started by a step of %s: its owner %s may not start it directly (%v)",
			target, parentID, by, err)}
	}
	return by, nil
}
