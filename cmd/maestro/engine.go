package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/eventsvc"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/queue"
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
	events, err := eventsvc.Start(ctx, pool, eventsvc.Options{Logger: logger, Getenv: os.Getenv})
	if err != nil {
		return err
	}
	defer events.Stop()
	eng, err := startEngine(ctx, pool, logger, events.Wake)
	if err != nil {
		return err
	}
	<-ctx.Done()
	eng.Stop()
	return nil
}

// startEngine starts an engine node over pool, configured from the
// environment: MAESTRO_GROUP_COUNT (flow groups), MAESTRO_MAX_GROUPS (groups
// this node may own), MAESTRO_LEASE (group lease, e.g. 10s), MAESTRO_NODE_ID.
// eventsWritten is told of committed writes that recorded events.
func startEngine(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, eventsWritten func()) (*flow.Engine, error) {
	defs := definition.NewStore(pool)
	eng, err := flow.New(pool, flow.Config{
		Queue: queue.WorkerConfig{Handlers: map[queue.ID]queue.Handler{
			queue.DeleteWorkflow: func(ctx context.Context, m queue.Message) error {
				err := defs.ProcessDelete(ctx, m.Payload)
				if errors.Is(err, definition.ErrBadPayload) {
					logger.Error("drop malformed delete message", "message_id", m.ID, "error", err.Error())
					return nil
				}
				return err
			},
		}},
		NodeID:        os.Getenv("MAESTRO_NODE_ID"),
		GroupCount:    envInt("MAESTRO_GROUP_COUNT", 0),
		MaxGroups:     envInt("MAESTRO_MAX_GROUPS", 0),
		Lease:         envDuration("MAESTRO_LEASE", 0),
		Logger:        logger,
		EventsWritten: eventsWritten,
	})
	if err != nil {
		return nil, err
	}
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	logger.Info("engine started", "node_id", eng.NodeID())
	return eng, nil
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
