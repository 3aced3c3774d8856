// Package membership is an engine node's part in the cluster of engines:
// it claims flow groups under leases and renews them, keeps the node's row
// in the membership (engine_node), shares the groups out fairly among the
// live nodes, takes over the groups of dead ones, and fences the node when
// its lease may have run out by its own clock. It follows the flow group
// count recorded in the database when it is raised.
//
// What runs in a group is the Host's (engine/flow's actors): it is told
// that a group was adopted at a generation or lost, and asks the group's
// Lease whether it may still act. See docs/engine.md, "Flow groups and
// fencing".
package membership

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/run"
)

// DefaultGroupCount is how many flow groups runs are spread over: the run
// hand-off's count (engine/run), which a run's group is computed with.
const DefaultGroupCount = run.DefaultGroupCount

// Config configures a Node. Zero values take the defaults noted.
type Config struct {
	// NodeID names this engine process; required, and unique among live
	// engines (a node takes back at Start what is leased under its id).
	NodeID string
	// GroupCount is the number of flow groups (default DefaultGroupCount).
	// The node follows the count recorded in the database when it is
	// raised (engine/groupcount.Raise), at its next heartbeat round.
	GroupCount int
	// MaxGroups caps how many groups this node holds (default no cap: its
	// fair share).
	MaxGroups int
	// Lease is how long a group stays owned without a heartbeat (default
	// 10s). Another node may take a group over once its lease expired.
	Lease time.Duration
	// HeartbeatInterval is how often leases and the membership are renewed
	// and free groups claimed (default Lease/5).
	HeartbeatInterval time.Duration
	// Logger is required.
	Logger *slog.Logger
	// Metrics, when set, counts group takeovers.
	Metrics *metrics.Recorder
}

func (c *Config) defaults() error {
	if c.Logger == nil {
		return errors.New("membership: Config.Logger is required")
	}
	if c.NodeID == "" {
		return errors.New("membership: Config.NodeID is required")
	}
	if c.GroupCount <= 0 {
		c.GroupCount = DefaultGroupCount
	}
	if c.Lease <= 0 {
		c.Lease = 10 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.Lease / 5
	}
	return nil
}

// Host runs the work of the groups a node holds.
type Host interface {
	// Adopt is told that the node holds l, just claimed at l.Generation:
	// the host starts the group's work under l.Context(). ctx bounds the
	// adoption's own reads; it may have ended already when the node is
	// stopping, and then the host starts nothing.
	Adopt(ctx context.Context, l *Lease)
	// Lost is told that the node no longer acts for l (lost, expired by
	// the node's clock, released or the node stopping); l's context has
	// ended.
	Lost(l *Lease)
	// Flows is how many flows of group id the host still runs: the groups
	// with the least work are handed over first, and a hand-over waits for
	// their number to settle.
	Flows(id int32) int
	// Claimed is told, after their adoption, the groups a heartbeat round
	// claimed: the host takes over the work other nodes had claimed in
	// them (queue messages).
	Claimed(ctx context.Context, ids []int32)
}

// Node is one engine node's membership: the groups it holds under leases.
type Node struct {
	cfg   Config
	store store
	host  Host

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu       sync.RWMutex
	held     map[int32]*Lease
	draining map[int32]*Lease // lost leases whose runtime calls may still run
	// groupCount is the flow group count the node claims below; it grows
	// when the recorded count is raised (followGroupCount).
	groupCount atomic.Int32
	// soon fires a heartbeat round before the regular one: while this
	// node waits for groups to be released, or for a dead node's leases to
	// run out.
	soon *time.Timer
	// leaseRound is when the last lease round succeeded (UnixNano).
	leaseRound atomic.Int64
	// drained: at its last round an operator had this node drained
	// (engine_node.draining), so it holds no group on purpose.
	drained atomic.Bool
}

// New builds a node over db whose groups host runs.
func New(db *pgxpool.Pool, cfg Config, host Host) (*Node, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, store: store{db: db}, host: host, held: map[int32]*Lease{}, draining: map[int32]*Lease{},
		soon: newStoppedTimer()}
	n.groupCount.Store(int32(cfg.GroupCount))
	return n, nil
}

