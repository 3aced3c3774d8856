// Package flow is the flow engine: it owns flow groups, runs each workflow
// instance run as a flow actor and each step attempt as a step actor, and
// keeps their state in memory, written through to PostgreSQL on every
// change. See docs/engine.md for the state machines and the guarantees.
package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/run"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Config configures an Engine. Zero values take the defaults noted.
type Config struct {
	// NodeID names this engine process (default host name + random suffix).
	NodeID string
	// GroupCount is the number of flow groups new runs are spread over
	// (default run.DefaultGroupCount). Runs keep the count they started with.
	// The engine follows the count recorded in the database when it is
	// raised (engine/groupcount.Raise), at its next heartbeat round.
	GroupCount int
	// MaxGroups caps how many groups this node owns (default no cap: its
	// fair share).
	MaxGroups int
	// Lease is how long a group stays owned without a heartbeat (default
	// 10s). Another node may take a group over once its lease expired.
	Lease time.Duration
	// HeartbeatInterval is how often leases are renewed and free groups
	// claimed (default Lease/5).
	HeartbeatInterval time.Duration
	// ReconcileInterval is how often the live flows of owned groups are
	// compared with the database, so a flow missing from memory for any
	// reason is rebuilt (default 30s). Events drive everything else.
	ReconcileInterval time.Duration
	// AdmitInterval is how often queued runs are checked against their
	// workflow's run strategy (default 2s). A run's end admits the next
	// runs at once; the sweep applies properties changes (strategy,
	// concurrency) to runs already queued.
	AdmitInterval time.Duration
	// Workers bounds concurrent step runtime calls (default 64).
	Workers int
	// Runtimes by step type (default stepruntime.Builtins()).
	Runtimes stepruntime.Registry
	// Queue tunes the outbox worker; Node, Store, Listen, Groups, Owns and
	// Logger are filled in by the engine, which also adds its own handlers
	// (start_workflow, instance_action) to Queue.Handlers.
	Queue queue.WorkerConfig
	// Logger is required.
	Logger *slog.Logger
	// Observer, when set, is told of every step transition once it is
	// written, with the time the transition happened; benchmarks use it to
	// measure latencies.
	Observer func(ref run.Ref, stepID string, attempt int64, status instance.StepStatus, at time.Time)
	// FlowObserver, when set, is told of every run that ended.
	FlowObserver func(ref run.Ref, status instance.WorkflowStatus, at time.Time)
	// Metrics, when set, records steps ended, step launch latency and group
	// takeovers; SampleMetrics adds the gauges.
	Metrics *metrics.Recorder
	// MemoryBudget bounds the memory this node's flows hold for
	// definitions, params and expression evaluation, in bytes (default
	// DefaultMemoryBudget; memory.go). Set it to a fraction of the
	// process's memory limit: a run that needs more fails, runs that do
	// not fit now wait.
	MemoryBudget int64
	// EventsWritten, when set, is called (and must not block) after a write
	// that recorded an event has committed: an event forwarder in the same
	// process reads the outbox at once instead of at its next poll.
	EventsWritten func()
	// SignalsAnnounced, when set, is called (and must not block) after a
	// write that stored a step's output signals committed: the signal
	// broker's sweeper matches them (engine/signalbroker).
	SignalsAnnounced func()
}

