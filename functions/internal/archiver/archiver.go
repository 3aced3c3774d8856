// Package archiver is the archiver Lambda's handler: EventBridge Scheduler
// invokes it on a schedule, and each invocation runs one retention pass
// (engine/retention) until no archivable run is left or the invocation's
// deadline nears, then writes its figures as one EMF line.
package archiver

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/retention"
)

// Pass is one retention pass (retention.Archiver.Run).
type Pass interface {
	Run(ctx context.Context) (retention.Result, error)
}

// Handler runs a pass per invocation.
type Handler struct {
	Pass    Pass
	Metrics *metrics.Emitter
	Logger  *slog.Logger
}

// Handle runs one pass. The scheduler's payload is ignored. A failed pass
// is counted (ArchiveFailures) and returned, so the invocation fails and
// the schedule's retry policy and the alarm see it; what its batches did
// before the failure stands.
func (h *Handler) Handle(ctx context.Context, _ json.RawMessage) (retention.Result, error) {
	res, err := h.Pass.Run(ctx)
	failures := 0.0
	if err != nil {
		failures = 1
		h.Logger.Error("archive pass failed", "error", err.Error(), "runs", res.Runs)
	} else {
		h.Logger.Info("archive pass", "runs", res.Runs, "steps", res.Steps, "objects", res.Objects, "bytes", res.Bytes,
			"skipped", res.Skipped, "more", res.More, "lag_seconds", res.Lag.Seconds())
	}
	values := []metrics.Value{metrics.Count(metrics.RunsArchived, float64(res.Runs)),
		metrics.Count(metrics.StepsArchived, float64(res.Steps)), metrics.Count(metrics.ArchiveFailures, failures)}
	if err == nil {
		values = append(values, metrics.Seconds(metrics.ArchiveLag, res.Lag))
	}
	if merr := h.Metrics.Emit(values...); merr != nil {
		h.Logger.Warn("write archive metrics", "error", merr.Error())
	}
	return res, err
}
