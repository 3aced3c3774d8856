package flow

import (
	"context"
	"errors"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// Passivation (docs/engine.md, "Passivation"). A run whose every live step
// has waited longer than Config.PassivateAfter on a timer (a poll: a sleep,
// an external job, a child run; a retry's backoff; a timeout) or on an
// event (signals, a breakpoint resume, an external completion) leaves
// memory: its actors end, the database keeps its state, and its group's
// passive index (passiveindex.go) keeps its key and when it is due at the
// latest. It comes back through the takeover's recovery path (runFlow from
// the stored rows) when it is due, or at once when anything would have
// messaged its actors: a step_update (signal, resume, completion, child
// run ended), an action, a start message, a timer that fired during the
// hand-off. A takeover enumerates a group's passivated runs into the index
// without rebuilding them (Store.ListPassive).
//
// The hand-off is two-phase, so that no message is lost: the flow asks each
// step actor to park; one that is idle freezes its mailbox (every later
// send also calls the wake hook), answers with its wake time and waits;
// once all agreed the flow freezes its own mailbox, records the run's wake
// time, tells the steps to end, moves itself from the group's flows to its
// passive index under the group's lock, and only then looks at the frozen
// mailboxes: a message that arrived meanwhile brings the run back at once,
// as does one arriving later through the hook.

// DefaultPassivateAfter is Config.PassivateAfter's default.
const DefaultPassivateAfter = 30 * time.Second

// passiveRecheck is the latest a run waiting on an event alone (signals, a
// breakpoint) is brought back to look again, the fallback for a wake-up
// lost; a variable so tests can shorten it.
var passiveRecheck = 15 * time.Minute

// activateRetry is how soon a run whose bringing back failed (the database
// unreachable) is tried again.
const activateRetry = time.Second

// minPassiveStay is how far off a run's wake time must be for it to leave
// memory.
const minPassiveStay = time.Second

// parkReq asks a step actor to park; parkReply is its answer.
type parkReq struct {
	hook   func()
	reply  chan parkReply
	decide chan bool
}

type parkReply struct {
	ok   bool
	wake time.Time
}

// passivation is what a flow keeps for passivation.
type passivation struct {
	// idle fires PassivateAfter after the flow was last busy (busyAt).
	idle   *time.Timer
	busyAt time.Time
	// parked is set once the flow has left memory.
	parked bool
}

// armIdle starts the flow's idle clock (nothing when passivation is off).
func (f *flowActor) armIdle() {
	d := f.eng.cfg.PassivateAfter
	if d <= 0 {
		return
	}
	f.pas.busyAt = time.Now()
	f.pas.idle = time.AfterFunc(d, func() { f.inbox.send(flowMsg{kind: flowIdle}) })
}

// stopIdle stops the idle clock.
func (f *flowActor) stopIdle() {
	if f.pas.idle != nil {
		f.pas.idle.Stop()
	}
}

// startDurable reports whether the run's start write (if the flow began
// before it committed) has committed.
func (f *flowActor) startDurable() bool {
	if f.start == nil {
		return true
	}
	select {
	case <-f.start.Done():
		return f.start.Err() == nil
	default:
		return false
	}
}

// onIdle handles the idle clock: when the flow and all its step actors
// have been idle for PassivateAfter and can park, the run leaves memory
// (parked true). last is false when more messages came with the clock's:
// the flow is busy.
func (f *flowActor) onIdle(last bool) (parked bool, err error) {
	d := f.eng.cfg.PassivateAfter
	now := time.Now()
	latest := f.pas.busyAt
	for _, a := range f.running {
		if t := time.Unix(0, a.activeAt.Load()); t.After(latest) {
			latest = t
		}
	}
	if idle := now.Sub(latest); idle < d {
		f.pas.idle.Reset(d - idle)
		return false, nil
	}
	if !last || f.status.IsTerminal() || f.stopping != "" || len(f.waiters) > 0 || !f.startDurable() ||
		len(f.running)+len(f.retries) == 0 || f.writesInFlight() {
		f.pas.idle.Reset(d)
		return false, nil
	}
	ok, err := f.passivate(now)
	if err != nil || ok {
		return ok, err
	}
	f.pas.idle.Reset(d)
	return false, nil
}

// passivate runs the hand-off; ok is false when a step actor was busy.
func (f *flowActor) passivate(now time.Time) (ok bool, err error) {
	hook := func() { f.eng.wakePassive(f.grp, f.ref) }
	wake := f.wakeTime(now)
	type parking struct {
		a   *stepActor
		req *parkReq
	}
	parks := make([]parking, 0, len(f.running))
	for _, a := range f.running {
		req := &parkReq{hook: hook, reply: make(chan parkReply, 1), decide: make(chan bool, 1)}
		a.inbox.send(stepMsg{kind: msgPark, park: req})
		parks = append(parks, parking{a, req})
	}
	ok = true
	for _, p := range parks {
		select {
		case r := <-p.req.reply:
			if !r.ok {
				ok = false
			} else if r.wake.Before(wake) {
				wake = r.wake
			}
		case <-p.a.done:
			ok = false // it ended; its news is in the flow's mailbox
		case <-f.ctx.Done():
			return false, f.ctx.Err()
		}
	}
	// A run due within moments stays: leaving and coming back would cost
	// more than it saves.
	ok = ok && time.Until(wake) >= minPassiveStay
	if ok {
		f.inbox.freeze(hook)
		if f.inbox.pending() {
			f.inbox.thaw()
			ok = false
		}
	}
	if !ok {
		for _, p := range parks {
			p.req.decide <- false
		}
		return false, nil
	}
	// From here on the run leaves memory unless the group has moved on: a
	// message that came meanwhile brings it back at once.
	err = f.eng.retryWrite(f.ctx, func(ctx context.Context) error {
		return f.eng.store.Passivate(ctx, f.ref, f.grp.id, f.gen, wake)
	})
	switch {
	case errors.Is(err, run.ErrFenced), f.ctx.Err() != nil:
		for _, p := range parks {
			p.req.decide <- false
		}
		f.inbox.thaw()
		if err == nil {
			err = f.ctx.Err()
		}
		return false, err
	case err != nil:
		// Whether the marker was written is unknown: the run leaves memory
		// and is brought back shortly, which clears it.
		f.eng.cfg.Logger.Warn("record passivated run", "flow", f.ref.String(), "error", err.Error())
		wake = time.Now().Add(activateRetry)
	}
	for _, p := range parks {
		p.req.decide <- true
	}
	for _, p := range parks {
		<-p.a.done
	}
	for id, t := range f.retries {
		t.Stop()
		delete(f.retries, id)
	}
	if f.timer != nil {
		f.timer.Stop()
	}
	f.stopIdle()
	f.pas.parked = true
	g := f.grp
	g.mu.Lock()
	if g.flows[f.ref] == f {
		delete(g.flows, f.ref)
	}
	g.passive.add(f.ref, wake)
	g.armPassive()
	g.mu.Unlock()
	f.eng.passivations.Add(1)
	// A message sent after the freeze and before the run was in the index
	// found nobody to wake: it is in a frozen mailbox.
	pending := f.inbox.pending()
	for _, p := range parks {
		pending = pending || p.a.inbox.pending()
	}
	if pending {
		f.eng.wakePassive(g, f.ref)
	}
	return true, nil
}

// wakeTime is when the flow itself is due at the latest: its earliest
// retry, its timeout, or the recheck fallback.
func (f *flowActor) wakeTime(now time.Time) time.Time {
	wake := now.Add(passiveRecheck)
	for id := range f.retries {
		s := f.steps[id]
		if s == nil || s.retryAt == nil {
			return now
		}
		if s.retryAt.Before(wake) {
			wake = *s.retryAt
		}
	}
	if f.timeout > 0 && !f.started.IsZero() {
		if t := f.started.Add(f.timeout); t.Before(wake) {
			wake = t
		}
	}
	return wake
}

// park answers a flow's request to park: an idle attempt (last is set
// when the request was the last message it had) freezes its mailbox,
// answers with its wake time and waits for the flow's decision. It
// reports whether the actor is to end.
func (a *stepActor) park(ctx context.Context, req *parkReq, last bool) bool {
	wake, ok := a.parkable()
	if ok && last {
		a.inbox.freeze(req.hook)
		if a.inbox.pending() {
			a.inbox.thaw()
			ok = false
		}
	} else {
		ok = false
	}
	if !ok {
		req.reply <- parkReply{}
		return false
	}
	req.reply <- parkReply{ok: true, wake: wake}
	select {
	case commit := <-req.decide:
		if commit {
			return true
		}
		a.inbox.thaw()
		return false
	case <-ctx.Done():
		return true
	}
}

// parkable reports whether the attempt waits with everything durable and
// nothing in flight, and when it is due at the latest: its next poll (a
// sleep, an external job, a child run), or the recheck fallback for one
// waiting on signals or at a breakpoint; its timeout if that is earlier.
// Attempts waiting for tag permits or for memory are not parked (they
// look again within seconds).
func (a *stepActor) parkable() (time.Time, bool) {
	if a.stopWith != nil || a.calls.inFlight || a.calls.rewake || len(a.w.pending) > 0 || !a.w.inserted ||
		a.w.startUnwritten || a.w.durable != a.status {
		return time.Time{}, false
	}
	var wake time.Time
	switch a.status {
	case instance.StepStarting, instance.StepRunning:
		if a.calls.poll == nil || a.calls.pollAt.IsZero() {
			return time.Time{}, false
		}
		wake = a.calls.pollAt
	case instance.StepWaitingForSignals, instance.StepPaused:
		if a.wait.recheck == nil || len(a.wait.tags) > 0 {
			return time.Time{}, false
		}
		wake = time.Now().Add(passiveRecheck)
	default:
		return time.Time{}, false
	}
	if d := a.timeout.deadline; !d.IsZero() && d.Before(wake) {
		wake = d
	}
	return wake, true
}

// touch records that the attempt just did something (the flow's idle
// clock reads it).
func (a *stepActor) touch() { a.activeAt.Store(time.Now().UnixNano()) }

// wakePassive brings a passivated run back, in the background, when it is
// one; anything else needs nothing.
func (e *Engine) wakePassive(g *group, ref run.Ref) {
	if !g.takePassive(ref) {
		return
	}
	if e.ctx.Err() != nil || g.ctx.Err() != nil {
		g.activated(ref)
		return // stopping: the run's next owner enumerates it
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.activate(g, ref, "woken")
	}()
}

// wakeRun is wakePassive for a run named by its group.
func (e *Engine) wakeRun(groupID int32, ref run.Ref) {
	if g := e.group(groupID); g != nil {
		e.wakePassive(g, ref)
	}
}

// liveFlow returns the run's actor, bringing the run back first when it
// is passivated, or waiting for it when it is being brought back; nil when
// it has none here.
func (e *Engine) liveFlow(ctx context.Context, g *group, ref run.Ref) (*flowActor, error) {
	for range 3 {
		if f := g.lookup(ref); f != nil {
			return f, nil
		}
		if g.takePassive(ref) {
			if err := e.activate(g, ref, "message"); err != nil {
				return nil, err
			}
			continue
		}
		ch := g.activation(ref)
		if ch == nil {
			return nil, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.lookup(ref), nil
}

// activate brings a passivated run back: its marker is cleared (and its
// generation stamped) and its actors are rebuilt from its rows, read in
// the same round trip, as a takeover rebuilds the runs it adopts (runFlow's
// startFlow). A failure puts it back in the
// index, due shortly.
func (e *Engine) activate(g *group, ref run.Ref, why string) error {
	defer g.activated(ref)
	ctx := g.ctx
	row, steps, ok, err := e.store.Activate(ctx, ref, g.id, g.gen, e.cfg.NodeID)
	if err != nil {
		if !errors.Is(err, run.ErrFenced) && g.ctx.Err() == nil {
			e.cfg.Logger.Warn("bring back passivated run", "flow", ref.String(), "why", why, "error", err.Error())
			g.passivated(ref, time.Now().Add(activateRetry))
		}
		return err
	}
	if !ok {
		return nil // over meanwhile
	}
	e.activations.Add(1)
	if err := e.startFlow(g, row, nil, steps, 0, nil, nil); err != nil {
		// Its marker is cleared: the reconciliation rebuilds it.
		e.cfg.Logger.Warn("bring back passivated run", "flow", ref.String(), "why", why, "error", err.Error())
		g.requestReadopt()
		return err
	}
	return nil
}

// adoptPassive enumerates a just-claimed group's passivated runs into its
// index, reading their keys alone. While it runs, a step_update for a run
// not in memory is retried rather than dropped (handleStepUpdate).
func (e *Engine) adoptPassive(ctx context.Context, g *group) error {
	start := time.Now()
	n, err := e.store.ListPassive(ctx, g.id, func(ref run.Ref, wake time.Time) {
		g.mu.Lock()
		g.passive.add(ref, wake)
		g.mu.Unlock()
	})
	g.mu.Lock()
	g.armPassive()
	g.mu.Unlock()
	if n > 0 {
		e.cfg.Logger.Info("passivated runs enumerated", "group_id", g.id, "runs", n, "took", time.Since(start).String())
	}
	return err
}

// PassiveStats are the engine's passivation counters.
type PassiveStats struct {
	// Live and Passive are the runs held in memory and passivated now.
	Live, Passive int
	// Passivations and Activations count runs that left memory and came
	// back since the engine started.
	Passivations, Activations int64
}

// Passivation reports the runs in memory and passivated on this node.
func (e *Engine) Passivation() PassiveStats {
	e.mu.RLock()
	gs := make([]*group, 0, len(e.groups))
	for _, g := range e.groups {
		gs = append(gs, g)
	}
	e.mu.RUnlock()
	s := PassiveStats{Passivations: e.passivations.Load(), Activations: e.activations.Load()}
	for _, g := range gs {
		s.Live += g.flowCount()
		s.Passive += g.passiveCount()
	}
	return s
}
