package membership

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Fair share of flow groups (docs/engine.md, "Sharing the groups"). Every
// heartbeat round a node renews its membership (the engine_node table) and
// reads the live nodes; each targets its share of the groups. A node over
// its share releases the surplus cleanly; one under it claims free or
// expired groups. All nodes compute the same shares from the same sorted
// membership, so they converge without negotiating.

// fairShare is how many of groups the node should hold among the live
// nodes (sorted by id) that are not draining: groups / nodes, and one more
// for the first groups % nodes of them. A draining node holds none. A node
// missing from live (its membership could not be read) holds what a lone
// node would, and so does every node when all are draining (an operator
// forced it: the groups must not stop).
func fairShare(groups int, live []Member, node string) int {
	self := slices.IndexFunc(live, func(m Member) bool { return m.NodeID == node })
	if self < 0 {
		return groups
	}
	active := make([]Member, 0, len(live))
	for _, m := range live {
		if !m.Draining {
			active = append(active, m)
		}
	}
	if len(active) == 0 {
		active = live
	} else if live[self].Draining {
		return 0
	}
	n := len(active)
	idx := slices.IndexFunc(active, func(m Member) bool { return m.NodeID == node })
	share := groups / n
	if idx < groups%n {
		share++
	}
	return share
}

// isDraining reports whether live marks node draining.
func isDraining(live []Member, node string) bool {
	i := slices.IndexFunc(live, func(m Member) bool { return m.NodeID == node })
	return i >= 0 && live[i].Draining
}

// nextExpiry is when the first other live node's membership runs out, if
// that comes before the next regular heartbeat: its groups' leases run out
// with it (both are renewed in one round), so the node claims them at that
// moment rather than up to a heartbeat later.
func nextExpiry(live []Member, node string, heartbeat time.Duration) (time.Duration, bool) {
	soonest, found := heartbeat, false
	for _, m := range live {
		if m.NodeID != node && m.ExpiresIn < soonest {
			soonest, found = m.ExpiresIn, true
		}
	}
	return soonest, found
}

// releaseSurplus gives up k groups so that nodes under their share can
// claim them: the groups with the fewest runtime calls and flows in flight
// go first. No new work starts in them; the work under way gets up to half
// a lease to finish; then their leases end and the rows are released (the
// generation moves on, so anything this node still writes for them is
// refused).
func (n *Node) releaseSurplus(ctx context.Context, k int) {
	n.mu.RLock()
	ls := make([]*Lease, 0, len(n.held))
	for _, l := range n.held {
		ls = append(ls, l)
	}
	n.mu.RUnlock()
	// The host is asked without n.mu held: it never holds its own locks
	// while calling the node, and the node does the same.
	flows := make(map[int32]int, len(ls))
	for _, l := range ls {
		flows[l.Group] = n.host.Flows(l.Group)
	}
	slices.SortFunc(ls, func(a, b *Lease) int {
		return cmp.Or(cmp.Compare(a.calls.count(), b.calls.count()),
			cmp.Compare(flows[a.Group], flows[b.Group]), cmp.Compare(b.Group, a.Group))
	})
	ls = ls[:min(k, len(ls))]
	for _, l := range ls {
		l.handingOver.Store(true)
	}
	// No step work starts in these groups now; what is under way (runtime
	// calls, and the writes of their results) finishes, up to half a lease,
	// so that the next owner finds finished steps rather than calls whose
	// outcome it cannot know.
	n.awaitHandOver(ls, n.cfg.Lease/2)
	var lost []*Lease
	n.mu.Lock()
	for _, l := range ls {
		if n.held[l.Group] == l {
			lost = append(lost, n.lose(l))
		}
	}
	n.mu.Unlock()
	n.tellLost(lost)
	held := make([]Claim, len(ls))
	for i, l := range ls {
		held[i] = l.claim()
	}
	if err := n.store.release(ctx, n.cfg.NodeID, held); err != nil {
		// The groups stay leased to this node until they expire; the node
		// no longer acts for them, so their next owner waits out the lease.
		n.cfg.Logger.Warn("release surplus flow groups", "error", err.Error())
		return
	}
	for _, c := range held {
		n.cfg.Logger.Info("released flow group to a node under its share", "group_id", c.ID, "generation", c.Generation)
	}
}

// awaitCalls waits, up to d and for all leases at once, for the runtime
// calls of groups this node has stopped acting for.
func (n *Node) awaitCalls(ls []*Lease, d time.Duration) {
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !l.calls.waitFor(d) {
				n.cfg.Logger.Warn("releasing a flow group whose runtime calls are still running; the next owner finds them",
					"group_id", l.Group)
			}
		}()
	}
	wg.Wait()
}

// awaitHandOver waits, up to d, until the groups have no runtime call in
// flight and their flows have settled: a flow at work stops at its next
// step launch (after its last result is written), one waiting for a timer,
// a signal or a child run stays as it is, and neither changes the count of
// live flows for a while.
func (n *Node) awaitHandOver(ls []*Lease, d time.Duration) {
	const settle = 50 * time.Millisecond
	deadline := time.Now().Add(d)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		calls, flows := 0, 0
		for _, l := range ls {
			calls += l.calls.count()
			flows += n.host.Flows(l.Group)
		}
		if flows != last || calls > 0 {
			last, since = flows, time.Now()
		} else if time.Since(since) >= settle {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	n.cfg.Logger.Warn("handing over flow groups with work still under way; the next owner resumes it")
}

// followGroupCount takes a raised recorded count (engine/groupcount.Raise)
// as this node's: the new groups' rows are made and shared out from this
// round on. Runs keep the group they started in, so nothing moves. A
// recorded count below the node's own is ignored: counts never go down.
func (n *Node) followGroupCount(ctx context.Context, recorded int) {
	current := n.GroupCount()
	if recorded <= current {
		return
	}
	if err := n.store.ensureGroups(ctx, recorded); err != nil {
		n.cfg.Logger.Warn("create the flow groups of a raised count", "group_count", recorded, "error", err.Error())
		return
	}
	n.groupCount.Store(int32(recorded))
	n.cfg.Logger.Info("flow group count raised", "from", current, "to", recorded)
}

// newStoppedTimer is a timer that fires only once Reset.
func newStoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}