func (c *Config) defaults() error {
	if c.Logger == nil {
		return errors.New("flow: Config.Logger is required")
	}
	if c.NodeID == "" {
		host, _ := os.Hostname()
		c.NodeID = fmt.Sprintf("%s-%s", host, uuid.NewString()[:8])
	}
	// Every line the engine logs names its node: with several engines on
	// one database, who claimed, released or dropped a group matters.
	c.Logger = c.Logger.With("node_id", c.NodeID)
	if c.GroupCount <= 0 {
		c.GroupCount = run.DefaultGroupCount
	}
	if c.Lease <= 0 {
		c.Lease = 10 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.Lease / 5
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = 30 * time.Second
	}
	if c.AdmitInterval <= 0 {
		c.AdmitInterval = 2 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.Runtimes == nil {
		c.Runtimes = stepruntime.Builtins()
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	return nil
}

// Engine is one engine node.
type Engine struct {
	cfg     Config
	db      *pgxpool.Pool
	relaxed *pgxpool.Pool // queue bookkeeping, synchronous_commit off
	store   *flowstore.Store
	writer  *flowstore.Writer
	pool    *workerPool
	worker  *queue.Worker

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu       sync.RWMutex
	groups   map[int32]*group
	draining map[int32]*group // lost groups whose runtime calls may still run
	// breakpoints caches which workflows have breakpoints.
	breakpoints *breakpointCache
	// defs holds decoded run definitions (defcache.go).
	defs    *definitionCache
	readopt chan struct{}
	// groupCount is the flow group count the node claims below; it grows
	// when the recorded count is raised (followGroupCount).
	groupCount atomic.Int32
	// soon fires a heartbeat round before the regular one: while this
	// node waits for groups to be released, or for a dead node's leases to
	// run out.
	soon *time.Timer
	// leaseRound is when the last lease round succeeded (UnixNano).
	leaseRound atomic.Int64
	// mem is the memory budget of the node's flows (memory.go);
	// startWaits counts, per run, the starts that waited for it.
	mem        *memoryBudget
	startWaits sync.Map
	// events is set when the engine records the events of its writes
	// (always, but for benchmarks that measure their cost).
	events bool
}

// group is a flow group this node owns, with its live flows.
type group struct {
	id     int32
	gen    int64
	ctx    context.Context
	cancel context.CancelFunc
	eng    *Engine

	mu      sync.Mutex
	flows   map[run.Ref]*flowActor
	renewed time.Time
	// handingOver is set while the node gives the group up to another
	// (share.go): no step work starts, the work under way finishes.
	handingOver atomic.Bool
	// calls counts runtime calls in flight for the group's attempts. A lost
	// group is not adopted again on this node until they have returned, so
	// an attempt never has two calls running here.
	calls inflight
}

// inflight counts calls in flight. Unlike sync.WaitGroup it allows Add
// from zero while another goroutine waits (an actor of a lost group may
// still start a call while the group is drained): Wait returns once the
// count is zero.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero; nil while nobody waits
}

// Add changes the count by d.
func (c *inflight) Add(d int) {
	c.mu.Lock()
	c.n += d
	if c.n <= 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// Done ends one call.
func (c *inflight) Done() { c.Add(-1) }

// Wait blocks until no call is in flight.
func (c *inflight) Wait() {
	c.mu.Lock()
	if c.n <= 0 {
		c.mu.Unlock()
		return
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	ch := c.idle
	c.mu.Unlock()
	<-ch
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

// requestReadopt asks the group loop to re-adopt the group's flows, for a
// flow dropped after a transient database error.
func (g *group) requestReadopt() {
	select {
	case g.eng.readopt <- struct{}{}:
	default:
	}
}

// New builds an engine over db.
func New(db *pgxpool.Pool, cfg Config) (*Engine, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		timer := newStepTimer(cfg.Metrics)
		if obs := cfg.Observer; obs != nil {
			cfg.Observer = func(ref run.Ref, step string, attempt int64, status instance.StepStatus, at time.Time) {
				obs(ref, step, attempt, status, at)
				timer.observe(ref, step, attempt, status, at)
			}
		} else {
			cfg.Observer = timer.observe
		}
	}
	mem := newMemoryBudget(cfg.MemoryBudget)
	e := &Engine{cfg: cfg, db: db, store: flowstore.New(db, cfg.Logger), pool: newWorkerPool(cfg.Workers),
		groups: map[int32]*group{}, draining: map[int32]*group{}, readopt: make(chan struct{}, 1),
		soon:        newStoppedTimer(),
		breakpoints: newBreakpointCache(), defs: newDefinitionCache(mem), mem: mem, events: true}
	e.groupCount.Store(int32(cfg.GroupCount))
	// Queue bookkeeping (claims, deletes) commits asynchronously: losing one
	// in a crash only redelivers a message, and every handler is
	// idempotent. Engine state writes stay synchronous.
	relaxedCfg := db.Config().Copy()
	relaxedCfg.MaxConns = 4
	relaxedCfg.MinConns = 0
	relaxedCfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	relaxed, err := pgxpool.NewWithConfig(context.Background(), relaxedCfg)
	if err != nil {
		return nil, fmt.Errorf("open queue pool: %w", err)
	}
	e.relaxed = relaxed
	e.writer = flowstore.NewWriter(db, flowstore.WriterConfig{Logger: cfg.Logger})
	// The composite step types run on the engine itself, unless the
	// caller configured runtimes of its own for them.
	for stepType, rt := range composite.Runtimes(composite.Config{DB: db, NodeID: cfg.NodeID, Logger: cfg.Logger, Local: localStarter{e}}) {
		e.registerRuntime(stepType, rt)
	}
	qc := cfg.Queue
	qc.Node = cfg.NodeID
	qc.Store = queue.NewStore(relaxed)
	qc.Listen = func(ctx context.Context) (*pgx.Conn, error) {
		cc := db.Config().ConnConfig.Copy()
		// The pool's hook sets refreshed credentials (a rotated password).
		if before := db.Config().BeforeConnect; before != nil {
			if err := before(ctx, cc); err != nil {
				return nil, err
			}
		}
		return pgx.ConnectConfig(ctx, cc)
	}
	qc.Groups = e.ownedGroups
	qc.Owns = e.owns
	qc.Logger = cfg.Logger
	// The caller may add handlers for other queues (workflow deletion, ...).
	qc.Handlers = maps.Clone(cfg.Queue.Handlers)
	if qc.Handlers == nil {
		qc.Handlers = map[queue.ID]queue.Handler{}
	}
	qc.Handlers[queue.StartWorkflow] = e.handleStart
	// A start waits for the writer's next commit (handleStart) rather than
	// working: more of them wait at once, so that starts share commits.
	qc.QueueWorkers = maps.Clone(cfg.Queue.QueueWorkers)
	if qc.QueueWorkers == nil {
		qc.QueueWorkers = map[queue.ID]int{}
	}
	qc.QueueWorkers[queue.StartWorkflow] = max(qc.QueueWorkers[queue.StartWorkflow], startWorkers)
	qc.Handlers[queue.InstanceAction] = e.handleAction
	qc.Handlers[queue.StepUpdate] = e.handleStepUpdate
	qc.Notifications = maps.Clone(cfg.Queue.Notifications)
	if qc.Notifications == nil {
		qc.Notifications = map[string]func(string){}
	}
	qc.Notifications[BreakpointChannel] = e.breakpoints.changed
	qc.OnListen = e.breakpoints.setListening
	w, err := queue.NewWorker(qc)
	if err != nil {
		relaxed.Close()
		return nil, err
	}
	e.worker = w
	return e, nil
}

// NodeID is this node's name.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// GroupCount is the number of flow groups new runs are spread over.
func (e *Engine) GroupCount() int { return int(e.groupCount.Load()) }

// maxGroups is the most groups this node may hold.
func (e *Engine) maxGroups() int {
	if e.cfg.MaxGroups > 0 {
		return e.cfg.MaxGroups
	}
	return e.GroupCount()
}

// Start claims groups, adopts their flows and starts processing; it returns
// without blocking once the first claim is done.
func (e *Engine) Start(ctx context.Context) error {
	// Every expression the engine evaluates draws from its memory budget.
	ctx = sel.WithMemoryPool(ctx, e.mem)
	e.ctx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := e.writer.Start(e.ctx); err != nil {
		return err
	}
	if err := e.store.EnsureGroups(ctx, e.GroupCount()); err != nil {
		return err
	}
	if err := e.reclaimOwn(ctx); err != nil {
		return err
	}
	e.tick(ctx)
	if err := e.worker.Start(e.ctx); err != nil {
		return err
	}
	e.wg.Add(2)
	go e.loop()
	go e.watchLeases()
	return nil
}

// Stop stops every actor, releases the groups so another node can take them
// at once, and waits. Idempotent.
func (e *Engine) Stop() {
	e.once.Do(func() {
		if e.cancel == nil {
			return
		}
		e.cancel()
		e.worker.Stop()
		e.wg.Wait()
		e.writer.Stop()
		e.mu.Lock()
		held := make([]flowstore.GroupClaim, 0, len(e.groups))
		owned := make([]*group, 0, len(e.groups))
		for _, g := range e.groups {
			held = append(held, flowstore.GroupClaim{ID: g.id, Generation: g.gen})
			owned = append(owned, g)
			g.cancel()
		}
		e.groups = map[int32]*group{}
		e.mu.Unlock()
		// The next owner may claim the groups the moment they are released:
		// the runtime calls still running here get half a lease to return
		// first, so that an attempt never runs on two nodes.
		e.awaitCalls(owned, e.cfg.Lease/2)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.store.ReleaseGroups(ctx, e.cfg.NodeID, held); err != nil {
			e.cfg.Logger.Warn("release flow groups", "error", err.Error())
		}
		if err := e.store.DeregisterNode(ctx, e.cfg.NodeID); err != nil {
			e.cfg.Logger.Warn("deregister engine node", "error", err.Error())
		}
		e.relaxed.Close()
	})
}

// ownedGroups are the groups this node acts for: held, and not being handed
// over.
func (e *Engine) ownedGroups() []int32 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]int32, 0, len(e.groups))
	for id, g := range e.groups {
		if !g.handingOver.Load() {
			out = append(out, id)
		}
	}
	return out
}

