package flowstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// sqlWorkflowOwner reads a workflow's owner (properties.owner, else its
// creator), which a run's owner param holds.
const sqlWorkflowOwner = `SELECT owner FROM workflow WHERE workflow_id = $1`

// WorkflowOwner returns the owner of the pushed workflow a run belongs to;
// "" when the workflow is gone.
func (s *Store) WorkflowOwner(ctx context.Context, ref run.Ref) (string, error) {
	var owner string
	err := s.db.QueryRow(ctx, sqlWorkflowOwner, instance.RootWorkflowID(ref.WorkflowID)).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the owner of %s: %w", ref, err)
	}
	return owner, nil
}
