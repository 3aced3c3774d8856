package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/run"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

type stepMsgKind int

const (
	msgResult  stepMsgKind = iota // a runtime call returned
	msgWake                       // poll again
	msgStop                       // stop the attempt (instance stop, kill, timeout, fail immediately)
	msgTimeout                    // the step's own timeout fired
	msgRecheck                    // look again at a breakpoint or at permits
	msgRecord                     // a runtime call asks for its data to be made durable (Attempt.Record)
)

type phase int

const (
	phaseStart phase = iota
	phaseExecute
	phaseTerminate
)

type stepMsg struct {
	kind   stepMsgKind
	phase  phase
	result stepruntime.Result
	// status is what a stop ends the attempt as (STOPPED or TIMED_OUT).
	status instance.StepStatus
	reason string
	// kill is set when the stop is a kill, which a subworkflow step passes
	// on to its child.
	kill bool
	// data and reply carry a msgRecord.
	data  map[string]any
	reply chan error
}

// stepActor runs one attempt of one step: a goroutine with a mailbox that
// moves the attempt through the step state machine, writing every change
// through to PostgreSQL before acting on it, and running the step runtime's
// calls on the worker pool.
type stepActor struct {
	f       *flowActor
	node    *workflow.StepNode
	rt      stepruntime.Runtime
	id      string
	attempt int64
	uuid    string

	status instance.StepStatus
	// durable is the status last written (NOT_CREATED before the first
	// write): where the next write's status changes start from.
	durable instance.StepStatus
	seq     int64
	retry   instance.RetryInfo
	params  params.Values
	outputs map[string]any
	data    map[string]any
	message string
	started time.Time
	pending []instance.TimelineEvent
	// pendingAt holds when each pending transition happened, for Observer.
	pendingAt []time.Time
	inserted  bool
	// startUnwritten: the attempt entered STARTING without a write (an
	// inline runtime); its first write sets its start time.
	startUnwritten bool
	// runningDurable: RUNNING has been written, so an external job may
	// have set output params (see mergeOutputs).
	runningDurable bool

	inbox    *mailbox[stepMsg]
	inFlight bool
	// cancelCall ends the context of the call in flight (a leaf step's
	// Start or Execute), when the attempt is stopped or times out.
	cancelCall context.CancelFunc
	// deadline is when the step's own timeout fires (zero when it has
	// none), timeoutAfter the timeout itself.
	deadline     time.Time
	timeoutAfter time.Duration
	// done is closed when the actor's loop returns, so that a runtime
	// waiting in Attempt.Record never waits for an actor that is gone.
	done chan struct{}
	// rewake: a wake-up arrived while a call was in flight.
	rewake   bool
	stopWith *stepMsg
	timeout  *time.Timer
	// poll wakes the actor for the next Execute after Continue.
	poll    *time.Timer
	retryAt *time.Time

	// upstream is the read-only view of the other steps' params (outputs
	// merged in) the attempt's params may read, taken from the flow when
	// the attempt was created; nil when its params read none, or for a
	// resumed attempt, which loads it from the database if it needs it.
	upstream map[string]params.Values
	// defs are the attempt's merged param defs, for the modes of outputs.
	defs workflow.Params
	// permitted is set once the attempt holds its tags' permits.
	permitted bool
	// waitLogged is set once the wait for permits is on the timeline.
	waitLogged bool
	recheck    *time.Timer
	waitTags   []string
	// memoryWaits counts the times the attempt waited for expression
	// memory (maxMemoryWaits).
	memoryWaits int
	// matched are the signals that met the attempt's signal dependencies
	// (signals.go), signals what its params read with the signal
	// functions, built on first use; outSignals the output signals its
	// terminal write announces.
	matched    []params.SignalRef
	signals    *params.SignalSource
	outSignals []byte
}

// An attempt whose params cannot get expression memory (sel.MemoryPool)
// looks again every memoryRecheck, up to maxMemoryWaits times, before it
// fails as a user error.
const (
	memoryRecheck  = time.Second
	maxMemoryWaits = 60
)

// newAttempt prepares a fresh attempt of a step.
func newAttempt(f *flowActor, node *workflow.StepNode, attempt int64, retry instance.RetryInfo) *stepActor {
	a := &stepActor{
		f: f, node: node, id: node.ID(), attempt: attempt, uuid: uuid.NewString(),
		status: instance.StepNotCreated, durable: instance.StepNotCreated, retry: retry, inbox: newMailbox[stepMsg](),
		done: make(chan struct{}),
	}
	// Called on the flow's goroutine: the flow's step summaries may be read.
	if c := node.Common(); c != nil && params.ReadsUpstream(c.Params) {
		a.upstream = make(map[string]params.Values, len(f.steps))
		for id, s := range f.steps {
			if id != a.id && s.params != nil {
				a.upstream[id] = s.params
			}
		}
	}
	return a
}

