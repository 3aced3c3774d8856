package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
)

// Breakpoint pauses the attempts of a step that match it when they reach
// INITIALIZED. An unset version, instance, run or attempt matches all. The
// step may be inside a foreach or while step: its iterations' attempts
// match by the run of the workflow they belong to (docs/params.md).
type Breakpoint struct {
	ID              int64     `json:"id"`
	WorkflowID      string    `json:"workflow_id"`
	StepID          string    `json:"step_id"`
	WorkflowVersion *int64    `json:"workflow_version,omitempty"`
	InstanceID      *int64    `json:"workflow_instance_id,omitempty"`
	RunID           *int64    `json:"workflow_run_id,omitempty"`
	AttemptID       *int64    `json:"step_attempt_id,omitempty"`
	CreatedBy       string    `json:"created_by,omitempty"`
	CreateTime      time.Time `json:"create_time"`
}

const breakpointColumns = `breakpoint_id, workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id,
    COALESCE(created_by, ''), create_time`

func scanBreakpoint(r pgx.CollectableRow) (Breakpoint, error) {
	var b Breakpoint
	err := r.Scan(&b.ID, &b.WorkflowID, &b.StepID, &b.WorkflowVersion, &b.InstanceID, &b.RunID, &b.AttemptID, &b.CreatedBy, &b.CreateTime)
	return b, err
}

// PausedAttempt is a step attempt a breakpoint paused and nobody resumed.
// For an iteration of a foreach or while step, WorkflowID, InstanceID and
// RunID are the iteration run's.
type PausedAttempt struct {
	WorkflowID string    `json:"workflow_id"`
	InstanceID int64     `json:"workflow_instance_id"`
	RunID      int64     `json:"workflow_run_id"`
	StepID     string    `json:"step_id"`
	AttemptID  int64     `json:"step_attempt_id"`
	PausedAt   time.Time `json:"paused_at"`
}

type breakpointBody struct {
	WorkflowID      string `json:"workflow_id"`
	StepID          string `json:"step_id"`
	WorkflowVersion *int64 `json:"workflow_version"`
	InstanceID      *int64 `json:"workflow_instance_id"`
	RunID           *int64 `json:"workflow_run_id"`
	AttemptID       *int64 `json:"step_attempt_id"`
}

