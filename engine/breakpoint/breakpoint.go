// Package breakpoint stores step breakpoints and the attempts they paused.
// A breakpoint pauses the attempts of a step that match it when they reach
// INITIALIZED (the engine checks and records the pause, engine/flow). An
// unset version, instance, run or attempt matches all (Maestro's
// breakpoints set only the workflow and the step; the rest is this API's
// own). The step may be inside a foreach or while step: its iterations'
// attempts match by the run of the workflow they belong to
// (docs/params.md). This store is the REST API's side: set, list, delete
// (resuming what they paused) and resume one paused attempt, each resume
// waking the engine node that owns the run through the outbox.
package breakpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/wire"
)

// ErrNotFound reports no breakpoint to delete, or no paused attempt to
// resume.
var ErrNotFound = errors.New("not found")

// Store reads and writes breakpoints and paused attempts.
type Store struct{ db *pgxpool.Pool }

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Spec names a breakpoint: a workflow's step, and optionally the version,
// instance, run and attempt it is limited to.
type Spec struct {
	WorkflowID string
	StepID     string
	Version    *int64
	InstanceID *int64
	RunID      *int64
	AttemptID  *int64
}

const sqlColumns = `breakpoint_id, workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id,
    COALESCE(created_by, ''), create_time`

// sqlCreate inserts a breakpoint, or reads the same one back.
const sqlCreate = `WITH ins AS (
    INSERT INTO step_breakpoint (workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id, created_by)
    VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))
    ON CONFLICT (workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id) DO NOTHING
    RETURNING ` + sqlColumns + `)
SELECT * FROM ins
UNION ALL
SELECT ` + sqlColumns + ` FROM step_breakpoint
WHERE workflow_id = $1 AND step_id = $2 AND workflow_version IS NOT DISTINCT FROM $3
  AND instance_id IS NOT DISTINCT FROM $4 AND run_id IS NOT DISTINCT FROM $5 AND attempt_id IS NOT DISTINCT FROM $6
LIMIT 1`

const sqlList = `SELECT ` + sqlColumns + ` FROM step_breakpoint
WHERE workflow_id = $1 AND step_id = $2 ORDER BY breakpoint_id`

// sqlPaused lists the attempts of a step (of the workflow or its
// iterations) paused now.
var sqlPaused = `SELECT p.workflow_id, coalesce(i.workflow_version, 0), p.instance_id, p.run_id,
    p.step_id, p.attempt_id, p.paused_at
FROM step_paused p
LEFT JOIN workflow_instance i ON i.workflow_id = p.workflow_id AND i.instance_id = p.instance_id AND i.run_id = p.run_id
WHERE ` + strings.ReplaceAll(instance.OfWorkflowSQL, "workflow_id", "p.workflow_id") + ` AND p.step_id = $2 AND NOT p.resumed
  AND EXISTS (SELECT 1 FROM step_instance s WHERE s.workflow_id = p.workflow_id AND s.instance_id = p.instance_id
      AND s.run_id = p.run_id AND s.step_id = p.step_id AND s.attempt_id = p.attempt_id AND s.status = 'PAUSED')
ORDER BY p.workflow_id, p.instance_id, p.run_id, p.attempt_id`

const sqlDelete = `DELETE FROM step_breakpoint WHERE workflow_id = $1 AND step_id = $2`

// sqlResumeAll resumes the paused attempts of a step: the breakpoints of a
// workflow also paused its iterations' attempts.
const sqlResumeAll = `UPDATE step_paused p SET resumed = true, resumed_at = now(), resumed_by = $3
WHERE ` + instance.OfWorkflowSQL + ` AND step_id = $2 AND NOT resumed
RETURNING workflow_id, instance_id, run_id, group_id`

const sqlResumeOne = `UPDATE step_paused SET resumed = true, resumed_at = now(), resumed_by = $6
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5 AND NOT resumed
  AND EXISTS (SELECT 1 FROM step_instance s WHERE s.workflow_id = $1 AND s.instance_id = $2 AND s.run_id = $3
      AND s.step_id = $4 AND s.attempt_id = $5 AND s.status = 'PAUSED')
RETURNING group_id`

func scan(r pgx.CollectableRow) (wire.StepBreakpoint, error) {
	var b wire.StepBreakpoint
	var created time.Time
	err := r.Scan(&b.BreakpointID, &b.WorkflowID, &b.StepID, &b.VersionID, &b.InstanceID, &b.RunID, &b.AttemptID, &b.CreatedBy, &created)
	b.CreateTime = wire.Millis(created)
	return b, err
}

