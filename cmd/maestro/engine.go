package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbconn"
)

// runEngine is the long-running engine process: it applies migrations (under
// an advisory lock, so many tasks may start at once), then runs the engine
// until SIGTERM.
func runEngine(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := newLogger(true)
	if err := engineMain(ctx, logger); err != nil {
		fmt.Fprintln(stderr, "maestro engine:", err)
		return 1
	}
	return 0
}

func engineMain(ctx context.Context, logger *slog.Logger) error {
	dsn, _, err := resolveDSN(ctx, logger, false)
	if err != nil {
		return err
	}
	if err := migrate(ctx, dsn, logger); err != nil {
		return err
	}
	pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 32, ApplicationName: "maestro-engine"})
	if err != nil {
		return err
	}
	defer pool.Close()
	eng, err := startEngine(ctx, pool, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	eng.Stop()
	return nil
}

type stopper interface{ Stop() }

type nopStopper struct{}

func (nopStopper) Stop() {}

func startEngine(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (stopper, error) {
	return nopStopper{}, nil
}