// createBreakpoint sets a breakpoint; setting the same one again returns it.
func (s *Server) createBreakpoint(w http.ResponseWriter, r *http.Request) error {
	var body breakpointBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	if body.WorkflowID == "" || body.StepID == "" {
		return badRequest("workflow_id and step_id are required")
	}
	for name, v := range map[string]*int64{"workflow_version": body.WorkflowVersion, "workflow_instance_id": body.InstanceID,
		"workflow_run_id": body.RunID, "step_attempt_id": body.AttemptID} {
		if v != nil && *v <= 0 {
			return badRequest(name + " must be a positive integer")
		}
	}
	ok, err := s.exists(r.Context(), `SELECT EXISTS (SELECT 1 FROM workflow WHERE workflow_id = $1)`, body.WorkflowID)
	if err != nil {
		return fmt.Errorf("read workflow: %w", err)
	}
	if !ok {
		return notFound(fmt.Sprintf("workflow %s not found", body.WorkflowID))
	}
	rows, err := s.cfg.DB.Query(r.Context(), `WITH ins AS (
            INSERT INTO step_breakpoint (workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id, created_by)
            VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))
            ON CONFLICT (workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id) DO NOTHING
            RETURNING `+breakpointColumns+`)
        SELECT * FROM ins
        UNION ALL
        SELECT `+breakpointColumns+` FROM step_breakpoint
        WHERE workflow_id = $1 AND step_id = $2 AND workflow_version IS NOT DISTINCT FROM $3
          AND instance_id IS NOT DISTINCT FROM $4 AND run_id IS NOT DISTINCT FROM $5 AND attempt_id IS NOT DISTINCT FROM $6
        LIMIT 1`,
		body.WorkflowID, body.StepID, body.WorkflowVersion, body.InstanceID, body.RunID, body.AttemptID, CallerFrom(r.Context()))
	if err != nil {
		return fmt.Errorf("create breakpoint: %w", err)
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBreakpoint)
	if err != nil {
		return fmt.Errorf("create breakpoint: %w", err)
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// stepQuery reads the workflowId and stepId query parameters (Maestro's
// spelling; workflow_id and step_id are accepted too).
func stepQuery(r *http.Request) (workflowID, stepID string, err error) {
	q := r.URL.Query()
	workflowID, stepID = q.Get("workflowId"), q.Get("stepId")
	if workflowID == "" {
		workflowID = q.Get("workflow_id")
	}
	if stepID == "" {
		stepID = q.Get("step_id")
	}
	if workflowID == "" || stepID == "" {
		return "", "", badRequest("query parameters workflowId and stepId are required")
	}
	return workflowID, stepID, nil
}

func (s *Server) listBreakpoints(w http.ResponseWriter, r *http.Request) error {
	wf, step, err := stepQuery(r)
	if err != nil {
		return err
	}
	rows, err := s.cfg.DB.Query(r.Context(), `SELECT `+breakpointColumns+` FROM step_breakpoint
        WHERE workflow_id = $1 AND step_id = $2 ORDER BY breakpoint_id`, wf, step)
	if err != nil {
		return fmt.Errorf("list breakpoints: %w", err)
	}
	bs, err := pgx.CollectRows(rows, scanBreakpoint)
	if err != nil {
		return fmt.Errorf("list breakpoints: %w", err)
	}
	if bs == nil {
		bs = []Breakpoint{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"breakpoints": bs})
	return nil
}

func (s *Server) listPausedAttempts(w http.ResponseWriter, r *http.Request) error {
	wf, step, err := stepQuery(r)
	if err != nil {
		return err
	}
	rows, err := s.cfg.DB.Query(r.Context(), `SELECT workflow_id, instance_id, run_id, step_id, attempt_id, paused_at
        FROM step_paused p WHERE `+instance.OfWorkflowSQL+` AND step_id = $2 AND NOT resumed
          AND EXISTS (SELECT 1 FROM step_instance s WHERE s.workflow_id = p.workflow_id AND s.instance_id = p.instance_id
              AND s.run_id = p.run_id AND s.step_id = p.step_id AND s.attempt_id = p.attempt_id AND s.status = 'PAUSED')
        ORDER BY workflow_id, instance_id, run_id, attempt_id`, wf, step)
	if err != nil {
		return fmt.Errorf("list paused attempts: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PausedAttempt, error) {
		var p PausedAttempt
		err := r.Scan(&p.WorkflowID, &p.InstanceID, &p.RunID, &p.StepID, &p.AttemptID, &p.PausedAt)
		return p, err
	})
	if err != nil {
		return fmt.Errorf("list paused attempts: %w", err)
	}
	if ps == nil {
		ps = []PausedAttempt{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"paused_step_attempts": ps})
	return nil
}

// deleteBreakpoints removes every breakpoint of a step and resumes every
// attempt they paused. (An attempt also resumes by itself once no
// breakpoint matches it, which covers a pause racing the deletion.)
func (s *Server) deleteBreakpoints(w http.ResponseWriter, r *http.Request) error {
	wf, step, err := stepQuery(r)
	if err != nil {
		return err
	}
	var deleted int64
	resumed := 0
	err = pgx.BeginFunc(r.Context(), s.cfg.DB, func(tx pgx.Tx) error {
		tag, err := tx.Exec(r.Context(), `DELETE FROM step_breakpoint WHERE workflow_id = $1 AND step_id = $2`, wf, step)
		if err != nil {
			return fmt.Errorf("delete breakpoints: %w", err)
		}
		deleted = tag.RowsAffected()
		if deleted == 0 {
			return notFound(fmt.Sprintf("no breakpoint on step %s of workflow %s", step, wf))
		}
		// The breakpoints of a workflow also paused its iterations' attempts.
		rows, err := tx.Query(r.Context(), `UPDATE step_paused p SET resumed = true, resumed_at = now(), resumed_by = $3
            WHERE `+instance.OfWorkflowSQL+` AND step_id = $2 AND NOT resumed
            RETURNING workflow_id, instance_id, run_id, group_id`, wf, step, CallerFrom(r.Context()))
		if err != nil {
			return fmt.Errorf("resume paused attempts: %w", err)
		}
		type paused struct {
			ref   flow.Ref
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
			if err := wakeStep(r.Context(), tx, p.ref, p.group, step); err != nil {
				return err
			}
		}
		resumed = len(all)
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflow_id": wf, "step_id": step, "deleted": deleted, "resumed": resumed})
	return nil
}

// resumePausedAttempt resumes one paused attempt; the others stay paused.
// An iteration's attempt is named by the iteration's workflow id, as the
// paused attempts list it (e.g. wf:1:loop for a foreach of instance 1).
func (s *Server) resumePausedAttempt(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	run, err := pathInt(r, "run")
	if err != nil {
		return err
	}
	attempt, err := pathInt(r, "attempt")
	if err != nil {
		return err
	}
	ref := flow.Ref{WorkflowID: r.PathValue("id"), InstanceID: iid, RunID: run}
	step := r.PathValue("step")
	err = pgx.BeginFunc(r.Context(), s.cfg.DB, func(tx pgx.Tx) error {
		var group int32
		err := tx.QueryRow(r.Context(), `UPDATE step_paused SET resumed = true, resumed_at = now(), resumed_by = $6
            WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5 AND NOT resumed
              AND EXISTS (SELECT 1 FROM step_instance s WHERE s.workflow_id = $1 AND s.instance_id = $2 AND s.run_id = $3
                  AND s.step_id = $4 AND s.attempt_id = $5 AND s.status = 'PAUSED')
            RETURNING group_id`, ref.WorkflowID, ref.InstanceID, ref.RunID, step, attempt, CallerFrom(r.Context())).Scan(&group)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(fmt.Sprintf("step %s attempt %d of %s is not paused", step, attempt, ref))
		}
		if err != nil {
			return fmt.Errorf("resume step attempt: %w", err)
		}
		return wakeStep(r.Context(), tx, ref, group, step)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"workflow_id": ref.WorkflowID, "workflow_instance_id": ref.InstanceID, "workflow_run_id": ref.RunID,
		"step_id": step, "step_attempt_id": attempt, "action": "RESUME", "status": "ACCEPTED",
	})
	return nil
}

// wakeStep tells the engine node owning the run, through the outbox, that
// a step's attempt changed outside it.
func wakeStep(ctx context.Context, tx pgx.Tx, ref flow.Ref, group int32, step string) error {
	_, err := queue.Enqueue(ctx, tx, queue.StepUpdate, group, flow.StepUpdateMessage{Ref: ref, Group: group, StepID: step})
	return err
}
