package flow

import (
	"context"

	"github.com/maestro-aws/maestro/engine/run"
)

// admitSweep admits, for every workflow with queued runs, what its strategy
// allows now: it picks up properties changes (a new strategy or
// concurrency) and admissions a crash interrupted.
func (e *Engine) admitSweep(ctx context.Context) {
	ids, err := e.store.WorkflowsWithQueuedRuns(ctx)
	if err != nil {
		e.cfg.Logger.Warn("admission sweep", "error", err.Error())
		return
	}
	for _, id := range ids {
		if _, err := run.AdmitWorkflow(ctx, e.db, id, true); err != nil {
			e.cfg.Logger.Warn("admission sweep", "workflow_id", id, "error", err.Error())
		}
	}
}
