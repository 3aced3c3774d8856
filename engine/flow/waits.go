package flow

import (
	"context"
	"sync"
	"time"

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
	a.waitTags = tags
	if a.recheck != nil {
		a.recheck.Stop()
	}
	a.recheck = time.AfterFunc(every, func() { a.inbox.send(stepMsg{kind: msgRecheck}) })
}

// stopWaiting unregisters the attempt.
func (a *stepActor) stopWaiting() {
	if a.recheck != nil {
		a.recheck.Stop()
		a.recheck = nil
	}
	waitMu.Lock()
	key := waitKey{a.f.eng, a.f.ref, a.id}
	if waiting[key] == a {
		delete(waiting, key)
	}
	for _, t := range a.waitTags {
		if ws := permitWaiters[t]; ws != nil {
			delete(ws, a)
			if len(ws) == 0 {
				delete(permitWaiters, t)
			}
		}
	}
	waitMu.Unlock()
	a.waitTags = nil
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
	return nil
}
