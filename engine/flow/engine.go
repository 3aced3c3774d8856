// Package flow is the flow engine's actor runtime: it runs each workflow
// instance run of the flow groups this node holds as a flow actor and each
// step attempt as a step actor, and keeps their state in memory, written
// through to PostgreSQL by the node's writer on every change. Which groups
// the node holds, and until when, is engine/membership's job (groups.go is
// the seam). See docs/engine.md for the state machines and the guarantees.
package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/membership"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/stepruntime"
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
	// WriterPipelines is how many of the node's writer's transactions may
	// be in flight at once (default DefaultWriterPipelines). A run's
	// writes never share two at once, and the writer opens more than one
	// only for a write somebody waits for, while its commits take as long
	// as a database a network away's (flowstore.WriterConfig.RemoteCommit)
	// or, with WriterAwaitedWait set, once the transaction in flight has
	// taken that long (docs/performance.md, "The pipelined writer").
	WriterPipelines int
	// WriterRemoteCommit is the writer's flowstore.WriterConfig.RemoteCommit
	// (0: its default; negative: its pipelines always open).
	WriterRemoteCommit time.Duration
	// WriterAwaitedWait is the writer's flowstore.WriterConfig.AwaitedWait:
	// when positive, near the database, how long a transaction in flight
	// holds back a write somebody waits for before a further pipeline
	// takes it (default 0: never; docs/performance.md, "Awaited writes
	// and a slow transaction").
	WriterAwaitedWait time.Duration
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
	// broker's sweeper matches them (engine/trigger/signalbroker).
	SignalsAnnounced func()
	// PassivateAfter is how long a run whose every live step waits (on a
	// timer, signals, a breakpoint or an external completion) stays in
	// memory before it is passivated: its actors leave memory and the
	// database and the group's wake index hold it until it is due or woken
	// (passivate.go; default DefaultPassivateAfter, negative: never).
	PassivateAfter time.Duration
	// Admins are the principals treated as administrators, as the API's
	// MAESTRO_ADMINS: a subworkflow step whose workflow's owner is one may
	// start any workflow (docs/security.md, "Runs started by steps").
	Admins []string
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
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = 30 * time.Second
	}
	if c.AdmitInterval <= 0 {
		c.AdmitInterval = 2 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.WriterPipelines <= 0 {
		c.WriterPipelines = DefaultWriterPipelines
	}
	if c.Runtimes == nil {
		c.Runtimes = stepruntime.Builtins()
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.PassivateAfter == 0 {
		c.PassivateAfter = DefaultPassivateAfter
	}
	return nil
}

// Engine is one engine node: its membership (the groups it holds) and the
// actors of the flows in them.
type Engine struct {
	cfg Config
	// testHookLeaving, set by tests only, makes a starting flow find its
	// group leaving this node while it reports true.
	testHookLeaving func() bool
	db              *pgxpool.Pool
	relaxed         *pgxpool.Pool // queue bookkeeping, synchronous_commit off
	// writerDB is the writer's own pool (writerConns connections).
	writerDB *pgxpool.Pool
	store    *flowstore.Store
	writer   *flowstore.Writer
	pool     *workerPool
	worker   *queue.Worker
	members  *membership.Node
	// stepToken computes the callback token each attempt's job receives
	// (completion.Tokens); set by Start.
	stepToken func(stepUUID string) string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// groups are the groups the membership gave this node (groups.go).
	mu      sync.RWMutex
	groups  map[int32]*group
	readopt chan struct{}
	// breakpoints caches which workflows have breakpoints.
	breakpoints *breakpointCache
	// defs holds decoded run definitions (defcache.go).
	defs *definitionCache
	// versionDefs are the definitions of the runs read, by the sha256 of
	// their JSON, for the starts made from their notification
	// (notedstart.go).
	versionDefs versionDefinitions
	// mem is the memory budget of the node's flows (memory.go);
	// startWaits counts, per run, the starts that waited for it.
	mem        *memoryBudget
	startWaits sync.Map
	// starts bounds the starts handed off to the writer and not yet
	// committed (handleStart), to startLimit (startsInFlight of the
	// round trip to the database, measured by Start).
	starts     startGate
	startLimit int
	// events is set when the engine records the events of its writes
	// (always, but for benchmarks that measure their cost).
	events bool
	// passivations and activations count runs that left memory and came
	// back (passivate.go).
	passivations, activations atomic.Int64
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
		groups: map[int32]*group{}, readopt: make(chan struct{}, 1),
		breakpoints: newBreakpointCache(), defs: newDefinitionCache(mem), mem: mem, events: true}
	members, err := membership.New(db, membership.Config{NodeID: cfg.NodeID, GroupCount: cfg.GroupCount,
		MaxGroups: cfg.MaxGroups, Lease: cfg.Lease, HeartbeatInterval: cfg.HeartbeatInterval, Logger: cfg.Logger,
		Metrics: cfg.Metrics}, groupHost{e})
	if err != nil {
		return nil, err
	}
	e.members = members
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
	// The writer's connections are its own: a commit that every start
	// and every chain waits for never queues behind the node's reads
	// (and an API sharing the pool) for a connection. With PostgreSQL a
	// network away a connection is held for a round trip per statement,
	// and a shared pool of a few connections made the writer's batches
	// wait longer for one than for their commit.
	writerCfg := db.Config().Copy()
	writerCfg.MaxConns = int32(writerConns(cfg.WriterPipelines))
	writerCfg.MinConns = 0
	writerCfg.ConnConfig.RuntimeParams["application_name"] = writerAppName(db)
	writerDB, err := pgxpool.NewWithConfig(context.Background(), writerCfg)
	if err != nil {
		relaxed.Close()
		return nil, fmt.Errorf("open writer pool: %w", err)
	}
	e.writerDB = writerDB
	e.writer = flowstore.NewWriter(writerDB, flowstore.WriterConfig{Logger: cfg.Logger, Pipelines: cfg.WriterPipelines,
		RemoteCommit: cfg.WriterRemoteCommit, AwaitedWait: cfg.WriterAwaitedWait})
	// The composite step types run on the engine itself, unless the
	// caller configured runtimes of its own for them.
	for stepType, rt := range composite.Runtimes(composite.Config{DB: db, NodeID: cfg.NodeID, Logger: cfg.Logger, Local: localStarter{e},
		Policy: authz.Policy{Admins: cfg.Admins}}) {
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
	qc.Groups = e.members.Owned
	qc.Owns = e.members.Owns
	qc.Logger = cfg.Logger
	// The caller may add handlers for other queues (workflow deletion, ...).
	qc.Handlers = maps.Clone(cfg.Queue.Handlers)
	if qc.Handlers == nil {
		qc.Handlers = map[queue.ID]queue.Handler{}
	}
	qc.Handlers[queue.StartWorkflow] = e.handleStart
	// A start message's claim reads its run in the same round trip.
	qc.ClaimReads = map[queue.ID]*queue.ClaimRead{queue.StartWorkflow: flowstore.ClaimReadCreated}
	// A lone start's notification carries its run: no claim, no read
	// (notedstart.go).
	qc.Noted = map[queue.ID]func(queue.Message) (queue.Message, bool){queue.StartWorkflow: e.notedStart}
	// A start may wait for room among the starts awaiting their commit
	// (handleStart) rather than work: more of them at once, so that
	// starts share commits.
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
		writerDB.Close()
		return nil, err
	}
	e.worker = w
	return e, nil
}

