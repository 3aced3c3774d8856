// Package coldstart is what every Lambda that writes runs reads from its
// environment at cold start: the database pool and the flow group count. A
// missing or wrong setting fails the cold start, not the first request.
// Each Lambda builds the rest itself (functions/<name>/internal), so that
// it links only what its job needs.
package coldstart

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/groupcount"
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

// PoolAndGroups opens the pool and reads the group count of a function;
// the pool is closed again if the count is refused.
func PoolAndGroups(ctx context.Context, function string) (*pgxpool.Pool, int, error) {
	pool, err := Pool(ctx, "maestro-"+function+"-lambda")
	if err != nil {
		return nil, 0, err
	}
	groups, err := GroupCount(ctx, pool, function)
	if err != nil {
		pool.Close()
		return nil, 0, err
	}
	return pool, groups, nil
}
