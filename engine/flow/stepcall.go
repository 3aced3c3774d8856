package flow

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/tracing"
)

// An attempt's runtime calls: Start, Execute and Terminate run on the
// node's worker pool (an inline runtime's on the actor itself), each only
// while this node's lease on the group is held by its own clock.

// stepCall is the attempt's runtime call in flight.
type stepCall struct {
	inFlight bool
	// cancel ends the context of the call in flight (a leaf step's Start
	// or Execute), when the attempt is stopped or times out.
	cancel context.CancelFunc
	// rewake: a wake-up arrived while a call was in flight.
	rewake bool
	// poll wakes the actor for the next Execute after Continue, at pollAt.
	poll   *time.Timer
	pollAt time.Time
}

// runtimeAttempt is what the runtime's calls see of the attempt. An inline
// runtime (pure, in the engine: no job to call back) gets no callback
// token, which costs an HMAC per call to sign.
func (a *stepActor) runtimeAttempt() *stepruntime.Attempt {
	cfg := composite.StepConfig(a.node, a.stopWith != nil && a.stopWith.kill)
	if a.node.Step != nil {
		cfg = a.node.Step.Config
	}
	att := &stepruntime.Attempt{
		WorkflowID: a.f.ref.WorkflowID, InstanceID: a.f.ref.InstanceID, RunID: a.f.ref.RunID,
		StepID: a.id, AttemptID: a.attempt, Type: string(a.node.Type()),
		Params: a.params.Plain(), Config: cfg, StartTime: a.started, Data: a.data, UUID: a.uuid,
		Node: a.f.eng.cfg.NodeID, LeaseHeld: a.f.grp.HeldNow,
	}
	if !a.inline() {
		att.CallbackToken = a.f.eng.stepToken(a.uuid)
	}
	return att
}

// spanNames name a runtime call's span by phase.
var spanNames = [...]string{phaseStart: "step start", phaseExecute: "step execute", phaseTerminate: "step terminate"}

// startSpan starts the span of one runtime call, a child of the run's
// trace (the flow's context); what the runtime does (an AWS call, a child
// run) joins it. Attributes are set only on a span that is recorded: an
// unexported span costs its ids alone.
func (a *stepActor) startSpan(ctx context.Context, p phase) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, spanNames[p])
	if span.IsRecording() {
		span.SetAttributes(attribute.String("maestro.workflow_id", a.f.ref.WorkflowID),
			attribute.Int64("maestro.workflow_instance_id", a.f.ref.InstanceID),
			attribute.Int64("maestro.workflow_run_id", a.f.ref.RunID),
			attribute.String("maestro.step_id", a.id), attribute.Int64("maestro.step_attempt_id", int64(a.attempt)),
			attribute.String("maestro.step_type", string(a.node.Type())))
	}
	return ctx, span
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
	if !a.timeout.deadline.IsZero() {
		return context.WithDeadline(ctx, a.timeout.deadline)
	}
	return context.WithCancel(ctx)
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
	if !a.f.grp.Held(time.Now()) {
		if a.f.grp.HandingOver() {
			return errHandingOver
		}
		go a.f.eng.members.DropExpired()
		return errLeaseExpired
	}
	if a.inline() {
		res := safeCall(func() stepruntime.Result {
			ctx, span := a.startSpan(ctx, p)
			defer span.End()
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
	a.calls.inFlight, a.calls.rewake = true, false
	if p != phaseTerminate && a.wakesOnUpdate() {
		// Registered before the call, so that a child ending (or a report
		// arriving) while the call runs makes it look again at once
		// (rewake).
		a.waitForChild()
	}
	att := a.runtimeAttempt()
	att.Record = a.recorder()
	rt := a.rt
	grp := a.f.grp
	grp.CallStarted()
	callCtx, cancel := a.callContext(ctx, p)
	a.calls.cancel = cancel
	a.f.eng.pool.submit(callCtx, func() { cancel(); grp.CallDone() }, func(ctx context.Context) stepruntime.Result {
		ctx, span := a.startSpan(ctx, p)
		defer span.End()
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
