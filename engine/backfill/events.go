package backfill

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
)

// sqlStateCounts counts a backfill's partitions by state.
const sqlStateCounts = `SELECT state, count(*) FROM backfill_partition WHERE backfill_id = $1 GROUP BY state`

// writeEvent records a backfill's status change from old (empty when it
// was created) in the event outbox, in tx: it is published with the
// others (SNS, the live feed) once tx commits.
func writeEvent(ctx context.Context, tx pgx.Tx, b *Backfill, old Status, author string) error {
	rows, err := tx.Query(ctx, sqlStateCounts, b.ID)
	if err != nil {
		return fmt.Errorf("count partitions of backfill %s: %w", b.ID, err)
	}
	counts := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			rows.Close()
			return fmt.Errorf("count partitions of backfill %s: %w", b.ID, err)
		}
		counts[state] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count partitions of backfill %s: %w", b.ID, err)
	}
	rec := event.NewRecord(&event.BackfillStatusChangeEvent{BackfillID: b.ID, WorkflowID: b.WorkflowID,
		WorkflowVersion: b.Version, OldStatus: string(old), NewStatus: string(b.Status), Author: author, Counts: counts,
		EventTime: time.Now().UnixMilli()})
	if err := event.Insert(ctx, tx, rec); err != nil {
		return fmt.Errorf("record the status change of backfill %s: %w", b.ID, err)
	}
	return nil
}
