package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/incremental"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

type flowMsgKind int

const (
	flowStepDone   flowMsgKind = iota // a step attempt ended
	flowRetryDue                      // a failed step's backoff is over
	flowAction                        // stop or kill from the API
	flowTimeout                       // the instance's timeout fired
	flowLost                          // a write failed: drop the flow here
	flowStepAction                    // a step action from the API
	flowIdle                          // the idle clock fired (passivate.go)
)

type flowMsg struct {
	kind   flowMsgKind
	done   stepSummary
	stepID string
	action run.Action
	reason string
	reply  chan error
	err    error
}

// stepSummary is what the flow keeps of a step's latest attempt.
type stepSummary struct {
	id      string
	attempt int64
	status  instance.StepStatus
	retry   instance.RetryInfo
	retryAt *time.Time
	params  params.Values
	outputs map[string]any
}

// flowActor runs one workflow instance run: it decides which steps start,
// starts a step actor per attempt, retries failed steps, applies actions,
// and ends the run. Its state is in memory and every change to it is written
// through before it is acted on.
type flowActor struct {
	eng    *Engine
	grp    *group
	ref    run.Ref
	gen    int64
	ctx    context.Context
	cancel context.CancelFunc

	wf         workflow.Workflow
	dag        *workflow.DAG
	nodes      map[string]*workflow.StepNode
	conditions map[string]*sel.Program // "from->to"
	status     instance.WorkflowStatus
	params     params.Values
	// plainParams are params' values as a plain map, made on first use
	// (plain): a run whose steps read its params in place (a NoOp's
	// params evaluated over params.Values) never needs them.
	plainParams map[string]any
	plainOnce   sync.Once
	started     time.Time
	timeout     time.Duration
	// parent is the subworkflow step that created the run, if one did.
	parent *run.Parent
	// info is what the run's events carry.
	info run.RunInfo
	// incremental: the run covers a range of an incremental trigger; its
	// end ends the range (end).
	incremental bool

	steps    map[string]*stepSummary
	running  map[string]*stepActor
	retries  map[string]*time.Timer
	stopping instance.WorkflowStatus
	reason   string
	// killing is set when the run is being killed rather than stopped.
	killing bool
	waiters []chan error
	timer   *time.Timer

	inbox *mailbox[flowMsg]
	// done is closed when the actor loop has returned.
	done chan struct{}

	// def is the shared decoded definition, released when the flow ends;
	// mem is what the flow holds of the engine's memory budget.
	def *decodedDefinition
	mem *flowMemory
	// start is the write that moves the run from CREATED to IN_PROGRESS
	// when the flow began before it committed (a start from the queue,
	// engine.go handleStart), nil otherwise: every write of the run is
	// ordered after it, so nothing of the run is durable, or acted on,
	// before the start is.
	start *flowstore.Op
	// pas is the flow's idle clock (passivate.go).
	pas passivation
	// order chains the run's writes, each after the one before
	// (writeorder.go).
	order writeOrder
}