// resumeAttempt rebuilds an attempt that was live when its flow was adopted.
func resumeAttempt(f *flowActor, node *workflow.StepNode, row flowstore.StepRow) *stepActor {
	a := &stepActor{
		runningDurable: row.Status == instance.StepRunning || row.Status == instance.StepFinishing,
		f:              f, node: node, id: row.StepID, attempt: row.AttemptID, uuid: row.UUID,
		status: row.Status, durable: row.Status, seq: row.Seq, retry: row.Retry, data: row.Runtime.Data,
		inserted: true, inbox: newMailbox[stepMsg](), done: make(chan struct{}),
	}
	if len(row.Params) > 0 {
		_ = json.Unmarshal(row.Params, &a.params)
	}
	if row.StartTime != nil {
		a.started = *row.StartTime
	}
	return a
}

func (a *stepActor) log() []any {
	return []any{"flow", a.f.ref.String(), "step_id", a.id, "attempt_id", a.attempt}
}

// run is the actor loop. It returns when the attempt is terminal (and tells
// the flow) or when the flow's context ends (group lost, engine stopping):
// then the database holds the last state and the next owner resumes it.
func (a *stepActor) run(ctx context.Context) {
	defer a.f.eng.wg.Done()
	defer close(a.done)
	defer func() {
		if a.timeout != nil {
			a.timeout.Stop()
		}
		if a.poll != nil {
			a.poll.Stop()
		}
		a.stopWaiting()
		a.stopWaitingForChild()
	}()
	if err := a.advance(ctx); err != nil {
		a.abandon(err)
		return
	}
	for !a.status.IsTerminal() {
		select {
		case <-ctx.Done():
			return
		case <-a.inbox.ready():
			for _, m := range a.inbox.drain() {
				if err := a.handle(ctx, m); err != nil {
					a.abandon(err)
					return
				}
				if a.status.IsTerminal() {
					break
				}
			}
		}
	}
	a.releasePermits(ctx)
	a.f.inbox.send(flowMsg{kind: flowStepDone, done: a.summary()})
}

// abandon gives up on the attempt in this process. Fenced writes mean
// another node owns the flow now; any other error means the database is
// unreachable, and the flow is dropped so that reconciliation rebuilds it.
func (a *stepActor) abandon(err error) {
	if ctxErr := a.f.ctx.Err(); ctxErr != nil {
		return
	}
	if errors.Is(err, errHandingOver) {
		// Expected: the flow stops here and goes on on its next owner.
		a.f.inbox.send(flowMsg{kind: flowLost, err: err})
		return
	}
	a.f.eng.cfg.Logger.Warn("step actor stopped", append(a.log(), "error", err.Error())...)
	a.f.inbox.send(flowMsg{kind: flowLost, err: err})
}

func (a *stepActor) summary() stepSummary {
	return stepSummary{id: a.id, attempt: a.attempt, status: a.status, retry: a.retry, retryAt: a.retryAt,
		params: a.params, outputs: a.outputs}
}

// transition records a status change in memory; persist writes it.
func (a *stepActor) transition(to instance.StepStatus, reason string) error {
	if err := instance.CheckStepTransition(a.status, to); err != nil {
		return err
	}
	a.status = to
	a.pending = append(a.pending, instance.StatusEvent(string(to), reason))
	a.pendingAt = append(a.pendingAt, time.Now())
	return nil
}

// persist writes the attempt's state and the transitions since the last
// write, fenced by the flow's generation, through the node's writer (one
// row of a multi-row statement, one commit shared with other runs).
func (a *stepActor) persist(ctx context.Context, start, end bool) error {
	start = start || a.startUnwritten
	w := flowstore.StepWrite{
		Status: a.status, Seq: a.seq + 1, Retry: a.retry, Timeline: a.pending, Start: start, End: end,
		Runtime: flowstore.RuntimeState{Data: a.data, RetryAt: a.retryAt, Message: a.message},
	}
	if a.params != nil {
		w.Params, _ = json.Marshal(a.params)
	}
	if a.outputs != nil {
		w.Outputs, _ = json.Marshal(a.outputs)
	}
	if a.f.eng.events {
		w.Event = a.stepEvent(w.Seq, a.pending)
	}
	w.Signals = a.outSignals
	err := a.f.eng.retryWrite(ctx, func(ctx context.Context) error {
		if a.f.startRefused() {
			return run.ErrFenced // the run was never started here: nothing to retry
		}
		op := flowstore.UpdateStepOp(ctx, a.f.ref, a.f.grp.id, a.f.gen, a.id, a.attempt, w)
		if !a.inserted {
			op = flowstore.InsertStepOp(ctx, a.f.ref, a.f.grp.id, a.f.gen, a.id, a.attempt, a.uuid, string(a.node.Type()), w)
		}
		return a.f.eng.writer.Write(ctx, op.After(a.f.start))
	})
	if err != nil {
		return err
	}
	a.inserted, a.startUnwritten = true, false
	a.durable = a.status
	a.f.eng.wroteEvent(w.Event)
	if w.Signals != nil {
		a.outSignals = nil
		if a.f.eng.cfg.SignalsAnnounced != nil {
			a.f.eng.cfg.SignalsAnnounced()
		}
	}
	if a.status == instance.StepRunning {
		a.runningDurable = true
	}
	a.seq++
	if start {
		a.started = time.Now()
	}
	if obs := a.f.eng.cfg.Observer; obs != nil {
		i := 0
		for _, ev := range a.pending {
			if ev.Type == "STATUS" {
				obs(a.f.ref, a.id, a.attempt, instance.StepStatus(ev.Status), a.pendingAt[i])
				i++
			}
		}
	}
	a.pending, a.pendingAt = nil, nil
	return nil
}

