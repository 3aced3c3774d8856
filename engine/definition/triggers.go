package definition

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/trigger"
)

// syncTriggers keeps the workflow's time and signal triggers
// (engine/trigger) in step with a change of its active version or
// properties, in the change's transaction, so they start or stop with it.
// A deleted workflow's go with its row (ON DELETE CASCADE).
func syncTriggers(ctx context.Context, tx pgx.Tx, workflowID string) error {
	if err := trigger.Sync(ctx, tx, workflowID, time.Now()); err != nil {
		return err
	}
	return trigger.SyncSignals(ctx, tx, workflowID)
}
