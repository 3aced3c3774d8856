package flow

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
)

// Fair share of flow groups (docs/engine.md, "Sharing the groups"). Every
// heartbeat round a node renews its membership (the engine_node table) and
// reads the live nodes; each targets its share of the groups. A node over
// its share releases the surplus cleanly; one under it claims free or
// expired groups. All nodes compute the same shares from the same sorted
// membership, so they converge without negotiating.

// adoptParallelism bounds how many claimed groups are adopted at once: a
// takeover of a dead node's groups reads their flows concurrently rather
// than one group after another.
const adoptParallelism = 8

// fairShare is how many of groups the node should hold among the live
// nodes (sorted by id): groups / nodes, and one more for the first
// groups % nodes of them. A node missing from live (its membership could
// not be read) holds what a lone node would.
func fairShare(groups int, live []flowstore.Member, node string) int {
	n := len(live)
	idx := slices.IndexFunc(live, func(m flowstore.Member) bool { return m.NodeID == node })
	if n == 0 || idx < 0 {
		return groups
	}
	share := groups / n
	if idx < groups%n {
		share++
	}
	return share
}

// nextExpiry is when the first other live node's membership runs out, if
// that comes before the next regular heartbeat: its groups' leases run out
// with it (both are renewed in one round), so the node claims them at that
// moment rather than up to a heartbeat later.
func nextExpiry(live []flowstore.Member, node string, heartbeat time.Duration) (time.Duration, bool) {
	soonest, found := heartbeat, false
	for _, m := range live {
		if m.NodeID != node && m.ExpiresIn < soonest {
			soonest, found = m.ExpiresIn, true
		}
	}
	return soonest, found
}

// releaseSurplus gives up n groups so that nodes under their share can
// claim them: the groups with the fewest runtime calls and flows in flight
// go first. Their flows stop, their in-flight runtime calls get up to half
// a lease to return, and the rows are released (the generation moves on, so
// anything this node still writes for them is refused).
func (e *Engine) releaseSurplus(ctx context.Context, n int) {
	e.mu.Lock()
	gs := make([]*group, 0, len(e.groups))
	for _, g := range e.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.calls.count(), b.calls.count()),
			cmp.Compare(a.flowCount(), b.flowCount()), cmp.Compare(b.id, a.id))
	})
	gs = gs[:min(n, len(gs))]
	for _, g := range gs {
		g.handingOver.Store(true)
	}
	e.mu.Unlock()
	// No step work starts in these groups now; what is under way (runtime
	// calls, and the writes of their results) finishes, up to half a lease,
	// so that the next owner finds finished steps rather than calls whose
	// outcome it cannot know.
	e.awaitHandOver(gs, e.cfg.Lease/2)
	e.mu.Lock()
	for _, g := range gs {
		if e.groups[g.id] == g {
			e.lose(g)
		}
	}
	e.mu.Unlock()
	held := make([]flowstore.GroupClaim, len(gs))
	for i, g := range gs {
		held[i] = flowstore.GroupClaim{ID: g.id, Generation: g.gen}
	}
	if err := e.store.ReleaseGroups(ctx, e.cfg.NodeID, held); err != nil {
		// The groups stay leased to this node until they expire; the node
		// no longer acts for them, so their next owner waits out the lease.
		e.cfg.Logger.Warn("release surplus flow groups", "error", err.Error())
		return
	}
	for _, c := range held {
		e.cfg.Logger.Info("released flow group to a node under its share", "group_id", c.ID, "generation", c.Generation)
	}
}

// awaitCalls waits, up to d and for all groups at once, for the runtime
// calls of groups this node has stopped acting for.
func (e *Engine) awaitCalls(gs []*group, d time.Duration) {
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !g.calls.waitFor(d) {
				e.cfg.Logger.Warn("releasing a flow group whose runtime calls are still running; the next owner finds them",
					"group_id", g.id)
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
func (e *Engine) awaitHandOver(gs []*group, d time.Duration) {
	const settle = 50 * time.Millisecond
	deadline := time.Now().Add(d)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		calls, flows := 0, 0
		for _, g := range gs {
			calls += g.calls.count()
			flows += g.flowCount()
		}
		if flows != last || calls > 0 {
			last, since = flows, time.Now()
		} else if time.Since(since) >= settle {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.cfg.Logger.Warn("handing over flow groups with work still under way; the next owner resumes it")
}

// adoptAll adopts just-claimed groups, adoptParallelism at a time.
func (e *Engine) adoptAll(ctx context.Context, claims []flowstore.GroupClaim, claimedAt time.Time) {
	sem := make(chan struct{}, adoptParallelism)
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e.adopt(ctx, c, claimedAt)
		}()
	}
	wg.Wait()
}

// flowCount is how many live flows the group holds.
func (g *group) flowCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.flows)
}

// count is how many calls are in flight.
func (c *inflight) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// waitFor is Wait bounded by d; false when calls were still in flight.
func (c *inflight) waitFor(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// newStoppedTimer is a timer that fires only once Reset.
func newStoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// followGroupCount takes a raised recorded count (engine/groupcount.Raise)
// as this node's: the new groups' rows are made and shared out from this
// round on. Runs keep the group they started in, so nothing moves. A
// recorded count below the node's own is ignored: counts never go down.
func (e *Engine) followGroupCount(ctx context.Context, recorded int) {
	current := e.GroupCount()
	if recorded <= current {
		return
	}
	if err := e.store.EnsureGroups(ctx, recorded); err != nil {
		e.cfg.Logger.Warn("create the flow groups of a raised count", "group_count", recorded, "error", err.Error())
		return
	}
	e.groupCount.Store(int32(recorded))
	e.cfg.Logger.Info("flow group count raised", "from", current, "to", recorded)
}