// advance moves through the states that need no waiting, then starts the
// runtime call the current state needs.
func (a *stepActor) advance(ctx context.Context) error {
	for {
		switch a.status {
		case instance.StepNotCreated:
			if err := a.transition(instance.StepCreated, "step attempt created"); err != nil {
				return err
			}
		case instance.StepCreated:
			if err := a.transition(instance.StepInitialized, ""); err != nil {
				return err
			}
		case instance.StepInitialized:
			paused, err := a.atBreakpoint(ctx)
			if err != nil {
				return err
			}
			if paused {
				if err := a.transition(instance.StepPaused, "paused at a breakpoint"); err != nil {
					return err
				}
				// Registered first, so that a resume arriving right after the
				// write wakes the attempt; durable before waiting, so that the
				// pause is visible and can be resumed.
				a.waitFor(pausedRecheck, nil)
				if err := a.persist(ctx, false, false); err != nil {
					return err
				}
				return nil
			}
			if err := a.transition(instance.StepWaitingForSignals, ""); err != nil {
				return err
			}
		case instance.StepPaused:
			paused, err := a.f.eng.store.StillPaused(ctx, a.f.ref, a.id, a.attempt)
			if err != nil {
				return err
			}
			if paused {
				a.waitFor(pausedRecheck, nil)
				return nil
			}
			a.stopWaiting()
			if err := a.transition(instance.StepWaitingForSignals, "resumed from the breakpoint"); err != nil {
				return err
			}
		case instance.StepWaitingForSignals:
			if waiting, err := a.awaitSignals(ctx); err != nil || waiting {
				return err
			}
			if err := a.transition(instance.StepEvaluatingParams, ""); err != nil {
				return err
			}
		case instance.StepEvaluatingParams:
			if err := a.evaluateParams(ctx); err != nil {
				// Expression memory is short for the moment (other runs'
				// evaluations hold it): look again shortly, a while.
				if errors.Is(err, sel.ErrPoolExhausted) && a.memoryWaits < maxMemoryWaits {
					a.memoryWaits++
					a.waitFor(memoryRecheck, nil)
					return nil
				}
				a.stopWaiting()
				// Params that do not evaluate fail the same way on every
				// attempt: not retried, as in Maestro.
				state := stepruntime.UserError
				var paramErr *params.Error
				if errors.As(err, &paramErr) || errors.Is(err, params.ErrNotOverridable) {
					state = stepruntime.FatalError
				}
				return a.fail(ctx, stepruntime.Result{State: state, Message: err.Error()})
			}
			a.stopWaiting()
			if err := a.transition(instance.StepWaitingForPermits, ""); err != nil {
				return err
			}
		case instance.StepWaitingForPermits:
			if a.rt == nil {
				return a.fail(ctx, stepruntime.Result{State: stepruntime.FatalError,
					Message: fmt.Sprintf("no runtime for step type %q on this engine", a.node.Type())})
			}
			if waiting, err := a.acquirePermits(ctx); err != nil || waiting {
				return err
			}
			if err := a.transition(instance.StepStarting, ""); err != nil {
				return err
			}
			if a.inline() {
				// Nothing outside the engine happens: the attempt is written
				// once, with its final state (stepruntime.Inline).
				a.startUnwritten = true
				return a.call(ctx, phaseStart)
			}
			// STARTING is durable before the runtime is called, so a restarted
			// engine knows the call may have happened and repeats it (Start is
			// idempotent).
			if err := a.persist(ctx, true, false); err != nil {
				return err
			}
			a.armTimeout()
			return a.call(ctx, phaseStart)
		case instance.StepStarting:
			a.armTimeout()
			return a.call(ctx, phaseStart)
		case instance.StepRunning:
			a.armTimeout()
			return a.call(ctx, phaseExecute)
		case instance.StepFinishing:
			return a.finish(ctx, instance.StepSucceeded, "")
		default:
			return nil // terminal
		}
	}
}

