package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/localpg"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/migrations"
)

// devDatabase is the database maestro dev creates in its own cluster.
const devDatabase = "maestro"

// resolveDSN finds the database from the environment. With allowLocal and
// nothing configured it starts (or reuses) the throwaway cluster under
// .maestro/pg and returns a stop function for it.
func resolveDSN(ctx context.Context, logger *slog.Logger, allowLocal bool) (dsn string, stop func(), err error) {
	dsn, err = dbconn.FromEnv(ctx, os.Getenv, dbconn.SecretsManager)
	if err == nil {
		return dsn, func() {}, nil
	}
	if !errors.Is(err, dbconn.ErrNotConfigured) || !allowLocal {
		return "", nil, err
	}
	dir := os.Getenv("MAESTRO_DEV_PGDIR")
	if dir == "" {
		dir = ".maestro/pg"
	}
	logger.Info("DATABASE_URL is unset; starting a local PostgreSQL", "dir", dir)
	c, err := localpg.Open(ctx, localpg.Options{Dir: dir})
	if err != nil {
		return "", nil, err
	}
	if abs, _ := filepath.Abs(dir); c.Dir != abs {
		logger.Info("the postgres user cannot reach that directory; the local cluster lives here instead", "dir", c.Dir)
	}
	if err := c.Start(ctx); err != nil {
		return "", nil, err
	}
	stop = func() {
		if err := c.Stop(context.Background()); err != nil {
			logger.Error("stop local PostgreSQL", "error", err.Error())
		}
	}
	if err := createDatabase(ctx, c.URL("postgres"), devDatabase); err != nil {
		stop()
		return "", nil, err
	}
	return c.URL(devDatabase), stop, nil
}

func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to local PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// migrate applies pending migrations, logging what it applied.
func migrate(ctx context.Context, dsn string, logger *slog.Logger) error {
	cfg, err := dbconn.ParseConfig(dsn)
	if err != nil {
		return err
	}
	applied, err := migrations.ApplyConfig(ctx, cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("database schema is current", "applied", len(applied))
	return nil
}

func newLogger(json bool) *slog.Logger {
	if json || os.Getenv("LOG_FORMAT") == "json" {
		return tracing.NewLogger(slog.NewJSONHandler(os.Stderr, nil))
	}
	return tracing.NewLogger(slog.NewTextHandler(os.Stderr, nil))
}