// newFlow builds the actor for an adopted or just-started instance; held is
// what it holds of the memory budget already (its base footprint).
// vals, when set, are the run's params as just evaluated (row.Params is
// their JSON).
func newFlow(eng *Engine, grp *group, row flowstore.InstanceRow, held int64, vals params.Values) (*flowActor, error) {
	def, err := eng.defs.acquire(row.Definition, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", row.Ref, err)
	}
	wf, dag := def.wf, def.dag
	ctx, cancel := context.WithCancel(grp.ctx)
	// The flow's work (step calls, the runs and messages it creates)
	// continues the trace the run was created in, on whichever node
	// adopts it (docs/tracing.md), and its log lines name the run.
	ctx = tracing.WithRun(tracing.WithTraceparent(ctx, row.TraceContext),
		tracing.Run{WorkflowID: row.WorkflowID, InstanceID: row.InstanceID, RunID: row.RunID})
	f := &flowActor{
		eng: eng, grp: grp, ref: row.Ref, gen: grp.gen, ctx: ctx, cancel: cancel,
		wf: wf, dag: dag, nodes: map[string]*workflow.StepNode{}, conditions: map[string]*sel.Program{},
		status: row.Status, timeout: time.Duration(row.TimeoutSeconds) * time.Second,
		steps: map[string]*stepSummary{}, running: map[string]*stepActor{}, retries: map[string]*time.Timer{},
		inbox: newMailbox[flowMsg](), done: make(chan struct{}),
		def: def, mem: &flowMemory{budget: eng.mem, base: held},
	}
	for i := range wf.Steps {
		f.nodes[wf.Steps[i].ID()] = &wf.Steps[i]
	}
	f.info = run.NewRunInfo(&f.wf, row.UUID, row.Correlation, row.Depth)
	f.info.SetBackfill(row.BackfillID)
	f.info.SetIncremental(row.Incremental)
	f.incremental = len(row.Incremental) > 0 && string(row.Incremental) != "null"
	if row.StartTime != nil {
		f.started = *row.StartTime
	}
	if len(row.Parent) > 0 && string(row.Parent) != "null" {
		f.parent = &run.Parent{}
		if err := json.Unmarshal(row.Parent, f.parent); err != nil {
			eng.defs.release(def)
			return nil, fmt.Errorf("decode parent of %s: %w", row.Ref, err)
		}
	}
	if vals != nil {
		f.params = vals
	} else if len(row.Params) > 0 {
		if err := json.Unmarshal(row.Params, &f.params); err != nil {
			eng.defs.release(def)
			return nil, fmt.Errorf("decode params of %s: %w", row.Ref, err)
		}
	}
	return f, nil
}

// releaseMemory gives back the flow's definition and budget. It runs once,
// when the actor ends (or when runFlow discards an actor it never ran).
func (f *flowActor) releaseMemory() {
	f.mem.release()
	if f.def != nil {
		f.eng.defs.release(f.def)
		f.def = nil
	}
}

// run is the actor loop.
// paramErr is set when the run's params failed to evaluate at start: the
// run then ends FAILED at once.
func (f *flowActor) run(paramErr error, steps []flowstore.StepRow) {
	reserveStack(0)
	defer f.eng.wg.Done()
	defer close(f.done)
	defer f.grp.remove(f)
	defer f.awaitWrites()
	defer f.releaseMemory()
	defer f.cancel()
	defer f.stopIdle()
	if err := f.begin(paramErr, steps); err != nil {
		f.drop(err)
		return
	}
	f.armIdle()
	for !f.status.IsTerminal() {
		select {
		case <-f.ctx.Done():
			f.drop(f.ctx.Err())
			return
		case <-f.inbox.ready():
			batch := f.inbox.drain()
			busy := false
			for i, m := range batch {
				if m.kind == flowIdle {
					parked, err := f.onIdle(i == len(batch)-1)
					if err != nil {
						f.drop(err)
						return
					}
					if parked {
						return // passivated: the group's passive index holds the run
					}
					continue
				}
				busy = true
				if err := f.handle(m); err != nil {
					f.drop(err)
					return
				}
			}
			if !busy {
				continue
			}
			if err := f.decide(); err != nil {
				f.drop(err)
				return
			}
			if f.pas.idle != nil {
				f.pas.busyAt = time.Now()
			}
		}
	}
	for _, w := range f.waiters {
		w <- nil
	}
}

// drop abandons the flow in this process; the database keeps its state and
// whoever owns the group next (this node included) resumes it.
func (f *flowActor) drop(err error) {
	if f.startRefused() {
		// The start was refused: the run was stopped while CREATED, or the
		// group moved on. The queue message that started it says which.
		for _, w := range f.waiters {
			w <- fmt.Errorf("flow %s was not started: %w", f.ref, err)
		}
		return
	}
	if f.eng.ctx.Err() == nil && f.grp.ctx.Err() == nil && !f.grp.HandingOver() {
		f.eng.cfg.Logger.Warn("flow dropped from memory", "flow", f.ref.String(), "error", err.Error())
		f.grp.requestReadopt()
	}
	for _, w := range f.waiters {
		w <- fmt.Errorf("flow %s dropped: %w", f.ref, err)
	}
}

// plain is the run's params as a plain map, made once, on first use, by
// whichever of the flow's actors asks first; read-only after (params are
// set before any step actor starts and not changed after).
func (f *flowActor) plain() map[string]any {
	f.plainOnce.Do(func() { f.plainParams = f.params.Plain() })
	return f.plainParams
}

