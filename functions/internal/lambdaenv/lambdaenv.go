// Package lambdaenv builds what every Lambda needs at cold start from its
// environment: AWS config, the database pool and the services over it. A
// missing or wrong setting fails the cold start, not the first request.
package lambdaenv

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/execution"
)

// Pool opens the database pool described by the environment (see dbconn).
// A Lambda handles one request at a time, so a small pool suffices.
func Pool(ctx context.Context, name string) (*pgxpool.Pool, error) {
	dsn, err := dbconn.FromEnv(ctx, os.Getenv, dbconn.SecretsManager)
	if err != nil {
		return nil, err
	}
	return dbconn.Open(ctx, dsn, dbconn.PoolOptions{MaxConns: 4, ApplicationName: name})
}

// APIHandler builds the REST API handler for the API Lambda.
func APIHandler(ctx context.Context, logger *slog.Logger) (*api.Server, error) {
	pool, err := Pool(ctx, "maestro-api-lambda")
	if err != nil {
		return nil, err
	}
	defs := definition.NewStore(pool)
	groups, _ := strconv.Atoi(os.Getenv("MAESTRO_GROUP_COUNT"))
	return api.New(api.Config{
		DB: pool, Logger: logger, Definitions: defs, Runs: execution.New(pool, defs, groups),
		Admins: strings.Fields(strings.ReplaceAll(os.Getenv("MAESTRO_ADMINS"), ",", " ")),
		Events: event.NewFeed(pool, nil, os.Getenv("MAESTRO_CLUSTER_NAME")),
	})
}
