// Package groupcount keeps every Maestro process on one flow group count. A
// run's group is its identity modulo the count, so an API that computed
// groups with 32 while the engines claim 16 would strand half of the runs in
// groups no engine owns. The first process to start records its count in the
// database; later processes follow the recorded count. The count can be
// raised online (Raise: engines pick it up at their next heartbeat round and
// share the new groups; runs keep the group they started in) but never
// lowered: runs live in the groups above a lower count, and no engine would
// claim them.
package groupcount

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrMismatch reports a configured count above the recorded one: raising
// the count is an explicit step (Raise, `maestro groups raise`), so that a
// mistyped setting cannot raise it for good.
var ErrMismatch = errors.New("flow group count mismatch")

// ErrLowering reports a request to lower the count, which is refused.
var ErrLowering = errors.New("the flow group count cannot be lowered")

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
// none is recorded yet, and returns the count the process must use: the
// recorded one. A configured count below the recorded one follows the
// database (the count was raised since the process was configured); one
// above it is an error wrapping ErrMismatch.
func Agree(ctx context.Context, db Querier, count int, by string) (int, error) {
	if err := checkRange(count); err != nil {
		return 0, err
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
			return 0, fmt.Errorf("record the flow group count: %w", err)
		}
		break
	}
	if count > recorded {
		return 0, fmt.Errorf("%w: this process is configured with MAESTRO_GROUP_COUNT=%d but the database records %d; "+
			"raise the recorded count first (maestro groups raise --to %d), or configure %d", ErrMismatch, count, recorded, count, recorded)
	}
	return recorded, nil
}

// Resolve returns the count a process runs with. A configured count (> 0)
// goes through Agree. Without one, the process takes the recorded count, or
// records and takes def when none is recorded: an engine started without
// MAESTRO_GROUP_COUNT joins the deployment it finds.
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
	return Agree(ctx, db, configured, by)
}

// raiseSQL raises the recorded count, or records it when there is none, and
// returns the count before (0: none) and after.
const raiseSQL = `
WITH before AS (SELECT group_count FROM flow_group_count FOR UPDATE),
raised AS (
    INSERT INTO flow_group_count (group_count, recorded_by) VALUES ($1, $2)
    ON CONFLICT (singleton) DO UPDATE SET group_count = excluded.group_count, recorded_by = excluded.recorded_by,
        recorded_at = now()
    WHERE flow_group_count.group_count < excluded.group_count
    RETURNING group_count)
SELECT COALESCE((SELECT group_count FROM before), 0), COALESCE((SELECT group_count FROM raised), (SELECT group_count FROM before))`

// Raise raises the recorded count to count, online: the engines create and
// share the new groups at their next heartbeat round, and new runs spread
// over them (processes that start runs follow the recorded count when they
// start). It returns the count before. Asking for the current count changes
// nothing; asking for a lower one is an error wrapping ErrLowering.
func Raise(ctx context.Context, db Querier, count int, by string) (int, error) {
	if err := checkRange(count); err != nil {
		return 0, err
	}
	var before, after int
	if err := db.QueryRow(ctx, raiseSQL, count, by).Scan(&before, &after); err != nil {
		return 0, fmt.Errorf("raise the flow group count: %w", err)
	}
	if after != count {
		return before, fmt.Errorf("%w: the database records %d, more than %d; runs live in the groups above %d",
			ErrLowering, before, count, count)
	}
	return before, nil
}

func checkRange(count int) error {
	if count < 1 || count > 4096 {
		return fmt.Errorf("flow group count %d: want 1 to 4096", count)
	}
	return nil
}
