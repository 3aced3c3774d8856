package flowstore

import (
	"context"
	"sync"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// The engine's calls into run-strategy admission (engine/run), over the
// store's pool and logger.

// admissions gathers the checks for queued runs that runs ask for as they
// end. Each end asked for one (a statement, and a round trip a network
// away): a burst of 1,000 runs of one workflow ending made 1,000 checks
// of the same thing. A check asked for while one of the same workflow
// runs is folded into a single further check, which starts after the
// running one: it starts after every end that asked for it was written,
// so it sees them all.
type admissions struct {
	mu sync.Mutex
	// again holds the workflows being checked: true when another check
	// was asked for since the running one started.
	again map[string]bool
	// check is run.AdmitIfQueued over the store's pool (a test's stand-in
	// otherwise).
	check func(ctx context.Context, workflowID string)
}

// AdmitIfQueued is run.AdmitIfQueued after one of the workflow's runs
// ended (written). The caller that finds no check of the workflow running
// runs the checks, one after another while others ask for more; the
// others return at once. A check left undone when ctx ends is the sweep's
// (run.WorkflowsWithQueuedRuns), as a failed one is.
func (s *Store) AdmitIfQueued(ctx context.Context, workflowID string) {
	a := &s.admissions
	a.mu.Lock()
	if _, running := a.again[workflowID]; running {
		a.again[workflowID] = true
		a.mu.Unlock()
		return
	}
	if a.again == nil {
		a.again = map[string]bool{}
	}
	a.again[workflowID] = false
	check := a.check
	a.mu.Unlock()
	if check == nil {
		check = func(ctx context.Context, workflowID string) { run.AdmitIfQueued(ctx, s.db, s.log, workflowID) }
	}
	for {
		check(ctx, workflowID)
		a.mu.Lock()
		if !a.again[workflowID] || ctx.Err() != nil {
			delete(a.again, workflowID)
			a.mu.Unlock()
			return
		}
		a.again[workflowID] = false
		a.mu.Unlock()
	}
}

// WorkflowsWithQueuedRuns lists workflows that have queued runs.
func (s *Store) WorkflowsWithQueuedRuns(ctx context.Context) ([]string, error) {
	return run.WorkflowsWithQueuedRuns(ctx, s.db)
}

// StopCreated ends a run the engine has not started (run.StopCreated).
func (s *Store) StopCreated(ctx context.Context, ref run.Ref, status instance.WorkflowStatus, reason string) (bool, error) {
	return run.StopCreated(ctx, s.db, s.log, ref, status, reason)
}
