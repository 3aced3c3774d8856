package dbconn_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbconn"
	"github.com/maestro-aws/maestro/engine/dbtest"
)

// A pool with Refresh opens new connections with the credentials the
// refresh returns (a rotated secret), not the ones it started with.
func TestOpenRefreshesCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := dbtest.URL(t)
	admin := dbtest.Pool(t)
	if _, err := admin.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'maestro_rotated') THEN CREATE ROLE maestro_rotated LOGIN; END IF;
	END $$`); err != nil {
		t.Fatal(err)
	}
	rotated, _ := url.Parse(dsn)
	rotated.User = url.User("maestro_rotated")
	var calls atomic.Int32
	pool, err := dbconn.Open(ctx, dsn, dbconn.PoolOptions{
		MaxConns:     1,
		RefreshEvery: time.Nanosecond,
		Refresh: func(context.Context) (string, error) {
			calls.Add(1)
			return rotated.String(), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Open's own ping used the starting credentials; drop that connection
	// so the next one is new.
	pool.Reset()
	var user string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if user != "maestro_rotated" || calls.Load() == 0 {
		t.Errorf("new connection as %q after %d refreshes, want maestro_rotated", user, calls.Load())
	}
}
