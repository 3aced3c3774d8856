package flow

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/membership"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// The flow runtime's side of group membership (engine/membership): the
// node's membership tells it that a group was adopted at a generation or
// lost, and every step asks the group's lease, by the node's own clock,
// whether it may still act.

// group is a flow group this node holds, with its live flows.
type group struct {
	*membership.Lease
	// id, gen and ctx are the lease's group, generation and context, which
	// every write and actor of the group uses.
	id  int32
	gen int64
	ctx context.Context
	eng *Engine

	mu    sync.Mutex
	flows map[run.Ref]*flowActor
	// passive holds the group's passivated runs (passiveindex.go); listing
	// is set while a takeover enumerates them.
	passive passiveIndex
	listing atomic.Bool
	// activating holds the passivated runs being brought back, each with a
	// channel closed once it is done (passivate.go).
	activating map[run.Ref]chan struct{}
}

func newGroup(e *Engine, l *membership.Lease) *group {
	return &group{Lease: l, id: l.Group, gen: l.Generation, ctx: l.Context(), eng: e, flows: map[run.Ref]*flowActor{}}
}

func (g *group) remove(f *flowActor) {
	g.mu.Lock()
	if g.flows[f.ref] == f {
		delete(g.flows, f.ref)
	}
	g.mu.Unlock()
}

func (g *group) lookup(ref run.Ref) *flowActor {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flows[ref]
}

// flowCount is how many live flows the group holds.
func (g *group) flowCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.flows)
}

// requestReadopt asks the engine's loop to re-adopt the groups' flows, for
// a flow dropped after a transient database error.
func (g *group) requestReadopt() {
	select {
	case g.eng.readopt <- struct{}{}:
	default:
	}
}

func (e *Engine) group(id int32) *group {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.groups[id]
}

// groupHost is the engine as the membership's Host. It never calls the
// membership while holding e.mu.
type groupHost struct{ e *Engine }

var _ membership.Host = groupHost{}

// Adopt stamps the live flows of a just-claimed group with the new
// generation and starts an actor for each.
func (h groupHost) Adopt(ctx context.Context, l *membership.Lease) {
	e := h.e
	g := newGroup(e, l)
	e.mu.Lock()
	// A lease lost before it got here (its context ended first, then Lost
	// came and found nothing to forget) is not kept.
	if l.Context().Err() == nil {
		e.groups[g.id] = g
	}
	e.mu.Unlock()
	if err := e.adoptFlowsAndPassive(ctx, g); err != nil {
		e.cfg.Logger.Warn("adopt flows", "group_id", g.id, "error", err.Error())
	}
}

// Lost forgets a group: its context has ended, so its flows are stopping.
func (h groupHost) Lost(l *membership.Lease) {
	e := h.e
	e.mu.Lock()
	g := e.groups[l.Group]
	if g != nil && g.Lease == l {
		delete(e.groups, l.Group)
	}
	e.mu.Unlock()
	if g != nil && g.Lease == l {
		g.stopPassive()
	}
}

// Flows is how many live flows the group holds here.
func (h groupHost) Flows(id int32) int {
	if g := h.e.group(id); g != nil {
		return g.flowCount()
	}
	return 0
}

// Claimed ends the queue claims other nodes still hold on the groups'
// messages and sweeps at once: their old owner lost the groups and every
// write it could still make is fenced, so its messages in flight need not
// wait out their claim.
func (h groupHost) Claimed(ctx context.Context, ids []int32) {
	e := h.e
	if _, err := queue.NewStore(e.relaxed).TakeOver(ctx, ids, e.cfg.NodeID); err != nil {
		e.cfg.Logger.Warn("take over queue messages", "error", err.Error())
	}
	e.worker.Sweep(ctx)
}

func (e *Engine) adoptFlows(ctx context.Context, g *group) error {
	rows, err := e.store.AdoptFlows(ctx, g.id, g.gen)
	if err != nil {
		return err
	}
	e.resumeFlows(ctx, g, rows)
	return nil
}

// adoptFlowsAndPassive is a takeover's adoption: the runs held in memory
// are stamped and loaded, the passivated ones enumerated into the group's
// passive index (after the stamping, which waits for the previous owner's
// writes still in flight, a passivation among them), and only then are the
// loaded ones rebuilt.
func (e *Engine) adoptFlowsAndPassive(ctx context.Context, g *group) error {
	g.listing.Store(true)
	defer g.listing.Store(false)
	rows, err := e.store.AdoptFlows(ctx, g.id, g.gen)
	if err != nil {
		return err
	}
	if err := e.adoptPassive(ctx, g); err != nil {
		e.cfg.Logger.Warn("enumerate passivated runs", "group_id", g.id, "error", err.Error())
	}
	e.resumeFlows(ctx, g, rows)
	return nil
}

// resumeFlows rebuilds the actors of loaded live runs.
func (e *Engine) resumeFlows(ctx context.Context, g *group, rows []flowstore.InstanceRow) {
	for _, row := range rows {
		if err := e.runFlow(ctx, g, row, nil, true, 0); err != nil {
			e.cfg.Logger.Warn("resume flow", "flow", row.Ref.String(), "error", err.Error())
		}
	}
}

func (e *Engine) readoptAll(ctx context.Context) {
	e.mu.RLock()
	gs := make([]*group, 0, len(e.groups))
	for _, g := range e.groups {
		if !g.HandingOver() {
			gs = append(gs, g)
		}
	}
	e.mu.RUnlock()
	for _, g := range gs {
		if err := e.adoptFlows(ctx, g); err != nil {
			e.cfg.Logger.Warn("re-adopt flows", "group_id", g.id, "error", err.Error())
		}
	}
}
