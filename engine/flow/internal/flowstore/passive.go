package flowstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/run"
)

// Passivated runs (docs/engine.md, "Passivation"): workflow_instance's
// passive_wake_at is set while a live run is out of the engine's memory,
// with when it is due at the latest.

// Passivate records that a run leaves memory, due at wake at the latest.
// It is fenced by the run's generation: run.ErrFenced when the run's
// group has moved on (or the run is over).
func (s *Store) Passivate(ctx context.Context, ref run.Ref, group int32, gen int64, wake time.Time) error {
	tag, err := s.db.Exec(ctx, `UPDATE workflow_instance SET passive_wake_at = $6
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND group_id = $4 AND generation = $5
          AND status IN ('IN_PROGRESS', 'PAUSED')`, ref.WorkflowID, ref.InstanceID, ref.RunID, group, gen, wake)
	if err != nil {
		return fmt.Errorf("passivate %s: %w", ref, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("passivate %s: %w", ref, run.ErrFenced)
	}
	return nil
}

// activateSQL brings a passivated run back: it clears the run's marker,
// stamps it with the node's generation, as a takeover stamps the runs it
// adopts, and returns it. The key-share lock on the group row orders it with a
// takeover, as StartFlow's does.
const activateSQL = `
WITH owned AS (
    SELECT 1 FROM flow_group WHERE group_id = $4 AND generation = $5 AND owner = $6 FOR KEY SHARE)
UPDATE workflow_instance SET passive_wake_at = NULL, generation = $5
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND group_id = $4
  AND status IN ('IN_PROGRESS', 'PAUSED') AND EXISTS (SELECT 1 FROM owned)
RETURNING ` + instanceColumns

// Activate clears a run's passive marker under this node's generation and
// returns the run with the newest attempt of each of its steps (read in
// the same round trip), to be rebuilt as an adopted run is. ok is false
// when the run is over or unknown; run.ErrFenced when the group is no
// longer this node's at gen.
func (s *Store) Activate(ctx context.Context, ref run.Ref, group int32, gen int64, node string) (InstanceRow, []StepRow, bool, error) {
	row, steps, err := s.activate(ctx, ref, group, gen, node)
	if errors.Is(err, pgx.ErrNoRows) {
		held, err := s.GroupHeld(ctx, group, gen, node)
		if err != nil {
			return InstanceRow{}, nil, false, err
		}
		if !held {
			return InstanceRow{}, nil, false, fmt.Errorf("activate %s: %w", ref, run.ErrFenced)
		}
		return InstanceRow{}, nil, false, nil
	}
	if err != nil {
		return InstanceRow{}, nil, false, fmt.Errorf("activate %s: %w", ref, err)
	}
	return row, steps, true, nil
}

// activateAsyncSQL makes the activation's transaction commit without
// waiting for its WAL to be flushed (is_local: for this transaction alone,
// which a batch's statements share). Nothing is acted on because the
// marker is cleared: a crash that loses the clearing leaves the run
// passivated, due (its wake time is past), so its next owner brings it
// back as it would have; and every write the run makes once back is
// synchronous, which flushes the WAL up to it, the clearing included. The
// wake-up no longer waits for a disk flush (docs/performance.md).
const activateAsyncSQL = `SELECT set_config('synchronous_commit', 'off', true)`

// activate sends activateSQL and latestAttemptsSQL in one batch (one round
// trip, one transaction, committed asynchronously); pgx.ErrNoRows when the
// first found no run.
func (s *Store) activate(ctx context.Context, ref run.Ref, group int32, gen int64, node string) (InstanceRow, []StepRow, error) {
	b := &pgx.Batch{}
	b.Queue(activateAsyncSQL)
	b.Queue(activateSQL, ref.WorkflowID, ref.InstanceID, ref.RunID, group, gen, node)
	b.Queue(latestAttemptsSQL, ref.WorkflowID, ref.InstanceID, ref.RunID)
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return InstanceRow{}, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return InstanceRow{}, nil, err
	}
	row, err := pgx.CollectExactlyOneRow(rows, scanInstance)
	if err != nil {
		return InstanceRow{}, nil, err
	}
	if rows, err = br.Query(); err != nil {
		return InstanceRow{}, nil, err
	}
	steps, err := pgx.CollectRows(rows, scanStep)
	if err != nil {
		return InstanceRow{}, nil, err
	}
	return row, steps, br.Close()
}

// passivePage is how many passivated runs ListPassive reads per query.
const passivePage = 10_000

// ListPassive calls fn with every passivated live run of a group and when
// it is due, reading the key columns alone, a page at a time in key order
// (a takeover's enumeration: each query is bounded, and none holds a
// snapshot for the whole enumeration). It returns how many it read.
func (s *Store) ListPassive(ctx context.Context, group int32, fn func(ref run.Ref, wake time.Time)) (int, error) {
	n := 0
	// Ids are never empty: the zero key precedes every run.
	var after run.Ref
	for {
		rows, err := s.db.Query(ctx, `SELECT workflow_id, instance_id, run_id, passive_wake_at FROM workflow_instance
            WHERE group_id = $1 AND passive_wake_at IS NOT NULL AND status IN ('IN_PROGRESS', 'PAUSED')
              AND (workflow_id, instance_id, run_id) > ($2, $3, $4)
            ORDER BY workflow_id, instance_id, run_id LIMIT $5`,
			group, after.WorkflowID, after.InstanceID, after.RunID, passivePage)
		if err != nil {
			return n, fmt.Errorf("list passivated runs of group %d: %w", group, err)
		}
		page := 0
		var ref run.Ref
		var wake time.Time
		_, err = pgx.ForEachRow(rows, []any{&ref.WorkflowID, &ref.InstanceID, &ref.RunID, &wake}, func() error {
			fn(ref, wake)
			after = ref
			page++
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("list passivated runs of group %d: %w", group, err)
		}
		n += page
		if page < passivePage {
			return n, nil
		}
	}
}
