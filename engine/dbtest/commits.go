package dbtest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WriteXacts is the cluster's next transaction id: every transaction that
// writes (a durable commit, with fsync and synchronous_commit on) takes one,
// read-only ones take none, so the difference of two readings counts the
// commits that wrote in between, whoever made them. It is read from the
// snapshot, not from the statistics views, which backends flush lazily.
func WriteXacts(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	var n int64
	if err := db.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the next transaction id: %w", err)
	}
	return n, nil
}

// CommitFloor is the median time of the cheapest durable commit through db:
// n transactions that each insert one row into a table of their own and
// commit (one round trip, one WAL flush each). A transaction that writes no
// WAL before its commit record (one that only takes a transaction id) is
// committed without waiting for the flush, so it would measure the round
// trip alone. A benchmark reports its latencies as a ratio to this floor,
// measured in the same run, so that the ratio carries over between
// machines and database distances.
func CommitFloor(ctx context.Context, db *pgxpool.Pool, n int) (time.Duration, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire a connection for the commit floor: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS dbtest_commit_floor (n integer)`); err != nil {
		return 0, fmt.Errorf("create the commit floor's table: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS dbtest_commit_floor`) //nolint:errcheck // a throwaway test database
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, `INSERT INTO dbtest_commit_floor VALUES (1)`); err != nil {
			return 0, fmt.Errorf("measure the commit floor: %w", err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}