// heldCount is how many groups this node holds, those being handed over
// included.
func (e *Engine) heldCount() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.groups)
}

func (e *Engine) owns(id int32) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	g, ok := e.groups[id]
	return ok && !g.handingOver.Load()
}

func (e *Engine) group(id int32) *group {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.groups[id]
}

func (e *Engine) loop() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.HeartbeatInterval)
	defer t.Stop()
	r := time.NewTicker(e.cfg.ReconcileInterval)
	defer r.Stop()
	a := time.NewTicker(e.cfg.AdmitInterval)
	defer a.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			e.tick(e.ctx)
		case <-e.soon.C:
			e.tick(e.ctx)
		case <-r.C:
			e.readoptAll(e.ctx)
		case <-a.C:
			e.admitSweep(e.ctx)
		case <-e.readopt:
			e.readoptAll(e.ctx)
		}
	}
}

// tick renews leases, drops groups this node lost, renews its membership
// and moves towards its fair share of the groups (share.go): it releases
// its surplus or claims free and expired groups.
func (e *Engine) tick(ctx context.Context) {
	e.mu.RLock()
	held := make([]flowstore.GroupClaim, 0, len(e.groups))
	for _, g := range e.groups {
		held = append(held, flowstore.GroupClaim{ID: g.id, Generation: g.gen})
	}
	e.mu.RUnlock()
	if len(held) > 0 {
		// The lease runs from when the heartbeat was sent, by this node's
		// clock: the database extends it from its own now(), which is no
		// earlier.
		// A heartbeat that has not answered within half a lease is of no
		// use: the groups are given up by then (watchLeases).
		now := time.Now()
		hctx, cancel := context.WithTimeout(ctx, e.cfg.Lease/2)
		kept, err := e.store.Heartbeat(hctx, e.cfg.NodeID, e.cfg.Lease, held)
		cancel()
		if err != nil {
			e.cfg.Logger.Warn("heartbeat failed", "error", err.Error())
			e.dropExpired()
			return
		}
		e.mu.Lock()
		for _, c := range held {
			g := e.groups[c.ID]
			if g == nil || g.gen != c.Generation {
				continue // given up meanwhile (watchLeases)
			}
			if !kept[c.ID] {
				e.cfg.Logger.Warn("lost flow group", "group_id", c.ID, "generation", c.Generation)
				e.lose(g)
				continue
			}
			g.renewedAt(now)
		}
		e.mu.Unlock()
	}
	live, recorded, err := e.store.RegisterNode(ctx, e.cfg.NodeID, e.cfg.Lease)
	if err != nil {
		e.cfg.Logger.Warn("renew engine node membership", "error", err.Error())
		return
	}
	e.followGroupCount(ctx, recorded)
	if d, ok := nextExpiry(live, e.cfg.NodeID, e.cfg.HeartbeatInterval); ok {
		e.soon.Reset(d + 10*time.Millisecond)
	}
	share := min(e.maxGroups(), fairShare(e.GroupCount(), live, e.cfg.NodeID))
	owned := e.heldCount()
	if owned > share {
		e.releaseSurplus(ctx, owned-share)
	}
	if owned >= share {
		e.leaseRoundDone(time.Now())
		return
	}
	claimedAt := time.Now()
	claims, err := e.claimGroups(ctx, func(ctx context.Context) ([]flowstore.GroupClaim, error) {
		return e.store.ClaimGroups(ctx, e.cfg.NodeID, e.cfg.Lease, share-owned, e.GroupCount())
	})
	if err != nil {
		e.cfg.Logger.Warn("claim flow groups", "error", err.Error())
		return
	}
	e.leaseRoundDone(time.Now())
	if len(claims) < share-owned {
		// Another node still holds groups it is about to release (it
		// counts this node in at its next round): look again soon.
		e.soon.Reset(e.cfg.HeartbeatInterval / 4)
	}
	if len(claims) == 0 {
		return
	}
	e.adoptAll(ctx, claims, claimedAt)
	ids := make([]int32, 0, len(claims))
	for _, c := range claims {
		ids = append(ids, c.ID)
		if c.Generation > 1 {
			// Owned before: its previous owner released it or let it expire.
			e.cfg.Metrics.Add(metrics.GroupTakeovers, 1)
		}
	}
	if _, err := queue.NewStore(e.relaxed).TakeOver(ctx, ids, e.cfg.NodeID); err != nil {
		e.cfg.Logger.Warn("take over queue messages", "error", err.Error())
	}
	e.worker.Sweep(ctx)
}

