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

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/backfill"
	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/eventsvc"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/groupcount"
	"github.com/maestro-aws/maestro/engine/health"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/queue"
	enginerun "github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/stepruntime/registry"
	"github.com/maestro-aws/maestro/engine/tracing"
	backfilldriver "github.com/maestro-aws/maestro/engine/trigger/backfill"
	"github.com/maestro-aws/maestro/engine/trigger/signalbroker"
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
	tp, err := tracing.Setup(ctx, tracing.ServiceEngine, tracing.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = tracing.Shutdown(context.WithoutCancel(ctx), tp) }()
	dsn, _, err := resolveDSN(ctx, logger, false)
	if err != nil {
		return err
	}
	if err := migrate(ctx, dsn, logger); err != nil {
		return err
	}
	pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 32, ApplicationName: "maestro-engine",
		Refresh: dbconn.Refresher(os.Getenv, dbconn.SecretsManager)})
	if err != nil {
		return err
	}
	defer pool.Close()
	// CloudWatch embedded-metric-format lines on stdout, once a period
	// (MAESTRO_METRICS_INTERVAL, default 1m; engine/metrics).
	rec := metrics.NewRecorder(metrics.New(os.Stdout, metrics.ServiceEngine))
	events, err := eventsvc.Start(ctx, pool, eventsvc.Options{Logger: logger, Getenv: os.Getenv})
	if err != nil {
		return err
	}
	defer events.Stop()
	signals, err := signalbroker.SweeperFromEnv(os.Getenv, logger)
	if err != nil {
		return err
	}
	eng, err := startEngine(ctx, pool, logger, rec, events.Wake, signals.Kick)
	if err != nil {
		return err
	}
	defer eng.Stop()
	// A step's output signals: matched after their commit, and by a sweep
	// after a crash (docs/signals.md).
	defs := definition.NewStore(pool)
	runs := execution.New(pool, defs, eng.GroupCount())
	signals.Broker = signalbroker.New(pool, runs, logger)
	if err := withIceberg(ctx, signals.Broker, logger); err != nil {
		return err
	}
	if err := signals.Start(ctx); err != nil {
		return err
	}
	defer signals.Stop()
	// Backfills: every engine drives them (docs/backfill.md).
	backfills, err := startBackfills(ctx, pool, defs, runs, logger)
	if err != nil {
		return err
	}
	defer backfills.Stop()
	if err := rec.Start(ctx, envDuration("MAESTRO_METRICS_INTERVAL", time.Minute), eng.SampleMetrics); err != nil {
		return err
	}
	defer rec.Stop()
	if addr := os.Getenv("MAESTRO_HEALTH_ADDR"); addr != "" {
		hs, err := health.New(health.Config{Addr: addr, Logger: logger, Check: func(ctx context.Context) health.Report {
			return eng.Health(ctx, 2*time.Second)
		}})
		if err != nil {
			return err
		}
		if err := hs.Start(ctx); err != nil {
			return err
		}
		defer hs.Stop()
		logger.Info("health endpoint listening", "addr", hs.Addr().String(), "path", health.Path)
	}
	<-ctx.Done()
	return nil
}

// runHealth asks the engine's health endpoint (MAESTRO_HEALTH_ADDR, or
// --addr) and exits 0 when it answers healthy: ready by default, alive with
// --live (the ECS container health check, which must not depend on the
// database; engine/health).
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", os.Getenv("MAESTRO_HEALTH_ADDR"), "the engine's health endpoint address")
	timeout := fs.Duration("timeout", 4*time.Second, "how long to wait for an answer")
	live := fs.Bool("live", false, "ask only whether the process answers (liveness), not whether it is ready")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" {
		fmt.Fprintln(stderr, "maestro health: set MAESTRO_HEALTH_ADDR or --addr")
		return 2
	}
	probe, word := health.Probe, "healthy"
	if *live {
		probe, word = health.ProbeLive, "alive"
	}
	if err := probe(ctx, *addr, *timeout); err != nil {
		fmt.Fprintln(stderr, "maestro health:", err)
		return 1
	}
	fmt.Fprintln(stdout, word)
	return 0
}

// startEngine starts an engine node over pool, configured from the
// environment: MAESTRO_GROUP_COUNT (flow groups; it must match the count
// recorded in the database, and without it the node takes that one),
// MAESTRO_MAX_GROUPS (groups this node may own), MAESTRO_LEASE (group lease,
// e.g. 10s), MAESTRO_NODE_ID, MAESTRO_WORKERS (concurrent step runtime
// calls), and the step runtimes' settings (engine/stepruntime/registry:
// AWS_REGION, MAESTRO_AWS_ENDPOINT, MAESTRO_HTTP_ALLOWED_HOSTS,
// MAESTRO_ECS_*, MAESTRO_AWS_JOB_EVENTS_QUEUE), MAESTRO_MEMORY_BUDGET (engine/flow/memory.go),
// MAESTRO_PASSIVATE_AFTER (engine/flow/passivate.go). rec, when
// set, receives the engine's metrics; eventsWritten is told of committed
// writes that recorded events, signalsAnnounced of those that stored a
// step's output signals.
func startEngine(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, rec *metrics.Recorder, eventsWritten,
	signalsAnnounced func()) (*flow.Engine, error) {
	groups, err := groupcount.Resolve(ctx, pool, envInt("MAESTRO_GROUP_COUNT", 0), enginerun.DefaultGroupCount, "engine "+hostname())
	if err != nil {
		return nil, err
	}
	defs := definition.NewStore(pool)
	stepCfg := registry.FromEnv(os.Getenv)
	runtimes, err := registry.New(ctx, stepCfg, pool, logger)
	if err != nil {
		return nil, err
	}
	// The AWS job steps' state-change events (MAESTRO_AWS_JOB_EVENTS_QUEUE)
	// wake their attempts; the consumer ends with ctx.
	if _, err := registry.StartAWSJobEvents(ctx, stepCfg, pool, logger); err != nil {
		return nil, err
	}
	eng, err := flow.New(pool, flow.Config{
		Runtimes: runtimes,
		Workers:  envInt("MAESTRO_WORKERS", 0),
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
		NodeID:       os.Getenv("MAESTRO_NODE_ID"),
		GroupCount:   groups,
		Metrics:      rec,
		MaxGroups:    envInt("MAESTRO_MAX_GROUPS", 0),
		Lease:        envDuration("MAESTRO_LEASE", 0),
		MemoryBudget: memoryBudget(logger),
		// How long a waiting run stays in memory before it is passivated
		// (engine/flow/passivate.go; negative: never).
		PassivateAfter: envDuration("MAESTRO_PASSIVATE_AFTER", 0),
		Logger:         logger,
		EventsWritten:  eventsWritten,
		// The same administrators as the API: a step of an administrator's
		// workflow may start any workflow.
		Admins: authz.ParsePrincipals(os.Getenv("MAESTRO_ADMINS")),

		SignalsAnnounced: signalsAnnounced,
	})
	if err != nil {
		return nil, err
	}
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	logger.Info("engine started", "node_id", eng.NodeID(), "group_count", groups)
	return eng, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
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

// startBackfills starts the backfill driver of an engine process
// (MAESTRO_BACKFILL_INTERVAL sets its pace).
func startBackfills(ctx context.Context, pool *pgxpool.Pool, defs *definition.Store, runs *execution.Service,
	logger *slog.Logger) (*backfilldriver.Driver, error) {
	d, err := backfilldriver.FromEnv(os.Getenv, backfill.NewStore(pool, defs, runs), logger)
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	return d, nil
}