// startRefused reports whether the flow's start write failed.
func (f *flowActor) startRefused() bool { return f.start.Failed() != nil }

// begin rebuilds the state of the run from its step rows (none for a new
// run) and makes the first decisions.
func (f *flowActor) begin(paramErr error, steps []flowstore.StepRow) error {
	if paramErr != nil {
		return f.end(instance.WorkflowFailed, "workflow params failed to evaluate: "+paramErr.Error(), nil)
	}
	if f.timeout > 0 {
		start := f.started
		if start.IsZero() {
			start = time.Now()
		}
		f.timer = time.AfterFunc(time.Until(start.Add(f.timeout)), func() {
			f.inbox.send(flowMsg{kind: flowTimeout})
		})
		defer func() {
			if f.status.IsTerminal() {
				f.timer.Stop()
			}
		}()
	}
	for _, row := range steps {
		node := f.nodes[row.StepID]
		if node == nil {
			continue
		}
		s := &stepSummary{id: row.StepID, attempt: row.AttemptID, status: row.Status, retry: row.Retry, retryAt: row.Runtime.RetryAt}
		if len(row.Params) > 2 {
			f.mem.forceStep(row.StepID, int64(paramsFootprint*(len(row.Params)+len(row.Outputs))))
			_ = json.Unmarshal(row.Params, &s.params)
		}
		if len(row.Outputs) > 2 {
			_ = json.Unmarshal(row.Outputs, &s.outputs)
		}
		f.steps[row.StepID] = s
		switch {
		case !row.Status.IsTerminal():
			a := resumeAttempt(f, node, row)
			a.rt = f.eng.cfg.Runtimes[string(node.Type())]
			f.launch(a)
		case row.Status.IsRetryable() && row.Retry.Retryable:
			f.scheduleRetry(s)
		}
	}
	return f.decide()
}

func (f *flowActor) launch(a *stepActor) {
	f.running[a.id] = a
	f.eng.wg.Add(1)
	go a.run(f.ctx)
}

func (f *flowActor) handle(m flowMsg) error {
	switch m.kind {
	case flowStepDone:
		s := m.done
		delete(f.running, s.id)
		f.steps[s.id] = &s
		if f.stopping != "" {
			return nil
		}
		switch {
		case s.status.IsRetryable() && s.retry.Retryable:
			f.scheduleRetry(&s)
		case !s.status.IsComplete() && f.nodes[s.id].Common().EffectiveFailureMode() == workflow.FailureModeFailImmediately:
			f.stopAll(instance.WorkflowFailed, fmt.Sprintf("step %s failed with FAIL_IMMEDIATELY", s.id))
		}
	case flowRetryDue:
		if _, pending := f.retries[m.stepID]; !pending {
			return nil // a step action cancelled the retry after its timer fired
		}
		delete(f.retries, m.stepID)
		if f.stopping != "" {
			return nil
		}
		prev := f.steps[m.stepID]
		next := nextRetry(prev)
		a := newAttempt(f, f.nodes[m.stepID], prev.attempt+1, next)
		a.rt = f.eng.cfg.Runtimes[string(f.nodes[m.stepID].Type())]
		f.steps[m.stepID] = &stepSummary{id: m.stepID, attempt: a.attempt, status: instance.StepNotCreated, retry: next}
		f.launch(a)
	case flowAction:
		status, reason := instance.WorkflowStopped, "stopped by user"
		if m.action == run.ActionKill {
			status, reason = instance.WorkflowFailed, "killed by user"
		}
		if m.reason != "" {
			reason = m.reason
		}
		f.killing = m.action == run.ActionKill
		f.stopAll(status, reason)
		f.waiters = append(f.waiters, m.reply)
	case flowTimeout:
		f.stopAll(instance.WorkflowTimedOut, fmt.Sprintf("workflow instance timed out after %s", f.timeout))
	case flowStepAction:
		err := f.stepAction(m.stepID, m.action, m.reason)
		m.reply <- err
		if errors.Is(err, run.ErrActionNotAllowed) {
			return nil
		}
		return err
	case flowLost:
		return m.err
	}
	return nil
}