// claimGroups runs a claim to its end even when the engine is stopping
// (bounded by half a lease): a claim the database committed while the
// engine, cancelled by Stop, stopped reading its answer would leave groups
// owned by this node that Stop does not know to release, and nobody could
// take them before their lease ran out. Whatever it claims is adopted, so
// Stop releases it.
func (e *Engine) claimGroups(ctx context.Context, claim func(context.Context) ([]flowstore.GroupClaim, error)) ([]flowstore.GroupClaim, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Lease/2)
	defer cancel()
	return claim(cctx)
}

// renewedAt records a successful heartbeat.
func (g *group) renewedAt(t time.Time) {
	g.mu.Lock()
	g.renewed = t
	g.mu.Unlock()
}

// leaseHeld reports whether this node may still act for the group at now,
// by its own clock: the group is live here and its lease was renewed
// within the last half lease, the point at which dropExpired gives a group
// up when heartbeats fail. Before starting a side effect (an HTTP call, a
// Lambda invocation, an ECS task) a step checks it, so that a paused or
// partitioned node whose lease may have passed to another node starts
// nothing: the new owner could be starting the same effect.
func (g *group) leaseHeld(now time.Time) bool {
	if g.ctx.Err() != nil || g.handingOver.Load() {
		return false
	}
	g.mu.Lock()
	renewed := g.renewed
	g.mu.Unlock()
	return now.Sub(renewed) < g.eng.cfg.Lease/2
}

