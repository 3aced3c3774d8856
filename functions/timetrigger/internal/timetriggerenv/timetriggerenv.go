// Package timetriggerenv builds the time-trigger Lambda's scheduler at
// cold start (see scheduler.FromEnv for its optional settings).
package timetriggerenv

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/trigger/scheduler"
	"github.com/maestro-aws/maestro/functions/internal/coldstart"
)

// Scheduler builds the scheduler from the environment; each invocation
// that starts runs writes its TriggerLag to metricsOut (the function's
// stdout) as an EMF line.
func Scheduler(ctx context.Context, logger *slog.Logger, metricsOut io.Writer) (*scheduler.Scheduler, error) {
	pool, groups, err := coldstart.PoolAndGroups(ctx, "timetrigger")
	if err != nil {
		return nil, err
	}
	runs := execution.New(pool, definition.NewStore(pool), groups)
	return scheduler.FromEnv(pool, runs, scheduler.Config{Logger: logger,
		Metrics: metrics.New(metricsOut, metrics.ServiceTimeTrigger)}, os.Getenv)
}
