package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// The start message's path: a run created CREATED (or admitted from
// the queue) is claimed, its params evaluated and its flow started here.

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
	ctx = tracing.WithRun(ctx, tracing.Run{WorkflowID: msg.Ref.WorkflowID, InstanceID: msg.Ref.InstanceID, RunID: msg.Ref.RunID})
	g := e.group(msg.Group)
	if g == nil {
		return fmt.Errorf("group %d is not owned here", msg.Group)
	}
	if g.lookup(msg.Ref) != nil {
		return nil // already running: a repeated delivery
	}
	if g.takePassive(msg.Ref) {
		return e.activate(g, msg.Ref, "start message") // started long ago: a repeated delivery
	}
	// Evaluate the params first so that the CREATED -> IN_PROGRESS write
	// stores them too: one write instead of two on the start path.
	pending, created := m.Read.(flowstore.CreatedRow) // read with the claim
	created = created && pending.Row.Ref == msg.Ref
	var err error
	if !created {
		if pending, created, err = e.store.ReadCreated(ctx, msg.Ref); err != nil {
			return err
		}
	}
	if created && !pending.FromNote {
		// Read: the next start of its version may come from its note.
		e.versionDefs.put(pending.Row.Definition)
	}
	var paramsJSON, ev []byte
	var vals params.Values
	var paramErr error
	var held int64
	if created {
		vals, paramsJSON, paramErr = e.evaluateStartParams(ctx, msg.Ref, pending, pending.Owner)
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
	// were two): the start is written behind, so that an idle writer holds
	// it for its linger rather than committing it alone a moment before
	// the first step's write. The message stays until the start is
	// durable (it is deleted with it when handed off, below).
	start := &startWrite{op: flowstore.StartOp(ctx, msg.Ref, g.id, g.gen, e.cfg.NodeID, paramsJSON, ev).Behind()}
	// A fresh run (no steps to load, the usual case) hands its message
	// off: the start's transaction deletes it (Acks, fenced like the
	// start), and this worker goes on to the next message instead of
	// waiting for the commit and then deleting it, two round trips of
	// the database that serialized starts a network away. A run with
	// steps to load keeps the message until the start is durable, so
	// that a failed load is retried.
	handOff := !pending.HasSteps
	if handOff {
		if err := e.starts.acquire(ctx, e.startLimit); err != nil {
			e.mem.Release(held)
			return err
		}
		start.op.Acks(m, e.cfg.NodeID).OnDone(func(err error) { e.startDone(g, m, ev, err) })
	}
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
	err = e.runFlowWith(ctx, g, row, paramErr, pending.HasSteps, held, vals, start)
	if !start.submitted {
		// No flow began here (the group is leaving this node, the steps
		// did not load, or the run's flow is running already) and nothing
		// was written: the run is still CREATED and its message, unless
		// the flow runs already, is offered again.
		if handOff {
			e.starts.release()
		}
		return err
	}
	if err != nil {
		// Only newFlow fails here once the start is submitted (the run's
		// stored JSON does not decode), and a redelivery would fail the
		// same way: a handed-off message goes with the start all the
		// same, and the worker's retry of it finds nothing.
		_ = start.op.Wait(ctx)
		return err
	}
	if handOff {
		if e.startLimit <= startWorkers {
			// Near the database a worker still waits for its start's
			// commit before it claims the next message: going on at
			// once gained nothing measurable there, and let a burst's
			// starts crowd the writer ahead of its runs' step writes
			// (BenchmarkHttpSteps1000/Http p50 12-13.6 -> 16-17.5 ms).
			// The message goes with the start's write all the same.
			_ = start.op.Wait(ctx)
		}
		return queue.ErrHandedOff
	}
	switch err := start.op.Wait(ctx); {
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

// startWrite is a fresh run's CREATED -> IN_PROGRESS write. It is
// submitted to the writer only once the run's flow is registered
// (startFlow): a start whose flow does not begin here, because the group
// is leaving this node, writes nothing, so the run stays CREATED and its
// message goes to the group's next owner. Written IN_PROGRESS with no flow
// to carry it on, the run would be resumed by that owner from its row
// alone: a run whose params failed to evaluate (which its flow would have
// ended FAILED) would go on without them.
type startWrite struct {
	op        *flowstore.Op
	submitted bool
}

// errFlowNotStarted: the flow of a run being started did not begin on
// this node, and its start was not written.
var errFlowNotStarted = errors.New("the run's flow did not start here")

// submitStart submits a start's write once.
func (e *Engine) submitStart(s *startWrite) {
	if s != nil && !s.submitted {
		s.submitted = true
		e.writer.Submit(s.op)
	}
}

// startDone is the outcome of a start whose message was handed off with
// it (queue.ErrHandedOff), on the writer's goroutine: committed, the
// message went with it; refused by the run's guard (no longer CREATED)
// with the group still held, it went too; otherwise (the group moved on,
// or the write failed) the message is offered again, as a handler's error
// would have it. Either way the worker is told the message has settled.
func (e *Engine) startDone(g *group, m queue.Message, ev []byte, err error) {
	e.starts.release()
	if err == nil {
		e.wroteEvent(ev)
		e.worker.Settled(e.ctx, m, nil)
		return
	}
	go func() {
		if errors.Is(err, run.ErrFenced) {
			held, herr := e.store.GroupHeld(e.ctx, g.id, g.gen, e.cfg.NodeID)
			if herr == nil && held {
				e.worker.Settled(e.ctx, m, nil) // deleted with the refused start
				return
			}
		}
		e.worker.Settled(e.ctx, m, fmt.Errorf("start: %w", err))
	}()
}

// startsInFlight is how many starts handed off to the writer may await
// their commit at once, rt being the round trip to the database; a start
// worker waits below it. Near the database, 8 (the bound when 8 start
// workers each waited for their start's commit): more admit a burst of
// runs faster than their steps' writes commit, and each of those writes
// waits behind the burst (BenchmarkHttpSteps1000's p50 went from 24-56 ms
// to 130-250 ms with 64, at load 10-13). A network away each commit takes
// longer, and the bound grows with the round trip (8 more per half
// millisecond, up to 64) so that runs are admitted about as fast as near
// it (Little's law): with 8 at 1 ms each way, runs started at about half
// the rate. The round trip is measured rather than the writer's commits:
// a burst of large batches makes those slow near the database too.
func startsInFlight(rt time.Duration) int {
	const step, base, most = 500 * time.Microsecond, 8, 64
	return min(most, base+base*int(rt/step))
}

// roundTrip is the fastest of a few pings of db (0 if none answered):
// the network's round trip to the database, without a commit.
func roundTrip(ctx context.Context, db *pgxpool.Pool) time.Duration {
	var fastest time.Duration
	for range 4 { // the first may open the connection
		start := time.Now()
		if err := db.Ping(ctx); err != nil {
			continue
		}
		if d := time.Since(start); fastest == 0 || d < fastest {
			fastest = d
		}
	}
	return fastest
}

// startGate counts the starts awaiting their commit.
type startGate struct {
	mu   sync.Mutex
	n    int
	wake chan struct{} // closed (and replaced) when a start is released
}

// acquire waits until fewer than limit starts are counted, then counts
// one more.
func (g *startGate) acquire(ctx context.Context, limit int) error {
	for {
		g.mu.Lock()
		if g.n < limit {
			g.n++
			g.mu.Unlock()
			return nil
		}
		if g.wake == nil {
			g.wake = make(chan struct{})
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release uncounts a start and wakes those waiting.
func (g *startGate) release() {
	g.mu.Lock()
	g.n--
	if g.wake != nil {
		close(g.wake)
		g.wake = nil
	}
	g.mu.Unlock()
}

// startWorkers is how many start messages an engine handles at once. A
// start waited for a commit of the writer (one handed off now waits only
// for room below startsInFlight), so more than the queue's default 4 were
// needed for starts to share commits; but each one admitted adds its
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
	ri.SetBackfill(row.BackfillID)
	ri.SetIncremental(row.Incremental)
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
	initiator := decodeInitiator(initiatorJSON)
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

// decodeInitiator decodes a run's initiator column for its params' evaluation.
// Only its type and time zone are read; a malformed one is manual (nil).
func decodeInitiator(raw []byte) map[string]any {
	var initiator map[string]any
	if len(raw) > 2 {
		_ = json.Unmarshal(raw, &initiator)
	}
	return initiator
}

// paramEvaluationTimeout bounds one evaluation of a run's or a step's
// params. SEL's own limits stop a runaway expression within about two
// seconds on this class of machine; the deadline is the backstop.
const paramEvaluationTimeout = 10 * time.Second