// watchLeases gives up the groups whose lease may have run out by this
// node's clock, on a clock of its own: the heartbeat loop may be stuck in a
// database call that does not answer, and a node resumed after a pause
// must stop before its actors act on groups it no longer holds.
func (e *Engine) watchLeases() {
	defer e.wg.Done()
	t := time.NewTicker(max(e.cfg.HeartbeatInterval/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			e.dropExpired()
		}
	}
}

// leaseHeldNow is leaseHeld at this moment (stepruntime.Attempt.LeaseHeld).
func (g *group) leaseHeldNow() bool { return g.leaseHeld(time.Now()) }

// dropExpired stops the flows of groups whose lease may have run out while
// heartbeats failed: another node may own them by now, and a step must never
// run on two nodes at once.
func (e *Engine) dropExpired() {
	// Stop well before the lease ends so that in-flight work stops first.
	deadline := time.Now().Add(-e.cfg.Lease / 2)
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, g := range e.groups {
		g.mu.Lock()
		stale := g.renewed.Before(deadline)
		g.mu.Unlock()
		if stale {
			e.cfg.Logger.Warn("dropping flow group whose lease could not be renewed", "group_id", id)
			e.lose(g)
		}
	}
}

// lose stops a group's flows; e.mu must be held.
func (e *Engine) lose(g *group) {
	g.cancel()
	delete(e.groups, g.id)
	e.draining[g.id] = g
}

// awaitDrained waits, up to a lease, for the runtime calls a previous
// incarnation of the group started on this node.
func (e *Engine) awaitDrained(id int32) {
	e.mu.Lock()
	old := e.draining[id]
	delete(e.draining, id)
	e.mu.Unlock()
	if old == nil {
		return
	}
	if !old.calls.waitFor(e.cfg.Lease) {
		e.cfg.Logger.Warn("runtime calls of a lost group still running; they ignore cancellation", "group_id", id)
	}
}

// adopt takes a just-claimed group: stamps its live flows with the new
// generation and starts an actor for each. The lease runs from claimedAt,
// when the claim was sent.
func (e *Engine) adopt(ctx context.Context, c flowstore.GroupClaim, claimedAt time.Time) {
	e.awaitDrained(c.ID)
	gctx, cancel := context.WithCancel(e.ctx)
	g := &group{id: c.ID, gen: c.Generation, ctx: gctx, cancel: cancel, eng: e, flows: map[run.Ref]*flowActor{}, renewed: claimedAt}
	e.mu.Lock()
	e.groups[c.ID] = g
	e.mu.Unlock()
	e.cfg.Logger.Info("claimed flow group", "group_id", c.ID, "generation", c.Generation)
	if err := e.adoptFlows(ctx, g); err != nil {
		e.cfg.Logger.Warn("adopt flows", "group_id", c.ID, "error", err.Error())
	}
}

func (e *Engine) adoptFlows(ctx context.Context, g *group) error {
	rows, err := e.store.AdoptFlows(ctx, g.id, g.gen)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if err := e.runFlow(ctx, g, row, nil, true, 0); err != nil {
			e.cfg.Logger.Warn("resume flow", "flow", row.Ref.String(), "error", err.Error())
		}
	}
	return nil
}

