package flow

import (
	"context"
	"encoding/json"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/instance"
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
	// when each happened, for Observer.
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
}

// transition records a status change in memory; persist writes it.
func (a *stepActor) transition(to instance.StepStatus, reason string) error {
	if err := instance.CheckStepTransition(a.status, to); err != nil {
		return err
	}
	a.status = to
	a.w.pending = append(a.w.pending, instance.StatusChange(string(to), reason)...)
	a.w.pendingAt = append(a.w.pendingAt, time.Now())
	return nil
}

// persist writes the attempt's state and the transitions since the last
// write, fenced by the flow's generation, through the node's writer (one
// row of a multi-row statement, one commit shared with other runs).
func (a *stepActor) persist(ctx context.Context, start, end bool) error {
	start = start || a.w.startUnwritten
	w := flowstore.StepWrite{
		Status: a.status, Seq: a.w.seq + 1, Retry: a.retry, Timeline: a.w.pending, Start: start, End: end,
		Runtime: flowstore.RuntimeState{Data: a.data, RetryAt: a.retryAt, Message: a.message},
	}
	if a.params != nil {
		w.Params, _ = json.Marshal(a.params)
	}
	if a.outputs != nil {
		w.Outputs, _ = json.Marshal(a.outputs)
	}
	if a.f.eng.events {
		w.Event = a.stepEvent(w.Seq, a.w.pending)
	}
	w.Signals = a.w.outSignals
	err := a.f.eng.retryWrite(ctx, func(ctx context.Context) error {
		if a.f.startRefused() {
			return run.ErrFenced // the run was never started here: nothing to retry
		}
		op := flowstore.UpdateStepOp(ctx, a.f.ref, a.f.grp.id, a.f.gen, a.id, a.attempt, w)
		if !a.w.inserted {
			op = flowstore.InsertStepOp(ctx, a.f.ref, a.f.grp.id, a.f.gen, a.id, a.attempt, a.uuid, string(a.node.Type()), w)
		}
		return a.f.eng.writer.Write(ctx, op.After(a.f.start))
	})
	if err != nil {
		return err
	}
	a.w.inserted, a.w.startUnwritten = true, false
	a.w.durable = a.status
	a.f.eng.wroteEvent(w.Event)
	if w.Signals != nil {
		a.w.outSignals = nil
		if a.f.eng.cfg.SignalsAnnounced != nil {
			a.f.eng.cfg.SignalsAnnounced()
		}
	}
	if a.status == instance.StepRunning {
		a.w.runningDurable = true
	}
	a.w.seq++
	if start {
		a.started = time.Now()
	}
	if obs := a.f.eng.cfg.Observer; obs != nil {
		i := 0
		for _, ev := range a.w.pending {
			if ev.Type == "STATUS" {
				obs(a.f.ref, a.id, a.attempt, instance.StepStatus(ev.Status), a.w.pendingAt[i])
				i++
			}
		}
	}
	a.w.pending, a.w.pendingAt = nil, nil
	return nil
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
