package membership

import (
	"context"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// adoptParallelism bounds how many claimed groups are adopted at once: a
// takeover of a dead node's groups reads their flows concurrently rather
// than one group after another.
const adoptParallelism = 8

// round renews the leases, drops the groups this node lost, renews its
// membership and moves towards its fair share of the groups (share.go): it
// releases its surplus or claims free and expired groups.
func (n *Node) round(ctx context.Context) {
	n.mu.RLock()
	held := make([]Claim, 0, len(n.held))
	for _, l := range n.held {
		held = append(held, l.claim())
	}
	n.mu.RUnlock()
	if len(held) > 0 && !n.heartbeat(ctx, held) {
		return
	}
	live, recorded, err := n.store.register(ctx, n.cfg.NodeID, n.cfg.Lease)
	if err != nil {
		n.cfg.Logger.Warn("renew engine node membership", "error", err.Error())
		return
	}
	n.followGroupCount(ctx, recorded)
	if d, ok := nextExpiry(live, n.cfg.NodeID, n.cfg.HeartbeatInterval); ok {
		n.soon.Reset(d + 10*time.Millisecond)
	}
	share := min(n.maxGroups(), fairShare(n.GroupCount(), live, n.cfg.NodeID))
	if drain := isDraining(live, n.cfg.NodeID) && share == 0; drain != n.drained.Swap(drain) {
		n.cfg.Logger.Info("engine node drain changed (maestro ops drain)", "node_id", n.cfg.NodeID, "draining", drain)
	}
	owned := n.heldCount()
	if owned > share {
		n.releaseSurplus(ctx, owned-share)
	}
	if owned >= share {
		n.leaseRoundDone(time.Now())
		return
	}
	claimedAt := time.Now()
	claims, err := n.claim(ctx, func(ctx context.Context) ([]Claim, error) {
		return n.store.claim(ctx, n.cfg.NodeID, n.cfg.Lease, share-owned, n.GroupCount())
	})
	if err != nil {
		n.cfg.Logger.Warn("claim flow groups", "error", err.Error())
		return
	}
	n.leaseRoundDone(time.Now())
	if len(claims) < share-owned {
		// Another node still holds groups it is about to release (it
		// counts this node in at its next round): look again soon.
		n.soon.Reset(n.cfg.HeartbeatInterval / 4)
	}
	if len(claims) == 0 {
		return
	}
	n.adoptAll(ctx, claims, claimedAt)
	ids := make([]int32, 0, len(claims))
	for _, c := range claims {
		ids = append(ids, c.ID)
		if c.Generation > 1 {
			// Owned before: its previous owner released it or let it expire.
			n.cfg.Metrics.Add(metrics.GroupTakeovers, 1)
		}
	}
	n.host.Claimed(ctx, ids)
}

// heartbeat renews the leases of held and gives up those the database no
// longer grants; false when it failed.
func (n *Node) heartbeat(ctx context.Context, held []Claim) bool {
	// The lease runs from when the heartbeat was sent, by this node's
	// clock: the database extends it from its own now(), which is no
	// earlier. A heartbeat that has not answered within half a lease is of
	// no use: the groups are given up by then (watchLeases).
	now := time.Now()
	hctx, cancel := context.WithTimeout(ctx, n.cfg.Lease/2)
	kept, err := n.store.heartbeat(hctx, n.cfg.NodeID, n.cfg.Lease, held)
	cancel()
	if err != nil {
		n.cfg.Logger.Warn("heartbeat failed", "error", err.Error())
		n.DropExpired()
		return false
	}
	var lost []*Lease
	n.mu.Lock()
	for _, c := range held {
		l := n.held[c.ID]
		if l == nil || l.Generation != c.Generation {
			continue // given up meanwhile (watchLeases)
		}
		if !kept[c.ID] {
			n.cfg.Logger.Warn("lost flow group", "group_id", c.ID, "generation", c.Generation)
			lost = append(lost, n.lose(l))
			continue
		}
		l.renew(now)
	}
	n.mu.Unlock()
	n.tellLost(lost)
	return true
}

// claim runs a claim to its end even when the node is stopping (bounded by
// half a lease): a claim the database committed while the node, cancelled
// by Stop, stopped reading its answer would leave groups owned by this
// node that Stop does not know to release, and nobody could take them
// before their lease ran out. Whatever it claims is adopted, so Stop
// releases it.
func (n *Node) claim(ctx context.Context, claim func(context.Context) ([]Claim, error)) ([]Claim, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.Lease/2)
	defer cancel()
	return claim(cctx)
}

