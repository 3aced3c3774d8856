package flowstore

import (
	"context"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
)

// The engine's calls into run-strategy admission (engine/run), over the
// store's pool and logger.

// AdmitIfQueued is run.AdmitIfQueued after one of the workflow's runs ended.
func (s *Store) AdmitIfQueued(ctx context.Context, workflowID string) {
	run.AdmitIfQueued(ctx, s.db, s.log, workflowID)
}

// WorkflowsWithQueuedRuns lists workflows that have queued runs.
func (s *Store) WorkflowsWithQueuedRuns(ctx context.Context) ([]string, error) {
	return run.WorkflowsWithQueuedRuns(ctx, s.db)
}

// StopCreated ends a run the engine has not started (run.StopCreated).
func (s *Store) StopCreated(ctx context.Context, ref run.Ref, status instance.WorkflowStatus, reason string) (bool, error) {
	return run.StopCreated(ctx, s.db, s.log, ref, status, reason)
}