// nextRetry is the retry info of the attempt after a failed one.
func nextRetry(prev *stepSummary) instance.RetryInfo {
	r := prev.retry
	switch prev.status {
	case instance.StepUserFailed:
		r.ErrorRetries++
	case instance.StepPlatformFailed:
		r.PlatformRetries++
	case instance.StepTimeoutFailed:
		r.TimeoutRetries++
	}
	r.Retryable = true
	return r
}

func (f *flowActor) scheduleRetry(s *stepSummary) {
	delay := time.Duration(0)
	if s.retryAt != nil {
		delay = time.Until(*s.retryAt)
	}
	id := s.id
	f.retries[id] = time.AfterFunc(max(delay, 0), func() {
		f.inbox.send(flowMsg{kind: flowRetryDue, stepID: id})
	})
}

// stopAll ends the run as status once every running attempt has stopped.
func (f *flowActor) stopAll(status instance.WorkflowStatus, reason string) {
	if f.stopping != "" {
		return
	}
	f.stopping, f.reason = status, reason
	for id, t := range f.retries {
		t.Stop()
		delete(f.retries, id)
	}
	stepStatus := instance.StepStopped
	if status == instance.WorkflowTimedOut {
		stepStatus = instance.StepTimedOut
	}
	for _, a := range f.running {
		a.inbox.send(stepMsg{kind: msgStop, status: stepStatus, reason: reason, kill: f.killing})
	}
}

// decide starts every step whose predecessors are done and whose incoming
// conditions hold, marks unreachable ones UNSATISFIED, and ends the run when
// nothing is left to do.
func (f *flowActor) decide() error {
	if f.status.IsTerminal() {
		return nil
	}
	if f.stopping == "" {
		for _, id := range f.dag.TopoOrder() {
			if _, seen := f.steps[id]; seen {
				continue
			}
			ready, blocked := f.predecessorsDone(id)
			if !ready || blocked {
				continue
			}
			if limit := f.wf.InstanceStepConcurrency; limit != nil && *limit > 0 && int64(len(f.running)) >= *limit {
				break
			}
			run, err := f.anyEdgeTrue(id)
			if err != nil {
				if err := f.recordTerminal(id, instance.StepFatallyFailed, err.Error()); err != nil {
					return err
				}
				continue
			}
			if !run {
				if err := f.recordTerminal(id, instance.StepUnsatisfied, "no incoming condition was true"); err != nil {
					return err
				}
				continue
			}
			node := f.nodes[id]
			a := newAttempt(f, node, 1, initialRetry(node))
			a.rt = f.eng.cfg.Runtimes[string(node.Type())]
			f.steps[id] = &stepSummary{id: id, attempt: 1, status: instance.StepNotCreated, retry: a.retry}
			f.launch(a)
		}
	}
	if len(f.running) > 0 || len(f.retries) > 0 {
		return nil
	}
	if f.stopping != "" {
		return f.end(f.stopping, f.reason, nil)
	}
	if f.canStartMore() {
		return nil
	}
	status, reason := f.outcome()
	return f.end(status, reason, nil)
}

// predecessorsDone reports whether every predecessor reached a final status
// (ready), and whether one of them failed so the step can never run
// (blocked).
func (f *flowActor) predecessorsDone(id string) (ready, blocked bool) {
	for _, p := range f.dag.Predecessors(id) {
		s, ok := f.steps[p]
		if !ok || !s.status.IsTerminal() {
			return false, false
		}
		if _, retrying := f.retries[p]; retrying {
			return false, false
		}
		if !s.status.IsComplete() {
			return true, true
		}
	}
	return true, false
}

