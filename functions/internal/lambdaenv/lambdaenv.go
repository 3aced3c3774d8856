// Package lambdaenv builds what every Lambda needs at cold start from its
// environment: AWS config, the database pool and the services over it. A
// missing or wrong setting fails the cold start, not the first request.
package lambdaenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/groupcount"
	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/scheduler"
	"github.com/maestro-aws/maestro/engine/signalbroker"
	"github.com/maestro-aws/maestro/engine/signalmsg"
	"github.com/maestro-aws/maestro/functions/internal/signals"
)

// Pool opens the database pool described by the environment (see dbconn;
// DB_PROXY_ENDPOINT puts RDS Proxy in front). A Lambda handles one request
// at a time, so a small pool suffices.
func Pool(ctx context.Context, name string) (*pgxpool.Pool, error) {
	dsn, err := dbconn.FromEnv(ctx, os.Getenv, dbconn.SecretsManager)
	if err != nil {
		return nil, err
	}
	return dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 4, ApplicationName: name,
		Refresh: dbconn.Refresher(os.Getenv, dbconn.SecretsManager)})
}

// GroupCount reads MAESTRO_GROUP_COUNT, required of every function that
// starts runs, and checks it against the count recorded in the database
// (engine/groupcount): a missing or malformed count, or one above the
// recorded count, fails the cold start rather than strand runs in groups no
// engine claims. A count below the recorded one (raised since the function
// was deployed) gives way to it.
func GroupCount(ctx context.Context, pool *pgxpool.Pool, function string) (int, error) {
	raw := os.Getenv("MAESTRO_GROUP_COUNT")
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("MAESTRO_GROUP_COUNT %q: want the deployment's flow group count, a whole number from 1", raw)
	}
	return groupcount.Agree(ctx, pool, n, function+" function")
}

// APIHandler builds the REST API handler for the API Lambda.
func APIHandler(ctx context.Context, logger *slog.Logger) (*api.Server, error) {
	pool, err := Pool(ctx, "maestro-api-lambda")
	if err != nil {
		return nil, err
	}
	groups, err := GroupCount(ctx, pool, "api")
	if err != nil {
		pool.Close()
		return nil, err
	}
	defs := definition.NewStore(pool)
	return api.New(api.Config{
		DB: pool, Logger: logger, Definitions: defs, Runs: execution.New(pool, defs, groups),
		Admins: authz.ParsePrincipals(os.Getenv("MAESTRO_ADMINS")),
		Events: event.NewFeed(pool, nil, os.Getenv("MAESTRO_CLUSTER_NAME")),
	})
}

// SignalsHandler builds the signals Lambda's handler: the broker over the
// database, MAESTRO_S3_SIGNAL_RULES (a malformed value fails the cold
// start) and metrics on stdout.
func SignalsHandler(ctx context.Context, logger *slog.Logger) (*signals.Handler, error) {
	rules, err := signalmsg.ParseRules(os.Getenv("MAESTRO_S3_SIGNAL_RULES"))
	if err != nil {
		return nil, err
	}
	pool, err := Pool(ctx, "maestro-signals-lambda")
	if err != nil {
		return nil, err
	}
	groups, err := GroupCount(ctx, pool, "signals")
	if err != nil {
		pool.Close()
		return nil, err
	}
	runs := execution.New(pool, definition.NewStore(pool), groups)
	return signals.New(signals.Config{Broker: signalbroker.New(pool, runs, logger), Rules: rules,
		Metrics: metrics.New(os.Stdout, metrics.ServiceSignals), Logger: logger})
}

// TimeTriggerScheduler builds the time-trigger Lambda's scheduler (see
// scheduler.FromEnv for its optional settings); each invocation that starts
// runs writes its TriggerLag to metricsOut (the function's stdout) as an
// EMF line.
func TimeTriggerScheduler(ctx context.Context, logger *slog.Logger, metricsOut io.Writer) (*scheduler.Scheduler, error) {
	pool, err := Pool(ctx, "maestro-timetrigger-lambda")
	if err != nil {
		return nil, err
	}
	groups, err := GroupCount(ctx, pool, "timetrigger")
	if err != nil {
		return nil, err
	}
	runs := execution.New(pool, definition.NewStore(pool), groups)
	return scheduler.FromEnv(pool, runs, scheduler.Config{Logger: logger,
		Metrics: metrics.New(metricsOut, metrics.ServiceTimeTrigger)}, os.Getenv)
}