// Create sets a breakpoint and returns it; setting the same one again
// returns the one set before.
func (s *Store) Create(ctx context.Context, b Spec, by string) (wire.StepBreakpoint, error) {
	rows, err := s.db.Query(ctx, sqlCreate, b.WorkflowID, b.StepID, b.Version, b.InstanceID, b.RunID, b.AttemptID, by)
	if err != nil {
		return wire.StepBreakpoint{}, fmt.Errorf("create breakpoint on step %s of %s: %w", b.StepID, b.WorkflowID, err)
	}
	out, err := pgx.CollectExactlyOneRow(rows, scan)
	if err != nil {
		return wire.StepBreakpoint{}, fmt.Errorf("create breakpoint on step %s of %s: %w", b.StepID, b.WorkflowID, err)
	}
	return out, nil
}

// List returns the breakpoints of a step, oldest first.
func (s *Store) List(ctx context.Context, workflowID, stepID string) ([]wire.StepBreakpoint, error) {
	rows, err := s.db.Query(ctx, sqlList, workflowID, stepID)
	if err != nil {
		return nil, fmt.Errorf("list breakpoints of step %s of %s: %w", stepID, workflowID, err)
	}
	bs, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list breakpoints of step %s of %s: %w", stepID, workflowID, err)
	}
	if bs == nil {
		bs = []wire.StepBreakpoint{}
	}
	return bs, nil
}

// Paused returns the attempts of a step paused now, its iterations' too.
func (s *Store) Paused(ctx context.Context, workflowID, stepID string) ([]wire.PausedStepAttempt, error) {
	rows, err := s.db.Query(ctx, sqlPaused, workflowID, stepID)
	if err != nil {
		return nil, fmt.Errorf("list paused attempts of step %s of %s: %w", stepID, workflowID, err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.PausedStepAttempt, error) {
		var p wire.PausedStepAttempt
		var paused time.Time
		err := r.Scan(&p.WorkflowID, &p.VersionID, &p.InstanceID, &p.RunID, &p.StepID, &p.AttemptID, &paused)
		p.CreateTime = wire.Millis(paused)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list paused attempts of step %s of %s: %w", stepID, workflowID, err)
	}
	if ps == nil {
		ps = []wire.PausedStepAttempt{}
	}
	return ps, nil
}

// DeleteAll removes every breakpoint of a step and resumes every attempt
// they paused, in one transaction, and returns how many it deleted and
// resumed. ErrNotFound when the step has no breakpoint. (An attempt also
// resumes by itself once no breakpoint matches it, which covers a pause
// racing the deletion.)
func (s *Store) DeleteAll(ctx context.Context, workflowID, stepID, by string) (deleted int64, resumed int, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlDelete, workflowID, stepID)
		if err != nil {
			return fmt.Errorf("delete breakpoints: %w", err)
		}
		deleted = tag.RowsAffected()
		if deleted == 0 {
			return fmt.Errorf("no breakpoint on step %s of workflow %s: %w", stepID, workflowID, ErrNotFound)
		}
		rows, err := tx.Query(ctx, sqlResumeAll, workflowID, stepID, by)
		if err != nil {
			return fmt.Errorf("resume paused attempts: %w", err)
		}
		type paused struct {
			ref   run.Ref
			group int32
		}
		all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (paused, error) {
			var p paused
			err := r.Scan(&p.ref.WorkflowID, &p.ref.InstanceID, &p.ref.RunID, &p.group)
			return p, err
		})
		if err != nil {
			return fmt.Errorf("resume paused attempts: %w", err)
		}
		for _, p := range all {
			if err := wakeStep(ctx, tx, p.ref, p.group, stepID); err != nil {
				return err
			}
		}
		resumed = len(all)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return deleted, resumed, nil
}

// Resume resumes one paused attempt; the others stay paused. An
// iteration's attempt is named by the iteration's workflow id, as Paused
// lists it. ErrNotFound when the attempt is not paused.
func (s *Store) Resume(ctx context.Context, ref run.Ref, stepID string, attempt int64, by string) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var group int32
		err := tx.QueryRow(ctx, sqlResumeOne, ref.WorkflowID, ref.InstanceID, ref.RunID, stepID, attempt, by).Scan(&group)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("step %s attempt %d of %s is not paused: %w", stepID, attempt, ref, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("resume step %s attempt %d of %s: %w", stepID, attempt, ref, err)
		}
		return wakeStep(ctx, tx, ref, group, stepID)
	})
}

// wakeStep tells the engine node owning the run, through the outbox, that
// a step's attempt changed outside it.
func wakeStep(ctx context.Context, tx pgx.Tx, ref run.Ref, group int32, step string) error {
	if _, err := queue.Enqueue(ctx, tx, queue.StepUpdate, group, run.StepUpdateMessage{Ref: ref, Group: group, StepID: step}); err != nil {
		return fmt.Errorf("wake step %s of %s: %w", step, ref, err)
	}
	return nil
}