func (e *Engine) readoptAll(ctx context.Context) {
	e.mu.RLock()
	gs := make([]*group, 0, len(e.groups))
	for _, g := range e.groups {
		if !g.handingOver.Load() {
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

// runFlow starts the actor of a live run unless one is running already.
// runFlow builds and starts the actor of a run; loadSteps is false only
// for a run just started that has no step rows yet. held is what the start
// reserved of the memory budget for the run (0 for an adopted run, which
// is charged without refusal): the flow releases it when it ends, and
// runFlow when it starts no flow.
func (e *Engine) runFlow(ctx context.Context, g *group, row flowstore.InstanceRow, paramErr error, loadSteps bool, held int64) error {
	return e.runFlowWith(ctx, g, row, paramErr, loadSteps, held, nil, nil)
}

// runFlowWith is runFlow with the run's params already decoded (vals, nil
// to decode row.Params) and, for a run whose start is still being written,
// that write (start, nil for none).
func (e *Engine) runFlowWith(ctx context.Context, g *group, row flowstore.InstanceRow, paramErr error, loadSteps bool, held int64,
	vals params.Values, start *flowstore.Op) error {
	g.mu.Lock()
	if _, running := g.flows[row.Ref]; running {
		g.mu.Unlock()
		e.mem.Release(held)
		return nil
	}
	g.mu.Unlock()
	var steps []flowstore.StepRow
	if loadSteps {
		var err error
		if steps, err = e.store.LoadLatestAttempts(ctx, row.Ref); err != nil {
			e.mem.Release(held)
			return err
		}
	}
	if held == 0 {
		held = runFootprint(len(row.Definition), len(row.Params))
		e.mem.force(held)
	}
	f, err := newFlow(e, g, row, held, vals)
	if err != nil {
		e.mem.Release(held)
		return err
	}
	f.start = start
	g.mu.Lock()
	if _, running := g.flows[row.Ref]; running || g.ctx.Err() != nil || g.handingOver.Load() {
		g.mu.Unlock()
		f.cancel()
		f.releaseMemory()
		return nil
	}
	g.flows[row.Ref] = f
	g.mu.Unlock()
	e.wg.Add(1)
	go f.run(paramErr, steps)
	return nil
}

// decodeMessage decodes a queue message's payload. A malformed one can
// never be handled: it is logged and dropped (ok false), not retried.
func decodeMessage[T any](e *Engine, m queue.Message) (msg T, ok bool) {
	if err := json.Unmarshal(m.Payload, &msg); err != nil {
		e.cfg.Logger.Error("drop malformed "+m.Queue.String()+" message", "message_id", m.ID, "error", err.Error())
		return msg, false
	}
	return msg, true
}

func (e *Engine) handleStart(ctx context.Context, m queue.Message) error {
	msg, ok := decodeMessage[run.StartMessage](e, m)
	if !ok {
		return nil
	}
	g := e.group(msg.Group)
	if g == nil {
		return fmt.Errorf("group %d is not owned here", msg.Group)
	}
	if g.lookup(msg.Ref) != nil {
		return nil // already running: a repeated delivery
	}
	// Evaluate the params first so that the CREATED -> IN_PROGRESS write
	// stores them too: one write instead of two on the start path.
	pending, created, err := e.store.ReadCreated(ctx, msg.Ref)
	if err != nil {
		return err
	}
	var paramsJSON, ev []byte
	var vals params.Values
	var paramErr error
	var held int64
	if created {
		// The owner param's value; a read that fails is retried with the
		// message rather than failing the run.
		owner, err := e.store.WorkflowOwner(ctx, msg.Ref)
		if err != nil {
			return fmt.Errorf("start %s: %w", msg.Ref, err)
		}
		vals, paramsJSON, paramErr = e.evaluateStartParams(ctx, msg.Ref, pending, owner)
		// Admission against the memory budget: a run that does not fit now
		// stays CREATED and its message is offered again; one that could
		// never fit fails alone.
		switch {
		case (errors.Is(paramErr, errMemoryBusy) || errors.Is(paramErr, sel.ErrPoolExhausted)) && e.waitForMemory(msg.Ref):
			return fmt.Errorf("start %s: %w", msg.Ref, paramErr)
		case errors.Is(paramErr, errMemoryBusy), errors.Is(paramErr, sel.ErrPoolExhausted):
			paramErr = fmt.Errorf("no memory for the run's params after %d tries: %w (%w)", maxMemoryWaits, paramErr, ErrMemoryBudget)
		case paramErr == nil:
			held = runFootprint(len(pending.Row.Definition), len(paramsJSON))
			if held > e.mem.limit {
				paramErr = fmt.Errorf("the run needs %s of the engine's memory, more than its budget of %s: %w",
					mib(held), mib(e.mem.limit), ErrMemoryBudget)
				held, paramsJSON = 0, nil
			} else if !e.mem.Reserve(held) {
				return fmt.Errorf("start %s: %w", msg.Ref, errMemoryBusy)
			}
		}
		e.startWaits.Delete(msg.Ref)
		if errors.Is(paramErr, ErrMemoryBudget) {
			// Ended without building a flow, which would hold what does
			// not fit.
			_, err := e.store.StopCreated(ctx, msg.Ref, instance.WorkflowFailed, "run failed: "+paramErr.Error())
			return err
		}
		if ev, err = e.startEvent(msg.Ref, pending.Row); err != nil {
			e.mem.Release(held)
			return err
		}
	}
	if !created {
		// Started already (a repeated delivery after the start committed):
		// re-stamped with this node's generation and resumed.
		row, ok, err := e.store.StartFlow(ctx, msg.Ref, g.id, g.gen, e.cfg.NodeID, nil, nil)
		if err != nil || !ok {
			return err
		}
		return e.runFlowWith(ctx, g, row, nil, true, 0, nil, nil)
	}
	// The CREATED -> IN_PROGRESS write goes through the writer and the
	// flow begins at once: its first writes are ordered after the start
	// and share its commit when they come in time (one commit where there
	// were two). The message stays until the start is durable.
	start := flowstore.StartOp(ctx, msg.Ref, g.id, g.gen, e.cfg.NodeID, paramsJSON, ev)
	e.writer.Submit(start)
	row := pending.Row
	row.Status, row.Seq = instance.WorkflowInProgress, row.Seq+1
	if paramsJSON != nil {
		row.Params = paramsJSON
	}
	if row.StartTime == nil {
		now := time.Now()
		row.StartTime = &now
	}
	if paramErr != nil {
		vals = nil
	}
	// A run that was CREATED when read and had no steps then has none now:
	// only its flow writes steps, and it is starting here.
	if err := e.runFlowWith(ctx, g, row, paramErr, pending.HasSteps, held, vals, start); err != nil {
		_ = start.Wait(ctx)
		return err
	}
	switch err := start.Wait(ctx); {
	case err == nil:
		e.wroteEvent(ev)
		return nil
	case errors.Is(err, run.ErrFenced):
		// Refused: either the group moved on (the message goes to its new
		// owner) or the run is no longer CREATED (stopped meanwhile).
		stillHeld, err := e.store.GroupHeld(ctx, g.id, g.gen, e.cfg.NodeID)
		if err != nil {
			return err
		}
		if !stillHeld {
			return run.ErrFenced
		}
		return nil
	default:
		return err
	}
}

// startWorkers is how many start messages an engine handles at once. A
// start waits for a commit of the writer, so more than the queue's default
// 4 are needed for starts to share commits; but each one admitted adds its
// steps' writes to the same writer, and with 32, 1,000 Http runs started at
// once waited 4x longer per step (BenchmarkHttpSteps1000 p50 75-90 ms against
// 18-21 ms with 8) for a throughput 10 % higher (BenchmarkThroughput).
const startWorkers = 8

// waitForMemory reports whether a start that found the memory budget in
// use may wait once more (up to maxMemoryWaits times, a queue retry delay
// apart) rather than fail.
func (e *Engine) waitForMemory(ref run.Ref) bool {
	n, _ := e.startWaits.LoadOrStore(ref, new(atomic.Int32))
	if n.(*atomic.Int32).Add(1) <= maxMemoryWaits {
		return true
	}
	e.startWaits.Delete(ref)
	return false
}

// startEvent is the CREATED -> IN_PROGRESS event of a run being started;
// nil when the engine records no events.
func (e *Engine) startEvent(ref run.Ref, row flowstore.InstanceRow) ([]byte, error) {
	if !e.events {
		return nil, nil
	}
	def, err := e.defs.acquire(row.Definition, true)
	if err != nil {
		return nil, err
	}
	defer e.defs.release(def)
	ri := run.NewRunInfo(&def.wf, row.UUID, row.Correlation, row.Depth)
	return ri.InstanceEvent(ref, instance.WorkflowCreated, instance.WorkflowInProgress, time.Now()), nil
}

// wroteEvent tells the EventsWritten hook that ev was committed.
func (e *Engine) wroteEvent(ev []byte) {
	if ev != nil && e.cfg.EventsWritten != nil {
		e.cfg.EventsWritten()
	}
}

// evaluateStartParams evaluates a CREATED run's workflow params.
// It returns them and their JSON, which the run's row stores: the flow
// started next takes the values as they are rather than decoding their
// JSON again.
func (e *Engine) evaluateStartParams(ctx context.Context, ref run.Ref, row flowstore.CreatedRow, owner string) (params.Values, []byte, error) {
	var runParams workflow.Params
	if len(row.Row.RunParams) > 2 {
		if err := json.Unmarshal(row.Row.RunParams, &runParams); err != nil {
			return nil, nil, fmt.Errorf("decode run params: %w", err)
		}
	}
	var runConfig struct {
		Policy string `json:"policy"`
	}
	_ = json.Unmarshal(row.RunConfig, &runConfig) // only its policy is read; unset is a fresh start
	return e.evaluateRunParams(ctx, ref, row.Row.Definition, runParams, row.Initiator, runConfig.Policy, owner)
}

// evaluateRunParams evaluates the workflow params of a run of definition
// def about to start, and returns them with their JSON.
func (e *Engine) evaluateRunParams(ctx context.Context, ref run.Ref, definition []byte, runParams workflow.Params,
	initiatorJSON []byte, policy, owner string) (params.Values, []byte, error) {
	def, err := e.defs.acquire(definition, false)
	if err != nil {
		return nil, nil, err
	}
	defer e.defs.release(def)
	var initiator map[string]any
	if len(initiatorJSON) > 2 {
		// Only its type and time zone are read; a malformed one is manual.
		_ = json.Unmarshal(initiatorJSON, &initiator)
	}
	ctx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	in := params.WorkflowInput{
		Workflow: &def.wf, RunParams: runParams, InstanceID: ref.InstanceID, RunID: ref.RunID, Initiator: initiator,
		RunPolicy: policy, Owner: owner,
	}
	if params.ReadsSignals(def.wf.Params) || params.ReadsSignals(runParams) {
		if in.Signals, err = params.RunSignals(initiatorJSON, e.readSignal); err != nil {
			return nil, nil, err
		}
	}
	vals, err := params.EvaluateWorkflow(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(vals)
	return vals, raw, err
}

// paramEvaluationTimeout bounds one evaluation of a run's or a step's
// params. SEL's own limits stop a runaway expression within about two
// seconds on this class of machine; the deadline is the backstop.
const paramEvaluationTimeout = 10 * time.Second

// actionTimeout bounds how long an action waits for the run to stop before
// the message is retried.
const actionTimeout = 30 * time.Second

func (e *Engine) handleAction(ctx context.Context, m queue.Message) error {
	msg, ok := decodeMessage[run.ActionMessage](e, m)
	if !ok {
		return nil
	}
	g := e.group(msg.Group)
	if g == nil {
		return fmt.Errorf("group %d is not owned here", msg.Group)
	}
	f := g.lookup(msg.Ref)
	if msg.StepID != "" {
		return e.handleStepAction(ctx, f, msg)
	}
	if f == nil {
		return e.actOnAbsentFlow(ctx, msg)
	}
	reply := make(chan error, 1)
	f.inbox.send(flowMsg{kind: flowAction, action: msg.Action, reason: msg.Reason, reply: reply})
	select {
	case err := <-reply:
		return err
	case <-f.done:
		// The flow ended (or was dropped) before it read the action.
		return e.actOnAbsentFlow(ctx, msg)
	case <-time.After(actionTimeout):
		return fmt.Errorf("%s of %s did not finish within %s", msg.Action, msg.Ref, actionTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handleStepAction hands a step action to the run's actor. An action the
// step's current state no longer allows is dropped (logged); one for a run
// not in memory yet is retried; one for a run that ended is dropped.
func (e *Engine) handleStepAction(ctx context.Context, f *flowActor, msg run.ActionMessage) error {
	if f == nil {
		live, err := e.store.IsLive(ctx, msg.Ref)
		if err != nil {
			return err
		}
		if live {
			return fmt.Errorf("step %s %s of %s: run is live but not in memory yet", msg.StepID, msg.Action, msg.Ref)
		}
		e.cfg.Logger.Warn("step action dropped: run has ended", "flow", msg.Ref.String(), "step_id", msg.StepID, "action", string(msg.Action))
		return nil
	}
	reply := make(chan error, 1)
	f.inbox.send(flowMsg{kind: flowStepAction, stepID: msg.StepID, action: msg.Action, reason: msg.Reason, reply: reply})
	select {
	case err := <-reply:
		if errors.Is(err, run.ErrActionNotAllowed) {
			e.cfg.Logger.Warn("step action dropped", "flow", msg.Ref.String(), "step_id", msg.StepID, "error", err.Error())
			return nil
		}
		return err
	case <-f.done:
		return fmt.Errorf("step %s %s of %s: run ended or was dropped before the action was applied", msg.StepID, msg.Action, msg.Ref)
	case <-time.After(actionTimeout):
		return fmt.Errorf("step %s %s of %s did not finish within %s", msg.StepID, msg.Action, msg.Ref, actionTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// actOnAbsentFlow applies an action to a run that has no actor here: one
// not started yet is ended directly; one that is over needs nothing; one
// that is live but not in memory yet is retried shortly.
func (e *Engine) actOnAbsentFlow(ctx context.Context, msg run.ActionMessage) error {
	status := instance.WorkflowStopped
	if msg.Action == run.ActionKill {
		status = instance.WorkflowFailed
	}
	reason := fmt.Sprintf("%s by user before it started", msg.Action)
	if msg.Reason != "" {
		reason = msg.Reason
	}
	applied, err := e.store.StopCreated(ctx, msg.Ref, status, reason)
	if err != nil || applied {
		return err
	}
	live, err := e.store.IsLive(ctx, msg.Ref)
	if err != nil {
		return err
	}
	if live {
		return fmt.Errorf("%s of %s: run is live but not in memory yet", msg.Action, msg.Ref)
	}
	return nil
}

// retryWrite runs a write, retrying transient failures until it succeeds,
// is fenced, or ctx ends. A node that cannot write for long loses its
// leases, and its flows stop through ctx.
func (e *Engine) retryWrite(ctx context.Context, write func(context.Context) error) error {
	backoff := 20 * time.Millisecond
	for {
		err := write(ctx)
		if err == nil || errors.Is(err, run.ErrFenced) || ctx.Err() != nil || isPermanent(err) {
			return err
		}
		e.cfg.Logger.Warn("database write failed; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// registerRuntime adds a runtime for a step type unless the caller
// configured one.
func (e *Engine) registerRuntime(stepType string, rt stepruntime.Runtime) {
	if _, ok := e.cfg.Runtimes[stepType]; ok {
		return
	}
	e.cfg.Runtimes = maps.Clone(e.cfg.Runtimes)
	e.cfg.Runtimes[stepType] = rt
}