// ParamInjector is implemented by a step runtime that injects params
// derived from its step schema; they are merged after the default general
// params and before the step definition's (see params.StepDefs).
type ParamInjector interface {
	// InjectParams returns the params to inject for the attempt (Params
	// is not set yet).
	InjectParams(a *stepruntime.Attempt) workflow.Params
}

// stepInput is what merging the attempt's params needs.
func (a *stepActor) stepInput() params.StepInput {
	in := params.StepInput{
		WorkflowID: a.f.ref.WorkflowID, InstanceID: a.f.ref.InstanceID, RunID: a.f.ref.RunID,
		StepID: a.id, StepType: string(a.node.Type()), AttemptID: a.attempt, UUID: a.uuid,
		Defs: a.node.Common().Params, Workflow: a.f.plainParams, Steps: a.lookupUpstream,
		Typed: params.StepDefaults(a.node),
	}
	if inj, ok := a.rt.(ParamInjector); ok {
		att := a.runtimeAttempt()
		att.Params = nil
		in.Injected = inj.InjectParams(att)
	}
	return in
}

// evaluateParams merges and evaluates the attempt's params in Maestro's
// order (see params.StepDefs).
func (a *stepActor) evaluateParams(ctx context.Context) error {
	if a.upstream == nil && params.ReadsUpstream(a.node.Common().Params) {
		if err := a.loadUpstream(ctx); err != nil {
			return err
		}
	}
	in := a.stepInput()
	defs, err := params.StepDefs(in)
	if err != nil {
		return err
	}
	evalCtx, cancel := context.WithTimeout(ctx, paramEvaluationTimeout)
	defer cancel()
	evalCtx, funcs, err := a.withSignals(evalCtx, defs, a.subworkflowFuncs())
	if err != nil {
		return err
	}
	vals, err := params.EvaluateIn(evalCtx, defs, params.Scope{Base: in.Workflow, Steps: in.Steps, Funcs: funcs})
	if err != nil {
		return err
	}
	if err := a.f.mem.chargeStep(a.id, paramsFootprint*int64(params.Size(vals, params.MaxBytes+1))); err != nil {
		return err
	}
	a.defs, a.params = defs, vals
	return nil
}

// lookupUpstream reads a param of another step from the attempt's view.
func (a *stepActor) lookupUpstream(step, name string) (any, bool) {
	v, ok := a.upstream[step][name]
	if !ok {
		return nil, false
	}
	return v.Value, true
}

// loadUpstream builds the upstream view from the database, for an attempt
// rebuilt after a takeover.
func (a *stepActor) loadUpstream(ctx context.Context) error {
	rows, err := a.f.eng.store.LoadLatestAttempts(ctx, a.f.ref)
	if err != nil {
		return err
	}
	// The view is held while the attempt lives (charged under a key of its
	// own, beside the step's params).
	var total int
	for _, r := range rows {
		total += len(r.Params)
	}
	if err := a.f.mem.chargeStep(a.id+"\x00upstream", int64(paramsFootprint*total)); err != nil {
		return err
	}
	a.upstream = make(map[string]params.Values, len(rows))
	for _, r := range rows {
		if r.StepID == a.id || len(r.Params) <= 2 {
			continue
		}
		var vals params.Values
		if err := json.Unmarshal(r.Params, &vals); err == nil {
			a.upstream[r.StepID] = vals
		}
	}
	return nil
}

// atBreakpoint reports whether a breakpoint pauses the attempt. Workflows
// this node knows to have no breakpoint skip the query (breakpointCache).
// The cache is keyed by the pushed workflow the run belongs to, since the
// breakpoints of a foreach or while iteration are its root workflow's.
func (a *stepActor) atBreakpoint(ctx context.Context) (bool, error) {
	eng, wf := a.f.eng, instance.RootWorkflowID(a.f.ref.WorkflowID)
	if !eng.breakpoints.mayHave(wf) {
		return false, nil
	}
	paused, err := eng.store.PauseAtBreakpoint(ctx, a.f.ref, a.id, a.attempt)
	if err != nil || paused {
		return paused, err
	}
	return false, eng.refreshBreakpoints(ctx, wf)
}

