package flow

import (
	"context"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/queue"
)

// An engine restarted under the node id it had (a task restarted in place,
// MAESTRO_NODE_ID set) finds the groups and queue claims its earlier
// process left: the groups' leases have not run out yet, and the claims
// would hold their messages for the claim's time-to-live. It takes both
// back at once instead of waiting (issue 15, defect 6). Bumping the
// generation fences anything the earlier process could still write.

// reclaimOwn is the restart's first step: it takes back the groups still
// leased under this node's id and ends the queue claims held under it.
func (e *Engine) reclaimOwn(ctx context.Context) error {
	if _, err := queue.NewStore(e.relaxed).ReleaseNode(ctx, e.cfg.NodeID); err != nil {
		return err
	}
	// The lease counts from before the write, as for any claim.
	claimedAt := time.Now()
	claims, err := e.claimGroups(ctx, func(ctx context.Context) ([]flowstore.GroupClaim, error) {
		return e.store.ReclaimOwnGroups(ctx, e.cfg.NodeID, e.cfg.Lease, e.maxGroups(), e.GroupCount())
	})
	if err != nil {
		return err
	}
	for _, c := range claims {
		e.cfg.Logger.Info("reclaimed own flow group after a restart", "group_id", c.ID, "generation", c.Generation)
	}
	e.adoptAll(ctx, claims, claimedAt)
	return nil
}