// NodeID is this node's name.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// GroupCount is the number of flow groups new runs are spread over.
func (e *Engine) GroupCount() int { return e.members.GroupCount() }

// Start takes back the queue claims an earlier process under this node id
// left, starts the membership (which claims groups and adopts their flows)
// and starts processing; it returns without blocking once the first claim
// is done.
func (e *Engine) Start(ctx context.Context) error {
	// Every expression the engine evaluates draws from its memory budget.
	ctx = sel.WithMemoryPool(ctx, e.mem)
	e.ctx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	sign, err := completion.NewTokens(e.db).Signer(ctx)
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	e.stepToken = sign
	e.startLimit = startsInFlight(roundTrip(ctx, e.db))
	if err := e.writer.Start(e.ctx); err != nil {
		return err
	}
	// An engine restarted under the node id it had ends the claims its
	// earlier process held on queue messages, whose time-to-live would
	// hold them otherwise; the membership takes its groups back.
	if _, err := queue.NewStore(e.relaxed).ReleaseNode(ctx, e.cfg.NodeID); err != nil {
		return err
	}
	// The membership's loops and leases end with e.ctx: the groups' flows
	// stop as soon as Stop cancels it.
	if err := e.members.Start(e.ctx); err != nil {
		return err
	}
	if err := e.worker.Start(e.ctx); err != nil {
		return err
	}
	e.wg.Add(1)
	go e.loop()
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
		e.members.Stop()
		e.relaxed.Close()
		e.writerDB.Close()
	})
}

