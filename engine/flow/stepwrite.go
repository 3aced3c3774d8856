package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// How an attempt's state reaches the database: transitions collect in
// memory and go out with the next write, one row of the node's writer's
// shared batch (docs/engine.md, "Writes on the hot path").

// stepWrites is what the attempt's writes keep track of.
type stepWrites struct {
	// durable is the status last written (NOT_CREATED before the first
	// write): where the next write's status changes start from.
	durable instance.StepStatus
	seq     int64
	// pending are the transitions since the last write; pendingAt holds
	// when each happened, for Observer (kept only when there is one).
	pending   []instance.TimelineEvent
	pendingAt []time.Time
	inserted  bool
	// startUnwritten: the attempt entered STARTING without a write (an
	// inline runtime); its first write sets its start time.
	startUnwritten bool
	// runningDurable: RUNNING has been written, so an external job may
	// have set output params (see mergeOutputs).
	runningDurable bool
	// outSignals are the output signals the attempt's terminal write
	// announces (signals.go).
	outSignals []byte
	// paramsStored: the row's params, with paramsPatch set on them, are
	// the attempt's (a.params), so that an update sends the patch (the
	// output params merged in since) or nothing rather than all of them
	// again: an Http step's end wrote its ~1.6 kB of params twice.
	paramsStored bool
	paramsPatch  params.Values
}

// transition records a status change in memory; persist writes it.
func (a *stepActor) transition(to instance.StepStatus, reason string) error {
	if err := instance.CheckStepTransition(a.status, to); err != nil {
		return err
	}
	a.status = to
	now := time.Now()
	if a.w.pending == nil {
		// One allocation for the transitions of a write: an attempt that
		// runs through in one write (an inline runtime) records about nine.
		a.w.pending = make([]instance.TimelineEvent, 0, pendingCap)
	}
	a.w.pending = instance.AppendStatusChange(a.w.pending, string(to), reason, now)
	if a.f.eng.cfg.Observer != nil {
		a.w.pendingAt = append(a.w.pendingAt, now)
	}
	return nil
}

// pendingCap is the room made for the transitions of one write.
const pendingCap = 12

// persist writes the attempt's state and the transitions since the last
// write, fenced by the flow's generation, through the node's writer (one
// row of a multi-row statement, one commit shared with other runs), in the
// run's order of writes (writeorder.go), and waits until it is durable.
func (a *stepActor) persist(ctx context.Context, start, end bool) error {
	w := a.nextWrite(start, end)
	err := a.f.eng.retryWrite(ctx, func(ctx context.Context) error {
		if a.f.startRefused() {
			return run.ErrFenced // the run was never started here: nothing to retry
		}
		return a.f.write(ctx, a.op(ctx, w))
	})
	if err != nil {
		return err
	}
	pending, pendingAt := a.wrote(w)
	a.durable(w, pending, pendingAt)
	return nil
}

// persistBehind writes the attempt's terminal state behind (writeorder.go):
// the write goes to the writer in the run's order and the attempt ends at
// once, so that the flow starts what follows while the write is in flight.
// What must wait for durability does: the Observer, the events' and
// signals' notifications (once it commits), anything outside the engine
// (after a later write, ordered after this one). A write that fails drops
// the flow. An attempt holding tag permits is written in the foreground:
// its permits, released when it ends, are shared with other runs.
func (a *stepActor) persistBehind(ctx context.Context) error {
	if len(a.permitTags()) > 0 {
		return a.persist(ctx, false, true)
	}
	if a.f.startRefused() {
		return run.ErrFenced
	}
	w := a.nextWrite(false, true)
	// The write outlives the attempt, and the flow if it is dropped: it is
	// given up only with the group (lost, or the node dying), and a flow
	// that ends waits for it (awaitWrites), so that a group handed over
	// carries it to its next owner.
	op := a.op(a.f.grp.ctx, w).Behind()
	pending, pendingAt := a.wrote(w)
	f, id := a.f, a.id
	op.OnDone(func(err error) {
		if err != nil {
			f.inbox.send(flowMsg{kind: flowLost, err: fmt.Errorf("write of step %s's %s: %w", id, w.Status, err)})
			return
		}
		a.durable(w, pending, pendingAt)
	})
	a.f.submit(op)
	return nil
}

