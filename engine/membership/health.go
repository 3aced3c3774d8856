package membership

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Health is a node's view of its own health, for the engine's health
// endpoint (engine/health) and its metrics.
type Health struct {
	// NodeID names the node.
	NodeID string `json:"node_id"`
	// Healthy is false when any Problems are listed.
	Healthy bool `json:"healthy"`
	// Problems say why the node is unhealthy.
	Problems []string `json:"problems,omitempty"`
	// OwnedGroups is the number of flow groups the node holds.
	OwnedGroups int `json:"owned_groups"`
	// UnownedGroups is the number of groups no node holds under a live
	// lease (free or expired); -1 when the database could not be read.
	UnownedGroups int `json:"unowned_groups"`
	// LastLeaseRound is when the node last renewed its leases and looked
	// for free groups successfully.
	LastLeaseRound time.Time `json:"last_lease_round"`
}

// OK reports whether the node is healthy (health.Report).
func (h Health) OK() bool { return h.Healthy }

// Health checks the node. It is unhealthy when
//   - its database does not answer within timeout;
//   - its last successful lease round is older than a lease, so it can no
//     longer know that it holds its groups (it fences itself meanwhile);
//   - it holds no group while groups are free or expired, so it cannot do
//     the work it is there for. A node that holds no group because live
//     nodes hold them all is a healthy standby, and so is a node an
//     operator drains (maestro ops drain).
func (n *Node) Health(ctx context.Context, timeout time.Duration) Health {
	h := Health{NodeID: n.cfg.NodeID, OwnedGroups: len(n.Owned()), UnownedGroups: -1, LastLeaseRound: n.lastLeaseRound()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unowned, err := n.store.unowned(ctx, n.GroupCount())
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", timeout)
		}
		h.Problems = append(h.Problems, fmt.Sprintf("database unreachable: %v", err))
	} else {
		h.UnownedGroups = unowned
	}
	if age := time.Since(h.LastLeaseRound); age > n.cfg.Lease {
		h.Problems = append(h.Problems, fmt.Sprintf("no successful lease round for %s (lease %s)", age.Round(time.Millisecond), n.cfg.Lease))
	}
	if h.OwnedGroups == 0 && unowned > 0 && !n.drained.Load() {
		h.Problems = append(h.Problems, fmt.Sprintf("holds no flow group while %d are free or expired", unowned))
	}
	h.Healthy = len(h.Problems) == 0
	return h
}

// leaseRoundDone records a successful lease round.
func (n *Node) leaseRoundDone(t time.Time) { n.leaseRound.Store(t.UnixNano()) }

func (n *Node) lastLeaseRound() time.Time { return time.Unix(0, n.leaseRound.Load()) }
