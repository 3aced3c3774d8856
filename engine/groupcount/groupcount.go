// Package groupcount keeps every Maestro process on one flow group count. A
// run's group is its identity modulo the count, so an API that computed
// groups with 32 while the engines claim 16 would strand half of the runs in
// groups no engine owns. The first process to start records its count in the
// database; every later process checks its own against it and refuses to
// start on a mismatch instead of silently running with a default.
package groupcount

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrMismatch reports a configured count that differs from the recorded one.
var ErrMismatch = errors.New("flow group count mismatch")

// Querier is what the package needs: a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Named SQL.
const (
	recordSQL = `
INSERT INTO flow_group_count (group_count, recorded_by) VALUES ($1, $2)
ON CONFLICT (singleton) DO NOTHING`
	agreeSQL = `
WITH ins AS (` + recordSQL + ` RETURNING group_count)
SELECT group_count FROM ins
UNION ALL
SELECT group_count FROM flow_group_count
LIMIT 1`
	recordedSQL = `SELECT group_count FROM flow_group_count`
)

// Recorded returns the recorded count, or 0 when none is recorded yet.
func Recorded(ctx context.Context, db Querier) (int, error) {
	var n int
	err := db.QueryRow(ctx, recordedSQL).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the recorded flow group count: %w", err)
	}
	return n, nil
}

// Agree records count as the deployment's, made by by (a process name), when
// none is recorded yet, and returns an error wrapping ErrMismatch when a
// different count is recorded.
func Agree(ctx context.Context, db Querier, count int, by string) error {
	if count < 1 || count > 4096 {
		return fmt.Errorf("flow group count %d: want 1 to 4096", count)
	}
	var recorded int
	for attempt := 0; ; attempt++ {
		err := db.QueryRow(ctx, agreeSQL, count, by).Scan(&recorded)
		// A process that records at the same moment makes this insert a
		// no-op while the statement's snapshot predates its row: the next
		// statement sees it.
		if errors.Is(err, pgx.ErrNoRows) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("record the flow group count: %w", err)
		}
		break
	}
	if recorded != count {
		return fmt.Errorf("%w: this process is configured with MAESTRO_GROUP_COUNT=%d but the database records %d; "+
			"configure every process (engine, API and the other functions) with the same count", ErrMismatch, count, recorded)
	}
	return nil
}

// Resolve returns the count a process runs with. A configured count (> 0)
// must agree with the recorded one (Agree). Without one, the process takes
// the recorded count, or records and takes def when none is recorded: an
// engine started without MAESTRO_GROUP_COUNT joins the deployment it finds.
func Resolve(ctx context.Context, db Querier, configured, def int, by string) (int, error) {
	if configured <= 0 {
		recorded, err := Recorded(ctx, db)
		if err != nil {
			return 0, err
		}
		if recorded > 0 {
			return recorded, nil
		}
		configured = def
	}
	if err := Agree(ctx, db, configured, by); err != nil {
		return 0, err
	}
	return configured, nil
}