// nextWrite is the attempt's next write: its state and the transitions
// since the last one.
func (a *stepActor) nextWrite(start, end bool) flowstore.StepWrite {
	start = start || a.w.startUnwritten
	w := flowstore.StepWrite{
		Status: a.status, Seq: a.w.seq + 1, Retry: a.retry, Timeline: a.w.pending, Start: start, End: end,
		Runtime: flowstore.RuntimeState{Data: a.data, RetryAt: a.retryAt, Message: a.message},
	}
	switch {
	case a.w.inserted && a.w.paramsStored:
		if a.w.paramsPatch != nil {
			w.ParamsPatch, _ = json.Marshal(a.w.paramsPatch)
		}
	case a.params != nil:
		w.Params, _ = json.Marshal(a.params)
	}
	if a.outputs != nil {
		w.Outputs, _ = json.Marshal(a.outputs)
	}
	if a.f.eng.events {
		w.Event = a.stepEvent(w.Seq, a.w.pending)
	}
	w.Signals = a.w.outSignals
	return w
}

// op is the writer's op for w: the attempt's insert or an update of it.
func (a *stepActor) op(ctx context.Context, w flowstore.StepWrite) *flowstore.Op {
	if !a.w.inserted {
		return flowstore.InsertStepOp(ctx, a.f.ref, a.f.grp.id, a.f.gen, a.id, a.attempt, a.uuid, string(a.node.Type()), w)
	}
	return flowstore.UpdateStepOp(ctx, a.f.ref, a.f.grp.id, a.f.gen, a.id, a.attempt, w)
}

// wrote moves the attempt's bookkeeping past w, once it is written or
// handed to the writer behind, and returns the transitions it carried.
func (a *stepActor) wrote(w flowstore.StepWrite) (pending []instance.TimelineEvent, pendingAt []time.Time) {
	a.w.inserted, a.w.startUnwritten = true, false
	a.w.paramsStored, a.w.paramsPatch = true, nil
	a.w.durable = a.status
	if w.Signals != nil {
		a.w.outSignals = nil
	}
	if a.status == instance.StepRunning {
		a.w.runningDurable = true
	}
	a.w.seq++
	if w.Start {
		a.started = time.Now()
	}
	pending, pendingAt = a.w.pending, a.w.pendingAt
	a.w.pending, a.w.pendingAt = nil, nil
	return pending, pendingAt
}

// durable tells whoever waits for w once it is durable: the event
// forwarder, the signal matcher, the Observer. It may run on the writer's
// goroutine (persistBehind), so it touches nothing of the actor's.
func (a *stepActor) durable(w flowstore.StepWrite, pending []instance.TimelineEvent, pendingAt []time.Time) {
	eng := a.f.eng
	eng.wroteEvent(w.Event)
	if w.Signals != nil && eng.cfg.SignalsAnnounced != nil {
		eng.cfg.SignalsAnnounced()
	}
	if obs := eng.cfg.Observer; obs != nil {
		i := 0
		for _, ev := range pending {
			if ev.Type == "STATUS" {
				obs(a.f.ref, a.id, a.attempt, instance.StepStatus(ev.Status), pendingAt[i])
				i++
			}
		}
	}
}

// stepEvent is the event of the attempt's write of seq: the status changes
// in timeline since the status last written. nil when it changes none.
func (a *stepActor) stepEvent(seq int64, timeline []instance.TimelineEvent) []byte {
	return a.f.info.StepEvent(a.f.ref, a.id, a.attempt, a.uuid, a.w.durable, seq, timeline)
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
	if !a.f.grp.Held(time.Now()) {
		return stepruntime.ErrLeaseUncertain, nil
	}
	a.data = data
	if err := a.persist(ctx, false, false); err != nil {
		return stepruntime.ErrAttemptEnding, err
	}
	if !a.f.grp.Held(time.Now()) {
		return stepruntime.ErrLeaseUncertain, nil
	}
	return nil, nil
}