// mergeOutputs merges the output params of the runtime's result and those
// an external job set through the API into the attempt's params, so that
// downstream steps read them. Only MUTABLE params may be changed.
func (a *stepActor) mergeOutputs(ctx context.Context, fromRuntime map[string]any) error {
	raw := make(map[string]any, len(fromRuntime))
	maps.Copy(raw, fromRuntime)
	// An external job can only set outputs while the attempt is RUNNING in
	// the database (PUT /output-data refuses otherwise), and RUNNING is
	// written only when the attempt waits for its job: an attempt that
	// never did has no external outputs, and the read is skipped.
	var stored []byte
	if a.runningDurable {
		var err error
		if stored, err = a.f.eng.store.ReadOutputData(ctx, a.uuid); err != nil {
			return err
		}
	}
	if len(stored) > 2 {
		var ext params.Values
		if err := json.Unmarshal(stored, &ext); err != nil {
			return fmt.Errorf("output data: %w", err)
		}
		for k, v := range ext {
			raw[k] = v
		}
	}
	if len(raw) == 0 {
		return nil
	}
	outs, err := params.Outputs(a.params, raw)
	if err != nil {
		return &outputError{err}
	}
	if a.defs == nil {
		if a.defs, err = params.StepDefs(a.stepInput()); err != nil {
			return &outputError{err}
		}
	}
	merged, err := params.MergeOutputs(a.params, a.defs, outs)
	if err != nil {
		return &outputError{err}
	}
	if err := a.f.mem.chargeStep(a.id, paramsFootprint*int64(params.Size(merged, params.MaxBytes+1))); err != nil {
		return err
	}
	a.params, a.outputs = merged, outs.Plain()
	return nil
}

// outputError is output params the step may not set; it fails the step.
type outputError struct{ err error }

func (e *outputError) Error() string { return "invalid output params: " + e.err.Error() }

func (e *outputError) Unwrap() error { return e.err }

// permitTags returns the step's tags, each with the limit written on it.
func (a *stepActor) permitTags() []flowstore.TagLimit {
	tags := a.node.Common().Tags
	if len(tags) == 0 {
		return nil
	}
	out := make([]flowstore.TagLimit, 0, len(tags))
	for _, t := range tags {
		l := flowstore.TagLimit{Tag: t.Name}
		if t.Permit != nil {
			l.Inline = *t.Permit
		}
		out = append(out, l)
	}
	return out
}

// acquirePermits takes a permit of each of the step's tags; waiting is true
// when one is used up and the attempt waits, rechecking when a permit is
// released here or on its timer.
func (a *stepActor) acquirePermits(ctx context.Context) (waiting bool, err error) {
	tags := a.permitTags()
	if len(tags) == 0 || a.permitted {
		return false, nil
	}
	if !a.waitLogged {
		// Held permits point at the attempt's row, which must exist (a
		// holder without a live row is taken for a leftover of a crash).
		if err := a.persist(ctx, false, false); err != nil {
			return false, err
		}
	}
	ok, blocked, err := a.f.eng.store.AcquirePermits(ctx, a.f.ref, a.id, a.attempt, a.uuid, tags)
	if err != nil {
		return false, err
	}
	if ok {
		a.stopWaiting()
		a.permitted = true
		return false, nil
	}
	if !a.waitLogged {
		a.waitLogged = true
		a.pending = append(a.pending, instance.LogEvent("INFO", fmt.Sprintf("waiting for a permit of tag %s", blocked)))
	}
	names := make([]string, len(tags))
	for i, t := range tags {
		names[i] = t.Tag
	}
	a.waitFor(permitRecheck, names)
	return true, nil
}

// releasePermits gives back an ended attempt's permits and wakes the
// attempts here that wait for them. A failure is left to the next
// acquirer, which drops permits of ended attempts.
func (a *stepActor) releasePermits(ctx context.Context) {
	tags := a.permitTags()
	if len(tags) == 0 || !a.status.IsTerminal() || ctx.Err() != nil {
		return
	}
	if err := a.f.eng.store.ReleasePermits(ctx, a.uuid); err != nil {
		a.f.eng.cfg.Logger.Warn("release tag permits", append(a.log(), "error", err.Error())...)
	}
	names := make([]string, len(tags))
	for i, t := range tags {
		names[i] = t.Tag
	}
	wakePermitWaiters(names)
}

// armTimeout starts the step's own timeout clock from its start time.
func (a *stepActor) armTimeout() {
	if a.timeout != nil {
		return
	}
	c := a.node.Common()
	if c.Timeout == nil {
		return
	}
	d, err := c.Timeout.Resolve()
	if errors.Is(err, workflow.ErrNeedsParams) {
		d, err = a.paramTimeout(c.Timeout.Text)
	}
	if err != nil || d <= 0 {
		return
	}
	start := a.started
	if start.IsZero() {
		start = time.Now()
	}
	a.deadline, a.timeoutAfter = start.Add(d), d
	a.timeout = time.AfterFunc(time.Until(a.deadline), func() {
		a.inbox.send(stepMsg{kind: msgTimeout, reason: a.timeoutReason()})
	})
}

