package flow

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// Step attempts that wait outside the engine (PAUSED at a breakpoint,
// WAITING_FOR_PERMITS) register here so that an event can wake them: a
// step_update message from the API (resume, breakpoint deleted), or a
// permit released on this node. A timer rechecks them too, as the fallback
// for a missed event and for permits released on another node.

// Recheck intervals of waiting attempts; variables so tests can shorten
// them.
var (
	pausedRecheck = 5 * time.Second
	permitRecheck = time.Second
)

// waitKey names a waiting attempt on one engine.
type waitKey struct {
	eng  *Engine
	ref  run.Ref
	step string
}

var (
	waitMu sync.Mutex
	// waiting holds the attempts waiting for a step_update.
	waiting = map[waitKey]*stepActor{}
	// permitWaiters holds, per tag, the attempts waiting for its permits.
	permitWaiters = map[string]map[*stepActor]struct{}{}
)

// waitFor registers the attempt as waiting (for tags' permits when tags
// are given) and arms its recheck timer.
func (a *stepActor) waitFor(every time.Duration, tags []string) {
	waitMu.Lock()
	waiting[waitKey{a.f.eng, a.f.ref, a.id}] = a
	for _, t := range tags {
		ws := permitWaiters[t]
		if ws == nil {
			ws = map[*stepActor]struct{}{}
			permitWaiters[t] = ws
		}
		ws[a] = struct{}{}
	}
	waitMu.Unlock()
	a.wait.tags = tags
	if a.wait.recheck != nil {
		a.wait.recheck.Stop()
	}
	a.wait.recheck = time.AfterFunc(every, func() { a.inbox.send(stepMsg{kind: msgRecheck}) })
}

// stopWaiting unregisters the attempt.
func (a *stepActor) stopWaiting() {
	if a.wait.recheck != nil {
		a.wait.recheck.Stop()
		a.wait.recheck = nil
	}
	waitMu.Lock()
	key := waitKey{a.f.eng, a.f.ref, a.id}
	if waiting[key] == a {
		delete(waiting, key)
	}
	for _, t := range a.wait.tags {
		if ws := permitWaiters[t]; ws != nil {
			delete(ws, a)
			if len(ws) == 0 {
				delete(permitWaiters, t)
			}
		}
	}
	waitMu.Unlock()
	a.wait.tags = nil
}

// wakePermitWaiters asks the attempts waiting for tags' permits to try
// again.
func wakePermitWaiters(tags []string) {
	waitMu.Lock()
	var wake []*stepActor
	for _, t := range tags {
		for a := range permitWaiters[t] {
			wake = append(wake, a)
		}
	}
	waitMu.Unlock()
	for _, a := range wake {
		a.inbox.send(stepMsg{kind: msgRecheck})
	}
}

// handleStepUpdate wakes the attempt a step_update message names. An
// attempt not in memory here needs nothing: its actor checks the database
// when it is rebuilt, and a waiting one rechecks on its timer.
func (e *Engine) handleStepUpdate(_ context.Context, m queue.Message) error {
	msg, ok := decodeMessage[run.StepUpdateMessage](e, m)
	if !ok {
		return nil
	}
	waitMu.Lock()
	a := waiting[waitKey{e, msg.Ref, msg.StepID}]
	waitMu.Unlock()
	if a != nil {
		a.inbox.send(stepMsg{kind: msgRecheck})
	}
	e.wakeChildWaiter(msg.Ref, msg.StepID)
	// A passivated run comes back, and looks at the database as it does
	// (passivate.go).
	if g := e.group(msg.Group); g != nil {
		if g.takePassive(msg.Ref) {
			return e.activate(g, msg.Ref, "step update")
		}
		if a == nil && g.listing.Load() && g.lookup(msg.Ref) == nil {
			// The group's passivated runs are being enumerated: the run
			// may be one of them; the message is offered again.
			return fmt.Errorf("step update for %s: group %d is being adopted", msg.Ref, g.id)
		}
	}
	return nil
}

// stepWait is an attempt's waiting: for its tags' permits, or registered
// as a waiter with a recheck timer (for permits or signals).
type stepWait struct {
	// permitted is set once the attempt holds its tags' permits.
	permitted bool
	// logged is set once the wait for permits is on the timeline.
	logged  bool
	recheck *time.Timer
	tags    []string
}

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
	if len(tags) == 0 || a.wait.permitted {
		return false, nil
	}
	if !a.wait.logged {
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
		a.wait.permitted = true
		return false, nil
	}
	if !a.wait.logged {
		a.wait.logged = true
		a.w.pending = append(a.w.pending, instance.LogEvent("INFO", fmt.Sprintf("waiting for a permit of tag %s", blocked)))
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
