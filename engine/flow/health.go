package flow

import (
	"context"
	"time"

	"github.com/maestro-aws/maestro/engine/membership"
)

// Health is a node's view of its own health (membership.Health), for the
// engine's health endpoint (engine/health) and its metrics.
type Health = membership.Health

// Health checks the node's membership: the database answers, its leases
// are renewed, and it holds groups unless live nodes hold them all.
func (e *Engine) Health(ctx context.Context, timeout time.Duration) Health {
	return e.members.Health(ctx, timeout)
}