// loop re-adopts the groups' flows now and then (and on request) and
// admits queued runs; the membership runs the heartbeats.
func (e *Engine) loop() {
	defer e.wg.Done()
	r := time.NewTicker(e.cfg.ReconcileInterval)
	defer r.Stop()
	a := time.NewTicker(e.cfg.AdmitInterval)
	defer a.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-r.C:
			e.readoptAll(e.ctx)
		case <-a.C:
			e.admitSweep(e.ctx)
		case <-e.readopt:
			e.readoptAll(e.ctx)
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
// to decode row.Params) and, for a run being started here, its start's
// write (start, nil for none), which it submits once the flow is
// registered.
func (e *Engine) runFlowWith(ctx context.Context, g *group, row flowstore.InstanceRow, paramErr error, loadSteps bool, held int64,
	vals params.Values, start *startWrite) error {
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
	if paramsLostAtStart(row, steps, vals, paramErr, start) {
		var err error
		if vals, start, paramErr, err = e.reevaluateLostParams(ctx, g, &row); err != nil {
			e.mem.Release(held)
			return err
		}
	}
	return e.startFlow(g, row, paramErr, steps, held, vals, start)
}

// startFlow is runFlowWith once the run's steps are loaded (steps, none
// for a run just started).
func (e *Engine) startFlow(g *group, row flowstore.InstanceRow, paramErr error, steps []flowstore.StepRow, held int64,
	vals params.Values, start *startWrite) error {
	if held == 0 {
		held = runFootprint(len(row.Definition), len(row.Params))
		e.mem.force(held)
	}
	f, err := newFlow(e, g, row, held, vals)
	if err != nil {
		e.mem.Release(held)
		// The run's stored JSON does not decode: a redelivery would fail
		// the same way, so the start is written all the same.
		e.submitStart(start)
		return err
	}
	if start != nil {
		f.start = start.op
	}
	g.mu.Lock()
	_, running := g.flows[row.Ref]
	if running || g.ctx.Err() != nil || g.HandingOver() || (e.testHookLeaving != nil && e.testHookLeaving()) {
		g.mu.Unlock()
		f.cancel()
		f.releaseMemory()
		if start != nil && !running {
			return fmt.Errorf("start %s: group %d is leaving this node: %w", row.Ref, g.id, errFlowNotStarted)
		}
		return nil
	}
	g.flows[row.Ref] = f
	g.mu.Unlock()
	e.submitStart(start)
	e.wg.Add(1)
	go f.run(paramErr, steps)
	return nil
}

// WriterStats counts what the node's writer did since the engine
// started (flowstore.Stats): its transactions, and where the time of the
// writes somebody waits for went, queued or in their transaction.
type WriterStats = flowstore.Stats

// WriterStats is what the node's writer did so far, for benchmarks.
func (e *Engine) WriterStats() WriterStats { return e.writer.Stats() }

// DefaultWriterPipelines is Config.WriterPipelines's default: a second
// transaction for writes somebody waits for (a recorded intent, a run's
// end) while one is in flight, with the database a network away.
const DefaultWriterPipelines = 2

// writerConns is the size of the writer's own pool: one connection per
// transaction it may have in flight.
func writerConns(pipelines int) int { return max(pipelines, 1) }

// writerAppName names the writer's connections after the pool's (as
// pg_stat_activity shows them).
func writerAppName(db *pgxpool.Pool) string {
	if name := db.Config().ConnConfig.RuntimeParams["application_name"]; name != "" {
		return name + "-writer"
	}
	return "maestro-writer"
}

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
	// A passivated run is brought back to take the action; one that left
	// memory before it read the action is brought back and asked again.
	for try := 0; ; try++ {
		f, err := e.liveFlow(ctx, g, msg.Ref)
		if err != nil {
			return err
		}
		if msg.StepID != "" {
			err := e.handleStepAction(ctx, f, msg)
			if errors.Is(err, errFlowLeft) && try < 2 {
				continue
			}
			return err
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
			// The flow ended, was dropped or was passivated before it read
			// the action.
			if f.pas.parked && try < 2 {
				continue
			}
			return e.actOnAbsentFlow(ctx, msg)
		case <-time.After(actionTimeout):
			return fmt.Errorf("%s of %s did not finish within %s", msg.Action, msg.Ref, actionTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errFlowLeft reports a step action whose run left memory before it read
// it.
var errFlowLeft = errors.New("the run left memory before it read the step action")

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
		if f.pas.parked {
			return fmt.Errorf("step %s %s of %s: %w", msg.StepID, msg.Action, msg.Ref, errFlowLeft)
		}
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
