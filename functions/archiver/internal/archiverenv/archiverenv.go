// Package archiverenv builds the archiver Lambda's handler at cold start:
// the database pool, the archive bucket (MAESTRO_ARCHIVE_BUCKET, required)
// and the retention (MAESTRO_RETENTION, required; engine/retention
// ConfigFromEnv for the optional settings).
package archiverenv

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/functions/internal/archiver"
	"github.com/maestro-aws/maestro/functions/internal/coldstart"
)

// Handler builds the handler from the environment; each invocation writes
// its metrics to metricsOut (the function's stdout).
func Handler(ctx context.Context, logger *slog.Logger, metricsOut io.Writer) (*archiver.Handler, error) {
	if os.Getenv(archive.EnvBucket) == "" {
		return nil, errors.New(archive.EnvBucket + " is required")
	}
	cfg, ok, err := retention.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New(retention.EnvRetention + " is required")
	}
	store, err := archive.FromEnv(ctx, os.Getenv, "")
	if err != nil {
		return nil, err
	}
	pool, err := coldstart.Pool(ctx, "maestro-archiver-lambda")
	if err != nil {
		return nil, err
	}
	cfg.Logger = logger
	a, err := retention.New(pool, store, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &archiver.Handler{Pass: a, Logger: logger, Metrics: metrics.New(metricsOut, metrics.ServiceArchiver)}, nil
}