// reclaimOwn takes back the groups still leased under this node's id: an
// engine restarted in place (same node id) finds them from its earlier
// process, whose leases have not run out yet, and takes them at once
// instead of waiting. The new generation fences anything the earlier
// process could still write.
func (n *Node) reclaimOwn(ctx context.Context) error {
	// The lease counts from before the write, as for any claim.
	claimedAt := time.Now()
	claims, err := n.claim(ctx, func(ctx context.Context) ([]Claim, error) {
		return n.store.reclaimOwn(ctx, n.cfg.NodeID, n.cfg.Lease, n.maxGroups(), n.GroupCount())
	})
	if err != nil {
		return err
	}
	for _, c := range claims {
		n.cfg.Logger.Info("reclaimed own flow group after a restart", "group_id", c.ID, "generation", c.Generation)
	}
	n.adoptAll(ctx, claims, claimedAt)
	return nil
}

// adoptAll adopts just-claimed groups, adoptParallelism at a time.
func (n *Node) adoptAll(ctx context.Context, claims []Claim, claimedAt time.Time) {
	sem := make(chan struct{}, adoptParallelism)
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n.adopt(ctx, c, claimedAt)
		}()
	}
	wg.Wait()
}

// adopt takes a just-claimed group and hands it to the host. The lease
// runs from claimedAt, when the claim was sent.
func (n *Node) adopt(ctx context.Context, c Claim, claimedAt time.Time) {
	n.awaitDrained(c.ID)
	l := newLease(n.ctx, c, n.cfg.Lease, claimedAt)
	n.mu.Lock()
	n.held[c.ID] = l
	n.mu.Unlock()
	n.cfg.Logger.Info("claimed flow group", "group_id", c.ID, "generation", c.Generation)
	n.host.Adopt(ctx, l)
}

// watchLeases gives up the groups whose lease may have run out by this
// node's clock, on a clock of its own: the heartbeat loop may be stuck in
// a database call that does not answer, and a node resumed after a pause
// must stop before its actors act on groups it no longer holds.
func (n *Node) watchLeases() {
	defer n.wg.Done()
	t := time.NewTicker(max(n.cfg.HeartbeatInterval/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.DropExpired()
		}
	}
}

// DropExpired gives up at once every group whose lease may have run out
// while heartbeats failed: another node may own it by now, and a step must
// never run on two nodes at once. A step that finds its lease no longer
// held calls it rather than wait for the watch's next tick.
func (n *Node) DropExpired() {
	// Stop well before the lease ends so that in-flight work stops first.
	deadline := time.Now().Add(-n.cfg.Lease / 2)
	var lost []*Lease
	n.mu.Lock()
	for id, l := range n.held {
		if l.renewedAt().Before(deadline) {
			n.cfg.Logger.Warn("dropping flow group whose lease could not be renewed", "group_id", id)
			lost = append(lost, n.lose(l))
		}
	}
	n.mu.Unlock()
	n.tellLost(lost)
}

// lose ends a lease; n.mu must be held. The caller tells the host
// (tellLost) once it has let go of n.mu.
func (n *Node) lose(l *Lease) *Lease {
	l.cancel()
	delete(n.held, l.Group)
	n.draining[l.Group] = l
	return l
}

func (n *Node) tellLost(ls []*Lease) {
	for _, l := range ls {
		n.host.Lost(l)
	}
}

// awaitDrained waits, up to a lease, for the runtime calls a previous
// lease of the group started on this node.
func (n *Node) awaitDrained(id int32) {
	n.mu.Lock()
	old := n.draining[id]
	delete(n.draining, id)
	n.mu.Unlock()
	if old == nil {
		return
	}
	if !old.calls.waitFor(n.cfg.Lease) {
		n.cfg.Logger.Warn("runtime calls of a lost group still running; they ignore cancellation", "group_id", id)
	}
}
