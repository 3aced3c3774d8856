package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StuckRun is a live run (CREATED, IN_PROGRESS or PAUSED) that nothing
// seems to move: its flow group has no live owner, or neither it nor any of
// its step attempts has changed for longer than asked.
type StuckRun struct {
	WorkflowID string    `json:"workflow_id"`
	InstanceID int64     `json:"workflow_instance_id"`
	RunID      int64     `json:"workflow_run_id"`
	Status     string    `json:"status"`
	Group      int32     `json:"group_id"`
	Owner      string    `json:"owner,omitempty"`
	LastChange time.Time `json:"last_change"`
	// Reason is "group unowned" (no live engine holds the run's flow
	// group) or "no progress" (nothing changed for the threshold).
	Reason string `json:"reason"`
	// Waiting are the statuses of the run's live step attempts (e.g.
	// WAITING_FOR_SIGNALS, PAUSED, RUNNING): a run waiting on purpose shows
	// here.
	Waiting []string `json:"waiting_steps"`
}

// Reasons of StuckRun.
const (
	ReasonUnowned    = "group unowned"
	ReasonNoProgress = "no progress"
)

// stuckRunsSQL: the live runs (the live index), the latest change of each
// (the run or any of its attempts), their group's owner while its lease
// holds, and the statuses of their live attempts.
const stuckRunsSQL = `
WITH live AS (
    SELECT i.workflow_id, i.instance_id, i.run_id, i.status, i.group_id, i.modify_time
    FROM workflow_instance i
    WHERE i.status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')),
changed AS (
    SELECT l.*, greatest(l.modify_time, (SELECT max(s.modify_time) FROM step_instance s
        WHERE s.workflow_id = l.workflow_id AND s.instance_id = l.instance_id AND s.run_id = l.run_id)) AS last_change,
        (SELECT g.owner FROM flow_group g WHERE g.group_id = l.group_id AND g.owner IS NOT NULL AND g.expires_at > now()) AS owner
    FROM live l)
SELECT c.workflow_id, c.instance_id, c.run_id, c.status, c.group_id, coalesce(c.owner, ''), c.last_change,
    CASE WHEN c.owner IS NULL THEN 'group unowned' ELSE 'no progress' END,
    coalesce((SELECT array_agg(DISTINCT s.status ORDER BY s.status) FROM step_instance s
        WHERE s.workflow_id = c.workflow_id AND s.instance_id = c.instance_id AND s.run_id = c.run_id
          AND s.status IN ('CREATED', 'INITIALIZED', 'PAUSED', 'WAITING_FOR_SIGNALS', 'EVALUATING_PARAMS',
                           'WAITING_FOR_PERMITS', 'STARTING', 'RUNNING', 'FINISHING')), '{}')
FROM changed c
WHERE c.last_change < now() - $1::interval
   OR (c.owner IS NULL AND c.last_change < now() - $2::interval)
ORDER BY c.last_change, c.workflow_id, c.instance_id, c.run_id
LIMIT $3`

// StuckRuns lists up to limit live runs unchanged for idle or longer, and
// those whose flow group no live engine holds once unchanged for a lease's
// grace (unowned, 30 s by default: a hand-over takes about a heartbeat),
// oldest change first.
func (s *Store) StuckRuns(ctx context.Context, idle, unowned time.Duration, limit int) ([]StuckRun, error) {
	rows, err := s.db.Query(ctx, stuckRunsSQL, idle, unowned, limit)
	if err != nil {
		return nil, fmt.Errorf("list stuck runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StuckRun, error) {
		var s StuckRun
		err := r.Scan(&s.WorkflowID, &s.InstanceID, &s.RunID, &s.Status, &s.Group, &s.Owner, &s.LastChange, &s.Reason, &s.Waiting)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list stuck runs: %w", err)
	}
	return out, nil
}
