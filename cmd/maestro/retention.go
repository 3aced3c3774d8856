package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/retention"
)

// maestro dev's run archive: a directory beside its PostgreSQL, and the
// retention when MAESTRO_RETENTION is unset.
const (
	devArchiveDir = ".maestro/archive"
	devRetention  = "30d"
)

// startArchiver runs the retention archiver in this process when there is
// an archive store and a retention (MAESTRO_RETENTION, else
// defaultRetention; neither: no archiver). The returned stop is never nil.
func startArchiver(ctx context.Context, pool *pgxpool.Pool, store archive.Store, logger *slog.Logger, defaultRetention string) (func(), error) {
	getenv := func(name string) string {
		if v := os.Getenv(name); v != "" || name != retention.EnvRetention {
			return v
		}
		return defaultRetention
	}
	cfg, ok, err := retention.ConfigFromEnv(getenv)
	if err != nil || !ok || store == nil {
		return func() {}, err
	}
	cfg.Logger = logger
	a, err := retention.New(pool, store, cfg)
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		return nil, err
	}
	logger.Info("archiving ended runs", "retention", cfg.Retention.String())
	return a.Stop, nil
}
