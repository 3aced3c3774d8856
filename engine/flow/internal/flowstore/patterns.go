package flowstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/maestro-aws/maestro/engine/run"
)

// The SQL of output params, tag permits and breakpoints as the engine sees
// them. The API's side (engine/api outputs.go, permits.go, breakpoints.go)
// writes the same tables.

// liveStepStatuses is the SQL list of terminal step statuses; an attempt
// in one of them holds no permit.
const terminalStepStatuses = `'SUCCEEDED', 'COMPLETED_WITH_ERROR', 'UNSATISFIED', 'SKIPPED', 'DISABLED',
    'FATALLY_FAILED', 'INTERNALLY_FAILED', 'STOPPED', 'TIMED_OUT', 'USER_FAILED', 'PLATFORM_FAILED', 'TIMEOUT_FAILED'`

// cleanHeldPermitsSQL drops held permits of attempts that ended or no
// longer exist: what a crash between an attempt's end and its release
// leaves behind.
const cleanHeldPermitsSQL = `
DELETE FROM tag_permit_held h
WHERE h.tag = ANY ($1::text[]) AND h.step_uuid <> $2::uuid
  AND NOT EXISTS (
    SELECT 1 FROM step_instance s
    WHERE s.workflow_id = h.workflow_id AND s.instance_id = h.instance_id AND s.run_id = h.run_id
      AND s.step_id = h.step_id AND s.attempt_id = h.attempt_id
      AND s.status NOT IN (` + terminalStepStatuses + `))`

// permitUsageSQL returns, per tag, its limit (the tag permit, else the
// limit written on the step's tag, else none) and the permits other
// attempts hold.
const permitUsageSQL = `
SELECT t.tag, COALESCE(p.max_allowed, t.inline), (SELECT count(*) FROM tag_permit_held h WHERE h.tag = t.tag AND h.step_uuid <> $3::uuid)
FROM unnest($1::text[], $2::bigint[]) AS t(tag, inline)
LEFT JOIN tag_permit p ON p.tag = t.tag`

// TagLimit is a tag a step carries with the limit written on it (0 when
// none).
type TagLimit struct {
	Tag    string
	Inline int64
}

// AcquirePermits takes one permit of every tag for the attempt, or none:
// ok is false and blocked names a tag whose permits are used up. Tags are
// locked in name order (transaction advisory locks), so concurrent
// acquirers on any node never deadlock and never both take the last
// permit. A repeated call for an attempt that holds its permits succeeds.
func (s *Store) AcquirePermits(ctx context.Context, ref run.Ref, stepID string, attempt int64, uuid string, tags []TagLimit) (ok bool, blocked string, err error) {
	tags = slices.Clone(tags)
	slices.SortFunc(tags, func(a, b TagLimit) int {
		switch {
		case a.Tag < b.Tag:
			return -1
		case a.Tag > b.Tag:
			return 1
		}
		return 0
	})
	names := make([]string, len(tags))
	inline := make([]*int64, len(tags))
	for i, t := range tags {
		names[i] = t.Tag
		if t.Inline > 0 {
			v := t.Inline
			inline[i] = &v
		}
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		for _, n := range names {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('maestro_tag_permit:' || $1, 0))`, n); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, cleanHeldPermitsSQL, names, uuid); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, permitUsageSQL, names, inline, uuid)
		if err != nil {
			return err
		}
		type usage struct {
			tag   string
			limit *int64
			held  int64
		}
		us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (usage, error) {
			var u usage
			err := r.Scan(&u.tag, &u.limit, &u.held)
			return u, err
		})
		if err != nil {
			return err
		}
		for _, u := range us {
			if u.limit != nil && u.held >= *u.limit {
				blocked = u.tag
				return nil
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO tag_permit_held (tag, step_uuid, workflow_id, instance_id, run_id, step_id, attempt_id)
            SELECT t, $2, $3, $4, $5, $6, $7 FROM unnest($1::text[]) AS t
            ON CONFLICT DO NOTHING`, names, uuid, ref.WorkflowID, ref.InstanceID, ref.RunID, stepID, attempt)
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("acquire tag permits of step %s attempt %d of %s: %w", stepID, attempt, ref, err)
	}
	return blocked == "", blocked, nil
}

