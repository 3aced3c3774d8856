package flow

import (
	"time"

	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/queue"
)

// An engine restarted under the node id it had (a task restarted in place,
// MAESTRO_NODE_ID set) finds the groups and queue claims its earlier
// process left: the groups' leases have not run out yet, and the claims
// would hold their messages for the claim's time-to-live. It takes both
// back at once instead of waiting (issue 15, defect 6). Bumping the
// generation fences anything the earlier process could still write.

const reclaimOwnGroupsSQL = `
UPDATE flow_group SET generation = generation + 1, heartbeat_at = now(), expires_at = now() + $2::interval
WHERE group_id IN (
    SELECT group_id FROM flow_group
    WHERE owner = $1 AND group_id < $4
    ORDER BY group_id
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
RETURNING group_id, generation`

// reclaimOwn is the restart's first step: it takes back the groups still
// leased under this node's id and ends the queue claims held under it.
func (e *Engine) reclaimOwn(ctx context.Context) error {
	if _, err := queue.NewStore(e.relaxed).ReleaseNode(ctx, e.cfg.NodeID); err != nil {
		return err
	}
	// The lease counts from before the write, as for any claim.
	claimedAt := time.Now()
	rows, err := e.db.Query(ctx, reclaimOwnGroupsSQL, e.cfg.NodeID, e.cfg.Lease, e.cfg.MaxGroups, e.cfg.GroupCount)
	if err != nil {
		return fmt.Errorf("reclaim own flow groups: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (groupClaim, error) {
		var c groupClaim
		err := r.Scan(&c.ID, &c.Generation)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("reclaim own flow groups: %w", err)
	}
	for _, c := range claims {
		e.cfg.Logger.Info("reclaimed own flow group after a restart", "group_id", c.ID, "generation", c.Generation)
		e.adopt(ctx, c, claimedAt)
	}
	return nil
}