// NodeID is this node's name.
func (n *Node) NodeID() string { return n.cfg.NodeID }

// GroupCount is the number of flow groups new runs are spread over.
func (n *Node) GroupCount() int { return int(n.groupCount.Load()) }

// Start creates the groups' rows, takes back the groups still leased under
// this node's id (an engine restarted in place), claims its share and
// starts the heartbeat and lease watch loops; it returns without blocking
// once the first claim is done. The loops run until ctx ends or Stop.
func (n *Node) Start(ctx context.Context) error {
	n.ctx, n.cancel = context.WithCancel(ctx)
	if err := n.store.ensureGroups(ctx, n.GroupCount()); err != nil {
		return err
	}
	if err := n.reclaimOwn(ctx); err != nil {
		return err
	}
	n.round(ctx)
	n.wg.Add(2)
	go n.loop()
	go n.watchLeases()
	return nil
}

// Stop ends the loops, gives every runtime call still running in the held
// groups up to half a lease to return, releases the groups so another node
// can take them at once, and ends the node's membership. A claim in flight
// runs to its end first, so what it claimed is released too. Idempotent.
func (n *Node) Stop() {
	n.once.Do(func() {
		if n.cancel == nil {
			return
		}
		ls := n.halt()
		// The next owner may claim the groups the moment they are released:
		// the runtime calls still running here get half a lease to return
		// first, so that an attempt never runs on two nodes.
		n.awaitCalls(ls, n.cfg.Lease/2)
		held := make([]Claim, len(ls))
		for i, l := range ls {
			held[i] = l.claim()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.store.release(ctx, n.cfg.NodeID, held); err != nil {
			n.cfg.Logger.Warn("release flow groups", "error", err.Error())
		}
		if err := n.store.deregister(ctx, n.cfg.NodeID); err != nil {
			n.cfg.Logger.Warn("deregister engine node", "error", err.Error())
		}
	})
}

// Abandon stops the node the way a killed process stops: the loops end and
// the host is told every group is lost, but nothing is released, so other
// nodes wait for the leases to run out. Tests use it to simulate a crash.
func (n *Node) Abandon() {
	n.once.Do(func() {
		if n.cancel != nil {
			n.halt()
		}
	})
}

// halt ends the loops and every lease and returns the leases held.
func (n *Node) halt() []*Lease {
	n.cancel()
	n.wg.Wait()
	n.mu.Lock()
	ls := make([]*Lease, 0, len(n.held))
	for _, l := range n.held {
		l.cancel()
		ls = append(ls, l)
	}
	n.held = map[int32]*Lease{}
	n.mu.Unlock()
	for _, l := range ls {
		n.host.Lost(l)
	}
	return ls
}

// Owned are the groups this node acts for: held, and not being handed
// over.
func (n *Node) Owned() []int32 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]int32, 0, len(n.held))
	for id, l := range n.held {
		if !l.handingOver.Load() {
			out = append(out, id)
		}
	}
	return out
}

// Owns reports whether the node acts for group id.
func (n *Node) Owns(id int32) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	l, ok := n.held[id]
	return ok && !l.handingOver.Load()
}

// AgeLeases makes every held lease's last renewal look older by d, as if
// this node's heartbeats had stalled for that long. For tests of
// self-fencing.
func (n *Node) AgeLeases(d time.Duration) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, l := range n.held {
		l.renew(l.renewedAt().Add(-d))
	}
}

// heldCount is how many groups this node holds, those being handed over
// included.
func (n *Node) heldCount() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.held)
}

// maxGroups is the most groups this node may hold.
func (n *Node) maxGroups() int {
	if n.cfg.MaxGroups > 0 {
		return n.cfg.MaxGroups
	}
	return n.GroupCount()
}

func (n *Node) loop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.round(n.ctx)
		case <-n.soon.C:
			n.round(n.ctx)
		}
	}
}
