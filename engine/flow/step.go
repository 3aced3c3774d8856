package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"

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
	msgPark                       // the flow asks the attempt to leave memory (passivate.go)
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
	// park carries a msgPark.
	park *parkReq
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

	// The attempt's state, as its row stores it.
	status  instance.StepStatus
	retry   instance.RetryInfo
	retryAt *time.Time
	params  params.Values
	outputs map[string]any
	data    map[string]any
	message string
	started time.Time

	inbox *mailbox[stepMsg]
	// done is closed when the actor's loop returns, so that a runtime
	// waiting in Attempt.Record never waits for an actor that is gone.
	done chan struct{}
	// stopWith is the stop (or timeout) the attempt is ending with.
	stopWith *stepMsg
	// activeAt is when the actor last did something (unix nanoseconds),
	// for the flow's idle clock (passivate.go).
	activeAt atomic.Int64

	// The state each part of the actor keeps, in the file that works on it.
	w       stepWrites  // stepwrite.go: what is durable, what waits for the next write
	calls   stepCall    // stepcall.go: the runtime call in flight, the next poll
	timeout stepTimeout // steptimeout.go: the step's own timeout
	in      stepInputs  // stepparams.go: what the attempt's params are merged from
	wait    stepWait    // waits.go: tag permits, and the registration of a waiting attempt
	sig     signalWait  // signals.go: the signals that met the dependencies
}

// newAttempt prepares a fresh attempt of a step.
func newAttempt(f *flowActor, node *workflow.StepNode, attempt int64, retry instance.RetryInfo) *stepActor {
	a := &stepActor{
		f: f, node: node, id: node.ID(), attempt: attempt, uuid: uuid.NewString(),
		status: instance.StepNotCreated, w: stepWrites{durable: instance.StepNotCreated}, retry: retry,
		inbox: newMailbox[stepMsg](), done: make(chan struct{}),
	}
	// Called on the flow's goroutine: the flow's step summaries may be read.
	if c := node.Common(); c != nil && params.ReadsUpstream(c.Params) {
		a.in.upstream = make(map[string]params.Values, len(f.steps))
		for id, s := range f.steps {
			if id != a.id && s.params != nil {
				a.in.upstream[id] = s.params
			}
		}
	}
	return a
}

// resumeAttempt rebuilds an attempt that was live when its flow was adopted.
func resumeAttempt(f *flowActor, node *workflow.StepNode, row flowstore.StepRow) *stepActor {
	a := &stepActor{
		f: f, node: node, id: row.StepID, attempt: row.AttemptID, uuid: row.UUID,
		status: row.Status, retry: row.Retry, data: row.Runtime.Data,
		w: stepWrites{durable: row.Status, seq: row.Seq, inserted: true, paramsStored: true,
			runningDurable: row.Status == instance.StepRunning || row.Status == instance.StepFinishing},
		inbox: newMailbox[stepMsg](), done: make(chan struct{}),
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
	reserveStack(0)
	defer a.f.eng.wg.Done()
	defer close(a.done)
	defer func() {
		if a.timeout.timer != nil {
			a.timeout.timer.Stop()
		}
		if a.calls.poll != nil {
			a.calls.poll.Stop()
		}
		a.stopWaiting()
		a.stopWaitingForChild()
	}()
	if err := a.advance(ctx); err != nil {
		a.abandon(err)
		return
	}
	a.touch()
	for !a.status.IsTerminal() {
		select {
		case <-ctx.Done():
			return
		case <-a.inbox.ready():
			batch := a.inbox.drain()
			for i, m := range batch {
				if m.kind == msgPark {
					if a.park(ctx, m.park, i == len(batch)-1) {
						return // passivated: the database holds the attempt
					}
					continue
				}
				a.touch()
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
				if errors.Is(err, sel.ErrPoolExhausted) && a.in.memoryWaits < maxMemoryWaits {
					a.in.memoryWaits++
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
				a.w.startUnwritten = true
				return a.call(ctx, phaseStart)
			}
			if _, ok := a.rt.(stepruntime.RecordsFirst); ok {
				// Nothing outside the engine happens before the runtime
				// records its intent: the attempt's first write is that
				// record (CREATED … RUNNING with the intent, one insert),
				// which the writer sends with the run's writes before it
				// (a predecessor's end, written behind) in one commit.
				a.w.startUnwritten = true
				a.armTimeout()
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
		a.calls.inFlight, a.calls.cancel = false, nil
		if a.stopWith == nil && m.phase != phaseTerminate && m.result.State != stepruntime.Done &&
			!a.timeout.deadline.IsZero() && !time.Now().Before(a.timeout.deadline) {
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
		if a.calls.inFlight {
			// The call may have looked before what woke us: look again
			// as soon as it returns (onResult).
			a.calls.rewake = true
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
		if !a.calls.inFlight {
			return a.call(ctx, phaseTerminate)
		} else if a.calls.cancel != nil {
			// A leaf step's call in flight (an HTTP request, an AWS call)
			// ends now; Terminate follows when it has returned.
			a.calls.cancel()
		}
		return nil
	}
	return nil
}

func (a *stepActor) onResult(ctx context.Context, p phase, r stepruntime.Result) error {
	switch r.State {
	case stepruntime.Continue:
		delay := max(r.NextPollDelay, time.Millisecond)
		if a.calls.rewake {
			delay = time.Millisecond
		}
		// Before waiting, everything that happened is made durable (RUNNING
		// included, which is written lazily).
		if (r.Data != nil && !r.DataRecorded) || len(a.w.pending) > 0 {
			if err := a.persist(ctx, false, false); err != nil {
				return err
			}
		}
		if a.calls.poll != nil {
			a.calls.poll.Stop()
		}
		a.calls.poll = time.AfterFunc(delay, func() { a.inbox.send(stepMsg{kind: msgWake}) })
		a.calls.pollAt = time.Now().Add(delay)
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
			a.w.outSignals = sigs
			a.w.pending = append(a.w.pending, instance.LogEvent("INFO", "announced output signals: "+strings.Join(names, ", ")))
		}
	}
	if err := a.transition(to, reason); err != nil {
		return err
	}
	// Written behind: the flow goes on at once, and nothing outside the
	// engine learns of the end before it is durable (writeorder.go).
	return a.persistBehind(ctx)
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
	a.w.pending = append(a.w.pending, instance.LogEvent("ERROR", fmt.Sprintf("%s: %s", r.State, r.Message)))
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
