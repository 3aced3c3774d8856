package backfill

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Origin is the backfill a run belongs to (its initiator carries the
// backfill id): one of the backfill's own runs or a downstream run.
type Origin struct {
	BackfillID string
	// Downstream is the backfill's downstream flag.
	Downstream bool
	Status     Status
}

// RunKey names a run.
type RunKey struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
}

// Querier reads in a transaction or a pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// sqlOrigins reads the backfill of each of the runs that has one.
const sqlOrigins = `
SELECT w.workflow_id, w.instance_id, w.run_id, b.backfill_id, b.downstream, b.status
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS k(wf, iid, rid)
JOIN workflow_instance w ON w.workflow_id = k.wf AND w.instance_id = k.iid AND w.run_id = k.rid
JOIN backfill b ON b.backfill_id = w.initiator->>'backfill_id'
WHERE w.initiator ? 'backfill_id'`

// Origins returns the backfill of each run of runs that belongs to one.
// The signal broker asks it about the runs that produced the signals of a
// trigger's satisfying set: a run those signals start belongs to the same
// backfill when it propagates downstream, and is not started when it does
// not (docs/backfill.md, "Lineage").
func Origins(ctx context.Context, q Querier, runs []RunKey) (map[RunKey]Origin, error) {
	out := map[RunKey]Origin{}
	if len(runs) == 0 {
		return out, nil
	}
	wfs, iids, rids := make([]string, len(runs)), make([]int64, len(runs)), make([]int64, len(runs))
	for i, r := range runs {
		wfs[i], iids[i], rids[i] = r.WorkflowID, r.InstanceID, r.RunID
	}
	rows, err := q.Query(ctx, sqlOrigins, wfs, iids, rids)
	if err != nil {
		return nil, fmt.Errorf("read the backfills of %d runs: %w", len(runs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var k RunKey
		var o Origin
		var status string
		if err := rows.Scan(&k.WorkflowID, &k.InstanceID, &k.RunID, &o.BackfillID, &o.Downstream, &status); err != nil {
			return nil, fmt.Errorf("read the backfills of %d runs: %w", len(runs), err)
		}
		o.Status = Status(status)
		out[k] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the backfills of %d runs: %w", len(runs), err)
	}
	return out, nil
}