// ReleasePermits gives back the permits an ended attempt held.
func (s *Store) ReleasePermits(ctx context.Context, uuid string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM tag_permit_held WHERE step_uuid = $1`, uuid); err != nil {
		return fmt.Errorf("release tag permits of step attempt %s: %w", uuid, err)
	}
	return nil
}

// Breakpoints belong to pushed workflows, but a step also runs inside the
// inline runs of foreach and while steps (iterations), whose workflow ids
// extend the pushed one with ":"-separated parts. A breakpoint therefore
// matches an attempt through the attempt's root run: the run itself, or for
// an iteration the run of the pushed workflow it belongs to, found by
// following the parent links up to the first run whose id has no ":". The
// breakpoint's workflow, version, instance and run are compared with the
// root run's, so "instance 5 of W" pauses the step in every iteration of
// instance 5; its attempt is compared with the step's own attempt number.
// A subworkflow child is the root of its own (pushed) workflow.
//
// rootRunSQL is that root run of the run $1/$2/$3, as the CTE "root".
const rootRunSQL = `
WITH RECURSIVE up AS (
    SELECT workflow_id, instance_id, run_id, workflow_version, parent
    FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
  UNION ALL
    SELECT i.workflow_id, i.instance_id, i.run_id, i.workflow_version, i.parent
    FROM up JOIN workflow_instance i ON i.workflow_id = up.parent->>'workflow_id'
      AND i.instance_id = (up.parent->>'instance_id')::bigint AND i.run_id = (up.parent->>'run_id')::bigint
    WHERE strpos(up.workflow_id, ':') > 0
), root AS (
    SELECT workflow_id, instance_id, run_id, workflow_version FROM up WHERE strpos(workflow_id, ':') = 0
)`

// breakpointMatchSQL holds when a breakpoint of the root run's workflow
// matches step $4 attempt $5.
const breakpointMatchSQL = `EXISTS (
    SELECT 1 FROM root r JOIN step_breakpoint b ON b.workflow_id = r.workflow_id
    WHERE b.step_id = $4
      AND (b.workflow_version IS NULL OR b.workflow_version = r.workflow_version)
      AND (b.instance_id IS NULL OR b.instance_id = r.instance_id)
      AND (b.run_id IS NULL OR b.run_id = r.run_id)
      AND (b.attempt_id IS NULL OR b.attempt_id = $5))`

// pauseAtBreakpointSQL records the attempt as paused when a breakpoint
// matches it and returns whether it is (still) paused. A repeat for an
// attempt already recorded returns its state.
const pauseAtBreakpointSQL = rootRunSQL + `
INSERT INTO step_paused (workflow_id, instance_id, run_id, step_id, attempt_id, group_id)
SELECT i.workflow_id, i.instance_id, i.run_id, $4, $5, i.group_id FROM workflow_instance i
WHERE i.workflow_id = $1 AND i.instance_id = $2 AND i.run_id = $3 AND ` + breakpointMatchSQL + `
ON CONFLICT (workflow_id, instance_id, run_id, step_id, attempt_id) DO UPDATE SET group_id = EXCLUDED.group_id
RETURNING NOT resumed`

// PauseAtBreakpoint reports whether a breakpoint pauses the attempt.
func (s *Store) PauseAtBreakpoint(ctx context.Context, ref run.Ref, stepID string, attempt int64) (bool, error) {
	var paused bool
	err := s.db.QueryRow(ctx, pauseAtBreakpointSQL, ref.WorkflowID, ref.InstanceID, ref.RunID, stepID, attempt).Scan(&paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check breakpoints of step %s attempt %d of %s: %w", stepID, attempt, ref, err)
	}
	return paused, nil
}

// stillPausedSQL: an attempt stays paused until it is resumed or no
// breakpoint matches it any more.
const stillPausedSQL = rootRunSQL + `
SELECT NOT p.resumed AND ` + breakpointMatchSQL + `
FROM step_paused p
WHERE p.workflow_id = $1 AND p.instance_id = $2 AND p.run_id = $3 AND p.step_id = $4 AND p.attempt_id = $5`

// StillPaused reports whether a paused attempt has not been resumed.
func (s *Store) StillPaused(ctx context.Context, ref run.Ref, stepID string, attempt int64) (bool, error) {
	var paused bool
	err := s.db.QueryRow(ctx, stillPausedSQL,
		ref.WorkflowID, ref.InstanceID, ref.RunID, stepID, attempt).Scan(&paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check pause of step %s attempt %d of %s: %w", stepID, attempt, ref, err)
	}
	return paused, nil
}
