package incremental

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const sqlList = `
SELECT w.workflow_id, w.table_ref, w.trigger_uuid, w.snapshot_id, w.commit_time, w.latest_snapshot_id,
       w.latest_commit_time, w.attempted_snapshot_id, w.attempted_commit_time, w.inflight_instance_id,
       (SELECT count(*) FROM incremental_change c WHERE c.workflow_id = w.workflow_id AND c.table_ref = w.table_ref
          AND (c.commit_time, c.snapshot_id) > (w.commit_time, w.snapshot_id)),
       w.runs_started, w.modify_time
FROM incremental_watermark w
WHERE w.workflow_id = $1
ORDER BY w.table_ref`

// List returns the watermarks of a workflow, by table.
func List(ctx context.Context, q Querier, workflowID string) ([]Watermark, error) {
	rows, err := q.Query(ctx, sqlList, workflowID)
	if err != nil {
		return nil, fmt.Errorf("list the watermarks of %s: %w", workflowID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Watermark, error) {
		var w Watermark
		err := r.Scan(&w.WorkflowID, &w.Table, &w.TriggerUUID, &w.SnapshotID, &w.CommitTime, &w.LatestSnapshotID,
			&w.LatestCommitTime, &w.AttemptedSnapshotID, &w.AttemptedCommitTime, &w.InFlight, &w.Pending,
			&w.RunsStarted, &w.ModifyTime)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the watermarks of %s: %w", workflowID, err)
	}
	return out, nil
}

const runColumns = `workflow_id, instance_id, table_ref, from_snapshot_id, to_snapshot_id, from_commit_time,
    to_commit_time, snapshot_count, has_overwrite, has_delete, backfill_id, state, create_time, end_time`

const sqlRuns = `
SELECT ` + runColumns + ` FROM incremental_run
WHERE workflow_id = $1 AND ($2 = '' OR table_ref = $2)
ORDER BY instance_id DESC
LIMIT $3`

const sqlRun = `SELECT ` + runColumns + ` FROM incremental_run WHERE workflow_id = $1 AND instance_id = $2`

func scanRun(r pgx.CollectableRow) (RunRange, error) {
	var x RunRange
	err := r.Scan(&x.WorkflowID, &x.InstanceID, &x.Table, &x.FromSnapshotID, &x.ToSnapshotID, &x.FromCommitTime,
		&x.ToCommitTime, &x.SnapshotCount, &x.HasOverwrite, &x.HasDelete, &x.BackfillID, &x.State, &x.CreateTime, &x.EndTime)
	return x, err
}

// Runs returns the ranges of up to limit runs of a workflow (of one table
// when table is not empty), newest first.
func Runs(ctx context.Context, q Querier, workflowID, table string, limit int) ([]RunRange, error) {
	rows, err := q.Query(ctx, sqlRuns, workflowID, table, limit)
	if err != nil {
		return nil, fmt.Errorf("list the incremental runs of %s: %w", workflowID, err)
	}
	out, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list the incremental runs of %s: %w", workflowID, err)
	}
	return out, nil
}

// Run returns the range a run covers; ErrNotFound when it covers none.
func Run(ctx context.Context, q Querier, workflowID string, instanceID int64) (RunRange, error) {
	rows, err := q.Query(ctx, sqlRun, workflowID, instanceID)
	if err != nil {
		return RunRange{}, fmt.Errorf("read the range of run %d of %s: %w", instanceID, workflowID, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if err == pgx.ErrNoRows {
		return RunRange{}, ErrNotFound
	}
	if err != nil {
		return RunRange{}, fmt.Errorf("read the range of run %d of %s: %w", instanceID, workflowID, err)
	}
	return r, nil
}