func (a *stepActor) timeoutReason() string {
	return fmt.Sprintf("step timed out after %s", a.timeoutAfter)
}

// paramTimeout resolves a timeout written with params ("${hours}h") from
// the attempt's params and the workflow's.
func (a *stepActor) paramTimeout(text string) (time.Duration, error) {
	vals := maps.Clone(a.f.plainParams)
	if vals == nil {
		vals = map[string]any{}
	}
	maps.Copy(vals, a.params.Plain())
	s, err := params.Interpolate(text, vals)
	if err != nil {
		return 0, err
	}
	return workflow.ParseDuration(s)
}

func (a *stepActor) runtimeAttempt() *stepruntime.Attempt {
	cfg := composite.StepConfig(a.node, a.stopWith != nil && a.stopWith.kill)
	if a.node.Step != nil {
		cfg = a.node.Step.Config
	}
	return &stepruntime.Attempt{
		WorkflowID: a.f.ref.WorkflowID, InstanceID: a.f.ref.InstanceID, RunID: a.f.ref.RunID,
		StepID: a.id, AttemptID: a.attempt, Type: string(a.node.Type()),
		Params: a.params.Plain(), Config: cfg, StartTime: a.started, Data: a.data, UUID: a.uuid,
		Node: a.f.eng.cfg.NodeID, LeaseHeld: a.f.grp.leaseHeldNow,
	}
}

// composite reports a step whose runtime runs child runs on the engine
// (subworkflow, while, foreach).
func (a *stepActor) composite() bool {
	return a.node.Subworkflow != nil || a.node.While != nil || a.node.Foreach != nil
}

// wakesOnUpdate reports an attempt that a step_update message makes look
// again at once: a composite step (its child ended) or one whose runtime
// waits for a report from outside (stepruntime.Woken).
func (a *stepActor) wakesOnUpdate() bool {
	if a.composite() {
		return true
	}
	_, ok := a.rt.(stepruntime.Woken)
	return ok
}

// callContext is the context of one runtime call. A leaf step's Start and
// Execute can be cancelled (a stop or the step's timeout ends them at
// once) and carry the step's timeout as their deadline; Terminate runs
// after both and gets neither. A composite runtime's calls only touch the
// database and are left to finish.
func (a *stepActor) callContext(ctx context.Context, p phase) (context.Context, context.CancelFunc) {
	if a.composite() || p == phaseTerminate {
		return ctx, func() {}
	}
	if !a.deadline.IsZero() {
		return context.WithDeadline(ctx, a.deadline)
	}
	return context.WithCancel(ctx)
}

// recorder is the attempt's Attempt.Record: it hands the data to the
// actor, which writes it, and waits for the answer.
func (a *stepActor) recorder() func(context.Context, map[string]any) error {
	return func(ctx context.Context, data map[string]any) error {
		reply := make(chan error, 1)
		a.inbox.send(stepMsg{kind: msgRecord, data: data, reply: reply})
		select {
		case err := <-reply:
			return err
		case <-a.done:
			return stepruntime.ErrAttemptEnding
		case <-ctx.Done():
			return stepruntime.ErrAttemptEnding
		}
	}
}

// record makes a runtime's data durable before it starts a side effect
// (Attempt.Record). reply is for the runtime; err, a failed write, makes
// the actor give up the attempt. The lease is checked before the write,
// so that a node unsure of its group records nothing it then does not
// do, and after it, so that the time the write took counts too.
func (a *stepActor) record(ctx context.Context, data map[string]any) (reply, err error) {
	if a.status.IsTerminal() || a.stopWith != nil {
		return stepruntime.ErrAttemptEnding, nil
	}
	if !a.f.grp.leaseHeld(time.Now()) {
		return stepruntime.ErrLeaseUncertain, nil
	}
	a.data = data
	if err := a.persist(ctx, false, false); err != nil {
		return stepruntime.ErrAttemptEnding, err
	}
	if !a.f.grp.leaseHeld(time.Now()) {
		return stepruntime.ErrLeaseUncertain, nil
	}
	return nil, nil
}

// inline reports an attempt whose runtime runs on the actor itself
// (stepruntime.Inline).
func (a *stepActor) inline() bool {
	_, ok := a.rt.(stepruntime.Inline)
	return ok
}