// anyEdgeTrue evaluates the step's incoming conditions. Roots always run;
// an edge from an UNSATISFIED or SKIPPED-by-condition predecessor is false.
func (f *flowActor) anyEdgeTrue(id string) (bool, error) {
	preds := f.dag.Predecessors(id)
	if len(preds) == 0 {
		return true, nil
	}
	for _, p := range preds {
		s := f.steps[p]
		if s.status == instance.StepUnsatisfied {
			continue
		}
		cond := f.dag.Successors(p)[id]
		if cond == "" {
			return true, nil
		}
		ok, err := f.evalCondition(p, id, cond, s)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

func (f *flowActor) evalCondition(from, to, cond string, pred *stepSummary) (bool, error) {
	key := from + "->" + to
	prog := f.conditions[key]
	if prog == nil {
		var err error
		prog, err = sel.Compile(cond)
		if err != nil {
			return false, fmt.Errorf("condition on %s: %w", key, err)
		}
		f.conditions[key] = prog
	}
	plain := f.plain()
	env := make(sel.MapEnv, len(plain)+len(pred.params))
	maps.Copy(env, plain)
	maps.Copy(env, pred.params.Plain())
	v, err := prog.Eval(f.ctx, env)
	if err != nil {
		return false, fmt.Errorf("condition on %s: %w", key, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition on %s returned %T, want boolean", key, v)
	}
	return b, nil
}

// canStartMore reports whether some step could still start.
func (f *flowActor) canStartMore() bool {
	for _, id := range f.dag.IDs() {
		if _, seen := f.steps[id]; seen {
			continue
		}
		if ready, blocked := f.predecessorsDone(id); ready && !blocked {
			return true
		}
	}
	return false
}

// outcome derives the run's status from its steps' final statuses: FAILED
// when a step failed, STOPPED when steps were only stopped (a step stop
// action), else SUCCEEDED.
func (f *flowActor) outcome() (instance.WorkflowStatus, string) {
	stopped := ""
	for _, id := range f.dag.IDs() {
		s, ok := f.steps[id]
		if !ok || !s.status.IsTerminal() || s.status.IsComplete() {
			continue
		}
		if s.status != instance.StepStopped {
			return instance.WorkflowFailed, fmt.Sprintf("step %s ended %s", id, s.status)
		}
		if stopped == "" {
			stopped = id
		}
	}
	if stopped != "" {
		return instance.WorkflowStopped, fmt.Sprintf("step %s was stopped", stopped)
	}
	return instance.WorkflowSucceeded, "all steps completed"
}

// recordTerminal writes a step that ends without running (UNSATISFIED, or a
// condition that failed to evaluate).
func (f *flowActor) recordTerminal(id string, status instance.StepStatus, reason string) error {
	return f.recordEnded(id, 1, initialRetry(f.nodes[id]), status, reason)
}

// recordEnded writes an attempt that ends without running and keeps its
// summary.
func (f *flowActor) recordEnded(id string, attempt int64, retry instance.RetryInfo, status instance.StepStatus, reason string) error {
	a := newAttempt(f, f.nodes[id], attempt, retry)
	if err := a.transition(instance.StepCreated, "step attempt created"); err != nil {
		return err
	}
	if err := a.transition(status, reason); err != nil {
		return err
	}
	if err := a.persist(f.ctx, false, true); err != nil {
		return err
	}
	f.steps[id] = &stepSummary{id: id, attempt: attempt, status: status, retry: retry}
	return nil
}

// end writes the run's final status.
func (f *flowActor) end(status instance.WorkflowStatus, reason string, params []byte) error {
	if err := instance.CheckWorkflowTransition(f.status, status); err != nil {
		return err
	}
	// A parent waiting in this process is woken in memory after the
	// commit; one elsewhere through a step_update written with the end.
	wakeHere := f.parent != nil && f.eng.waitsHere(f.parent.Ref, f.parent.StepID)
	tl := instance.StatusChange(string(status), reason)
	incrDue := false
	u := flowstore.InstanceUpdate{
		From: f.status, Status: status, Params: params, End: true,
		Timeline: tl,
	}
	if f.eng.events {
		u.Event = f.info.InstanceEvent(f.ref, f.status, status, time.UnixMilli(tl[0].Timestamp))
	}
	err := f.eng.retryWrite(f.ctx, func(ctx context.Context) error {
		if f.startRefused() {
			return run.ErrFenced // the run was never started here: nothing to retry
		}
		op := flowstore.UpdateInstanceOp(ctx, f.ref, f.grp.id, f.gen, u)
		if f.incremental {
			// The range ends with the run, in its transaction; the
			// watermark moves only when it SUCCEEDED (docs/incremental.md).
			op.Then(func(ctx context.Context, tx pgx.Tx) error {
				due, err := incremental.Ended(ctx, tx, f.ref.WorkflowID, f.ref.InstanceID, string(status))
				incrDue = due
				return err
			})
		}
		if f.parent != nil && !wakeHere {
			p := *f.parent
			op.Then(func(ctx context.Context, tx pgx.Tx) error {
				_, err := queue.Enqueue(ctx, tx, queue.StepUpdate, p.Group, run.StepUpdateMessage{Ref: p.Ref, Group: p.Group, StepID: p.StepID})
				return err
			})
		}
		// After every step write of the run (writeorder.go): nothing
		// learns of the end before they are durable.
		return f.write(ctx, op)
	})
	if err != nil {
		return err
	}
	if wakeHere {
		f.eng.wakeChildWaiter(f.parent.Ref, f.parent.StepID)
		// The parent may have left memory after it was found waiting here.
		f.eng.wakeRun(f.parent.Group, f.parent.Ref)
	}
	if incrDue && f.eng.cfg.SignalsAnnounced != nil {
		// Changes arrived while the run was in flight: the signal sweep
		// starts their run now rather than at its next tick.
		f.eng.cfg.SignalsAnnounced()
	}
	f.eng.wroteEvent(u.Event)
	f.status = status
	if f.timer != nil {
		f.timer.Stop()
	}
	if obs := f.eng.cfg.FlowObserver; obs != nil {
		obs(f.ref, status, time.Now())
	}
	// Hand the run's slot to the next queued run (docs/run-control.md).
	// Inline runs (loop iterations) are never queued.
	if instance.RootWorkflowID(f.ref.WorkflowID) == f.ref.WorkflowID {
		f.eng.store.AdmitIfQueued(f.ctx, f.ref.WorkflowID)
	}
	return nil
}

// initialRetry resolves a step's retry policy for its first attempt.
func initialRetry(node *workflow.StepNode) instance.RetryInfo {
	r := instance.RetryInfo{
		ErrorRetryLimit:    workflow.DefaultErrorRetryLimit,
		PlatformRetryLimit: workflow.DefaultPlatformRetryLimit,
		TimeoutRetryLimit:  workflow.DefaultTimeoutRetryLimit,
		Retryable:          true,
		Backoff: instance.Backoff{
			Exponential:      true,
			ErrorBackoffSecs: 60, ErrorExponent: 2, ErrorLimitSecs: 600,
			PlatformBackoffSecs: 60, PlatformExponent: 2, PlatformLimitSecs: 3600,
			TimeoutBackoffSecs: 60, TimeoutExponent: 2, TimeoutLimitSecs: 3600,
		},
	}
	p := node.RetryPolicy()
	if p == nil {
		return r
	}
	set := func(dst *int64, v *workflow.ParsableLong) {
		if v == nil {
			return
		}
		if n, err := v.Resolve(); err == nil {
			*dst = n
		}
	}
	setSecs := func(dst *int64, v *workflow.ParsableLong) {
		if v == nil {
			return
		}
		if n, err := v.ResolveSeconds(); err == nil {
			*dst = n
		}
	}
	set(&r.ErrorRetryLimit, p.ErrorRetryLimit)
	set(&r.PlatformRetryLimit, p.PlatformRetryLimit)
	set(&r.TimeoutRetryLimit, p.TimeoutRetryLimit)
	if b := p.Backoff; b != nil {
		r.Backoff.Exponential = b.Type != workflow.BackoffFixed
		setSecs(&r.Backoff.ErrorBackoffSecs, b.ErrorRetryBackoffInSecs)
		set(&r.Backoff.ErrorExponent, b.ErrorRetryExponent)
		setSecs(&r.Backoff.ErrorLimitSecs, b.ErrorRetryLimitInSecs)
		setSecs(&r.Backoff.PlatformBackoffSecs, b.PlatformRetryBackoffInSecs)
		set(&r.Backoff.PlatformExponent, b.PlatformRetryExponent)
		setSecs(&r.Backoff.PlatformLimitSecs, b.PlatformRetryLimitInSecs)
		setSecs(&r.Backoff.TimeoutBackoffSecs, b.TimeoutRetryBackoffInSecs)
		set(&r.Backoff.TimeoutExponent, b.TimeoutRetryExponent)
		setSecs(&r.Backoff.TimeoutLimitSecs, b.TimeoutRetryLimitInSecs)
	}
	return r
}
