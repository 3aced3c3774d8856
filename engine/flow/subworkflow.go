package flow

import (
	"sync"

	"github.com/maestro-aws/maestro/engine/flow/internal/composite"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/sel"
)

// Composite steps (subworkflow, while, foreach: engine/flow/internal/composite)
// wait for their child runs without holding a worker. A child's end wakes
// its parent attempt at once: in memory when the parent waits in this
// process, else through a step_update message written with the end.

var (
	childWaitMu sync.Mutex
	// childWaiters holds the subworkflow attempts waiting for their child.
	childWaiters = map[waitKey]*stepActor{}
)

// waitForChild registers a subworkflow attempt as waiting for its child.
func (a *stepActor) waitForChild() {
	childWaitMu.Lock()
	childWaiters[waitKey{a.f.eng, a.f.ref, a.id}] = a
	childWaitMu.Unlock()
}

// stopWaitingForChild unregisters the attempt.
func (a *stepActor) stopWaitingForChild() {
	childWaitMu.Lock()
	key := waitKey{a.f.eng, a.f.ref, a.id}
	if childWaiters[key] == a {
		delete(childWaiters, key)
	}
	childWaitMu.Unlock()
}

// waitsHere reports whether the attempt of step stepID of run ref is
// waiting for its children in this process. It may stop waiting right
// after (its group lost, the engine stopping); the attempt then resumes
// elsewhere or later from the database, and its poll covers a wake-up
// that found nobody.
func (e *Engine) waitsHere(ref run.Ref, stepID string) bool {
	childWaitMu.Lock()
	defer childWaitMu.Unlock()
	return childWaiters[waitKey{e, ref, stepID}] != nil
}

// wakeChildWaiter makes the subworkflow attempt a step_update names look
// at its child again.
func (e *Engine) wakeChildWaiter(ref run.Ref, stepID string) {
	childWaitMu.Lock()
	a := childWaiters[waitKey{e, ref, stepID}]
	childWaitMu.Unlock()
	if a != nil {
		a.inbox.send(stepMsg{kind: msgWake})
	}
}

// subworkflowFuncs are the SEL functions that read child runs
// (subworkflow children, foreach iterations), for an attempt whose params
// read upstream steps; nil otherwise.
func (a *stepActor) subworkflowFuncs() map[string]sel.Func {
	if a.in.upstream == nil {
		return nil
	}
	return composite.Funcs(a.f.eng.db, a.f.ref, a.in.upstream)
}
