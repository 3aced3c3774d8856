package run

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Batch forms of PrepareStart and RoomNow for starts of many workflows at
// once (execution's batch start path): one statement per step for all the
// workflows instead of one per workflow, each with the same rule as its
// single form. The caller holds every workflow's lock; the workflows of one
// call are distinct (a second start of a workflow goes in a later call, so
// that it sees the first).

// Room is what admission reads of a workflow's runs (see roomSQL).
type Room struct {
	Active  int64
	Queued  bool
	Blocked bool
}

// roomBatchSQL is roomSQL for many workflows: $1 their ids, $2 whether each
// is STRICT_SEQUENTIAL.
const roomBatchSQL = `
SELECT c.id,
    (SELECT count(*) FROM workflow_instance
     WHERE workflow_id = c.id AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued),
    EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = c.id AND queued),
    c.strict AND EXISTS (
        SELECT 1 FROM workflow_instance f
        WHERE f.workflow_id = c.id AND f.status = 'FAILED' AND NOT f.unblocked
          AND NOT EXISTS (SELECT 1 FROM workflow_instance n
              WHERE n.workflow_id = f.workflow_id AND n.instance_id = f.instance_id AND n.run_id > f.run_id))
FROM unnest($1::text[], $2::boolean[]) AS c(id, strict)`

// Rooms reads the admission state of many workflows in one statement;
// strict[i] applies the STRICT_SEQUENTIAL block check to ids[i].
func Rooms(ctx context.Context, tx Tx, ids []string, strict []bool) (map[string]Room, error) {
	out := make(map[string]Room, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, roomBatchSQL, ids, strict)
	if err != nil {
		return nil, fmt.Errorf("read room of %d workflows: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var r Room
		if err := rows.Scan(&id, &r.Active, &r.Queued, &r.Blocked); err != nil {
			return nil, fmt.Errorf("read room of %d workflows: %w", len(ids), err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read room of %d workflows: %w", len(ids), err)
	}
	return out, nil
}

// HasRoom is RoomNow's rule over a workflow's Room.
func (s Strategy) HasRoom(r Room) bool {
	return s.Concurrency > 0 && !r.Queued && !r.Blocked && r.Active < s.Concurrency
}

// supersedeBatchSQL stops the queued runs of the LAST_ONLY workflows $1.
const supersedeBatchSQL = `
UPDATE workflow_instance SET status = 'STOPPED', queued = false, seq = seq + 1, end_time = now(), modify_time = now(),
    timeline = timeline || $2::jsonb
WHERE workflow_id = ANY($1::text[]) AND queued
RETURNING workflow_id, ` + stoppedColumns

// liveBatchSQL lists the admitted live runs of the workflows $1.
const liveBatchSQL = `
SELECT workflow_id, instance_id, run_id, group_id FROM workflow_instance
WHERE workflow_id = ANY($1::text[]) AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued`

// PrepareStarts is PrepareStart for one new run of each of many workflows,
// given their strategies: it returns the drop reason of each FIRST_ONLY
// workflow whose new run must not run, and under LAST_ONLY stops the queued
// runs and asks the engine to stop the admitted live ones.
func PrepareStarts(ctx context.Context, tx Tx, strategies map[string]Strategy) (map[string]string, error) {
	var firstOnly, lastOnly []string
	for id, s := range strategies {
		switch s.Rule {
		case workflow.RunStrategyFirstOnly:
			firstOnly = append(firstOnly, id)
		case workflow.RunStrategyLastOnly:
			lastOnly = append(lastOnly, id)
		}
	}
	drops := map[string]string{}
	if len(firstOnly) > 0 {
		rooms, err := Rooms(ctx, tx, firstOnly, make([]bool, len(firstOnly)))
		if err != nil {
			return nil, err
		}
		for id, r := range rooms {
			if r.Active > 0 || r.Queued {
				drops[id] = "dropped by the FIRST_ONLY run strategy: another run of the workflow is in progress"
			}
		}
	}
	if len(lastOnly) == 0 {
		return drops, nil
	}
	ev, _ := json.Marshal([]instance.TimelineEvent{instance.StatusEvent(string(instance.WorkflowStopped),
		"superseded by a newer run under the LAST_ONLY run strategy")})
	superseded, err := tx.Query(ctx, supersedeBatchSQL, lastOnly, ev)
	if err != nil {
		return nil, fmt.Errorf("supersede queued runs of %d workflows: %w", len(lastOnly), err)
	}
	// Their CREATED -> STOPPED events, as supersede records them.
	evs, err := stoppedEvents(superseded, "", instance.WorkflowCreated, instance.WorkflowStopped)
	if err != nil {
		return nil, fmt.Errorf("supersede queued runs of %d workflows: %w", len(lastOnly), err)
	}
	if err := event.Insert(ctx, tx, evs...); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, liveBatchSQL, lastOnly)
	if err != nil {
		return nil, fmt.Errorf("list live runs of %d workflows: %w", len(lastOnly), err)
	}
	live, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ActionMessage, error) {
		m := ActionMessage{Action: ActionStop, Reason: "superseded by a newer run under the LAST_ONLY run strategy"}
		err := r.Scan(&m.WorkflowID, &m.InstanceID, &m.RunID, &m.Group)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list live runs of %d workflows: %w", len(lastOnly), err)
	}
	groups := make([]int32, len(live))
	for i, m := range live {
		groups[i] = m.Group
	}
	if err := queue.EnqueueBatch(ctx, tx, queue.InstanceAction, groups, live); err != nil {
		return nil, err
	}
	return drops, nil
}