// call runs one runtime call on the worker pool; its result comes back
// through the mailbox. An inline runtime's call runs here, at once, and
// its result is handled before call returns.
func (a *stepActor) call(ctx context.Context, p phase) error {
	// Self-fencing: no step work starts once this node's lease on the group
	// may have run out by its own clock, whatever the database has said
	// (a node resumed after a pause, or cut off from the database). The
	// flow is dropped; its next owner, this node or another, resumes it.
	if !a.f.grp.leaseHeld(time.Now()) {
		if a.f.grp.handingOver.Load() {
			return errHandingOver
		}
		go a.f.eng.dropExpired()
		return errLeaseExpired
	}
	if a.inline() {
		res := safeCall(func() stepruntime.Result {
			att := a.runtimeAttempt()
			switch p {
			case phaseStart:
				return a.rt.Start(ctx, att)
			case phaseExecute:
				return a.rt.Execute(ctx, att)
			default:
				return a.rt.Terminate(ctx, att)
			}
		})
		return a.handle(ctx, stepMsg{kind: msgResult, phase: p, result: res})
	}
	a.inFlight, a.rewake = true, false
	if p != phaseTerminate && a.wakesOnUpdate() {
		// Registered before the call, so that a child ending (or a report
		// arriving) while the call runs makes it look again at once
		// (rewake).
		a.waitForChild()
	}
	att := a.runtimeAttempt()
	att.Record = a.recorder()
	rt := a.rt
	calls := &a.f.grp.calls
	calls.Add(1)
	callCtx, cancel := a.callContext(ctx, p)
	a.cancelCall = cancel
	a.f.eng.pool.submit(callCtx, func() { cancel(); calls.Done() }, func(ctx context.Context) stepruntime.Result {
		switch p {
		case phaseStart:
			return rt.Start(ctx, att)
		case phaseExecute:
			return rt.Execute(ctx, att)
		default:
			return rt.Terminate(ctx, att)
		}
	}, func(r stepruntime.Result) {
		a.inbox.send(stepMsg{kind: msgResult, phase: p, result: r})
	})
	return nil
}

func (a *stepActor) handle(ctx context.Context, m stepMsg) error {
	if m.kind == msgRecord {
		reply, err := a.record(ctx, m.data)
		m.reply <- reply
		return err
	}
	if a.status.IsTerminal() {
		return nil
	}
	switch m.kind {
	case msgResult:
		a.inFlight, a.cancelCall = false, nil
		if a.stopWith == nil && m.phase != phaseTerminate && m.result.State != stepruntime.Done &&
			!a.deadline.IsZero() && !time.Now().Before(a.deadline) {
			// The call ended at the step's deadline (its context did), just
			// before the timeout's own message: the step timed out.
			a.stopWith = &stepMsg{kind: msgTimeout, status: instance.StepTimeoutFailed, reason: a.timeoutReason()}
		}
		if m.result.Data != nil {
			a.data = m.result.Data
		}
		if m.result.Message != "" {
			a.message = m.result.Message
		}
		if m.phase == phaseTerminate {
			return a.stopped(ctx)
		}
		if a.stopWith != nil {
			return a.call(ctx, phaseTerminate)
		}
		return a.onResult(ctx, m.phase, m.result)
	case msgRecheck:
		if a.stopWith != nil || (a.status != instance.StepPaused && a.status != instance.StepWaitingForPermits &&
			a.status != instance.StepWaitingForSignals && a.status != instance.StepEvaluatingParams) {
			return nil
		}
		return a.advance(ctx)
	case msgWake:
		if a.inFlight {
			// The call may have looked before what woke us: look again
			// as soon as it returns (onResult).
			a.rewake = true
			return nil
		}
		if a.stopWith != nil {
			return nil
		}
		if a.status == instance.StepStarting {
			return a.call(ctx, phaseStart)
		}
		return a.call(ctx, phaseExecute)
	case msgStop, msgTimeout:
		if a.stopWith != nil {
			return nil
		}
		stop := m
		if m.kind == msgTimeout {
			stop.status = instance.StepTimeoutFailed
		}
		a.stopWith = &stop
		if a.status != instance.StepStarting && a.status != instance.StepRunning {
			// Nothing was started: end the attempt without a runtime call.
			return a.stopped(ctx)
		}
		if !a.inFlight {
			return a.call(ctx, phaseTerminate)
		} else if a.cancelCall != nil {
			// A leaf step's call in flight (an HTTP request, an AWS call)
			// ends now; Terminate follows when it has returned.
			a.cancelCall()
		}
		return nil
	}
	return nil
}

