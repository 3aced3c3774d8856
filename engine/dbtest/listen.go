package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen holds a connection of pool listening on channel for the rest of
// the test: a test reads what a statement notified with
// conn.Conn().WaitForNotification.
func Listen(t testing.TB, pool *pgxpool.Pool, channel string) *pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	return conn
}