func (a *stepActor) onResult(ctx context.Context, p phase, r stepruntime.Result) error {
	switch r.State {
	case stepruntime.Continue:
		delay := max(r.NextPollDelay, time.Millisecond)
		if a.rewake {
			delay = time.Millisecond
		}
		// Before waiting, everything that happened is made durable (RUNNING
		// included, which is written lazily).
		if (r.Data != nil && !r.DataRecorded) || len(a.pending) > 0 {
			if err := a.persist(ctx, false, false); err != nil {
				return err
			}
		}
		if a.poll != nil {
			a.poll.Stop()
		}
		a.poll = time.AfterFunc(delay, func() { a.inbox.send(stepMsg{kind: msgWake}) })
		if a.wakesOnUpdate() {
			a.waitForChild() // the child's end, or a report, wakes it (subworkflow.go)
		}
		return nil
	case stepruntime.Done:
		if p == phaseStart {
			// RUNNING is written with the next write: the attempt is durable
			// in STARTING already, and a restart from STARTING repeats the
			// idempotent Start. A step that finishes at once thus costs one
			// write less; one that keeps running is written before the
			// actor waits for it.
			if err := a.transition(instance.StepRunning, r.Message); err != nil {
				return err
			}
			return a.call(ctx, phaseExecute)
		}
		if err := a.mergeOutputs(ctx, r.Outputs); err != nil {
			var bad *outputError
			switch {
			case errors.As(err, &bad):
				return a.fail(ctx, stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()})
			case errors.Is(err, ErrMemoryBudget):
				return a.fail(ctx, stepruntime.Result{State: stepruntime.UserError, Message: err.Error()})
			}
			return err
		}
		if err := a.transition(instance.StepFinishing, ""); err != nil {
			return err
		}
		return a.finish(ctx, instance.StepSucceeded, r.Message)
	case stepruntime.Stopped:
		a.stopWith = &stepMsg{status: instance.StepStopped, reason: "step runtime reported STOPPED: " + r.Message}
		return a.stopped(ctx)
	default:
		return a.fail(ctx, r)
	}
}

// finish ends the attempt. A successful attempt announces its output
// signals in the write of its terminal state (signals.go).
func (a *stepActor) finish(ctx context.Context, to instance.StepStatus, reason string) error {
	if to == instance.StepSucceeded {
		sigs, names, err := a.outputSignals(ctx)
		if err != nil {
			return a.fail(ctx, stepruntime.Result{State: stepruntime.UserError, Message: err.Error()})
		}
		if sigs != nil {
			a.outSignals = sigs
			a.pending = append(a.pending, instance.LogEvent("INFO", "announced output signals: "+strings.Join(names, ", ")))
		}
	}
	if err := a.transition(to, reason); err != nil {
		return err
	}
	return a.persist(ctx, false, true)
}

// stopped ends the attempt after a stop request or the step's timeout.
func (a *stepActor) stopped(ctx context.Context) error {
	req := a.stopWith
	if req.status == instance.StepTimeoutFailed {
		return a.fail(ctx, stepruntime.Result{State: stepruntime.TimedOut, Message: req.reason})
	}
	return a.finish(ctx, req.status, req.reason)
}

// fail ends the attempt with a failure: a retryable status when the
// failure's retry limit allows another attempt, else its final status.
func (a *stepActor) fail(ctx context.Context, r stepruntime.Result) error {
	var (
		retryStatus instance.StepStatus
		used, limit *int64
		final       = instance.StepFatallyFailed
	)
	switch r.State {
	case stepruntime.UserError:
		retryStatus, used, limit = instance.StepUserFailed, &a.retry.ErrorRetries, &a.retry.ErrorRetryLimit
	case stepruntime.PlatformError:
		retryStatus, used, limit = instance.StepPlatformFailed, &a.retry.PlatformRetries, &a.retry.PlatformRetryLimit
	case stepruntime.TimedOut:
		retryStatus, used, limit = instance.StepTimeoutFailed, &a.retry.TimeoutRetries, &a.retry.TimeoutRetryLimit
		final = instance.StepTimedOut
	}
	a.message = r.Message
	a.pending = append(a.pending, instance.LogEvent("ERROR", fmt.Sprintf("%s: %s", r.State, r.Message)))
	if used != nil && *used < *limit && a.node.Step != nil {
		a.retry.Retryable = true
		at := time.Now().Add(a.retry.Backoff.Delay(retryStatus, *used+1))
		a.retryAt = &at
		return a.finish(ctx, retryStatus, fmt.Sprintf("will retry at %s", at.UTC().Format(time.RFC3339)))
	}
	a.retry.Retryable = false
	if a.node.Common().EffectiveFailureMode() == workflow.FailureModeIgnoreFailure {
		final = instance.StepCompletedWithError
	}
	reason := r.Message
	if used != nil {
		reason = fmt.Sprintf("%s (retries exhausted)", r.Message)
	}
	return a.finish(ctx, final, reason)
}

// stepEvent is the event of the attempt's write of seq: the status changes
// in timeline since the status last written. nil when it changes none.
func (a *stepActor) stepEvent(seq int64, timeline []instance.TimelineEvent) []byte {
	return a.f.info.StepEvent(a.f.ref, a.id, a.attempt, a.uuid, a.durable, seq, timeline)
}
