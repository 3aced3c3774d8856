package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/wire"
)

// A breakpoint pauses the attempts of a step that match it when they
// reach INITIALIZED. An unset version, instance, run or attempt matches
// all (Maestro's breakpoints set only the workflow and the step; the rest
// is this API's own). The step may be inside a foreach or while step: its
// iterations' attempts match by the run of the workflow they belong to
// (docs/params.md).

const breakpointColumns = `breakpoint_id, workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id,
    COALESCE(created_by, ''), create_time`

func scanBreakpoint(r pgx.CollectableRow) (wire.StepBreakpoint, error) {
	var b wire.StepBreakpoint
	var created time.Time
	err := r.Scan(&b.BreakpointID, &b.WorkflowID, &b.StepID, &b.VersionID, &b.InstanceID, &b.RunID, &b.AttemptID, &b.CreatedBy, &created)
	b.CreateTime = wire.Millis(created)
	return b, err
}

// breakpointBody is Maestro's StepBreakpointCreateRequest:
// workflow_version may be a number or latest, active or default;
// workflow_run (or workflow_run_id) a number or latest.
type breakpointBody struct {
	WorkflowID      string          `json:"workflow_id"`
	StepID          string          `json:"step_id"`
	WorkflowVersion json.RawMessage `json:"workflow_version"`
	InstanceID      *int64          `json:"workflow_instance_id"`
	Run             json.RawMessage `json:"workflow_run"`
	RunID           json.RawMessage `json:"workflow_run_id"`
	AttemptID       *int64          `json:"step_attempt_id"`
}

// numberOrName reads a JSON number or a string (a number or a name).
func numberOrName(raw json.RawMessage) (n int64, name string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, "", nil
	}
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, "", nil
	}
	if err := json.Unmarshal(raw, &name); err != nil {
		return 0, "", errors.New("expected a number or a string")
	}
	if v, err := strconv.ParseInt(name, 10, 64); err == nil {
		return v, "", nil
	}
	return 0, strings.ToLower(name), nil
}

// createBreakpoint sets a breakpoint and answers Maestro's StepBreakpoint;
// setting the same one again returns it.
func (s *Server) createBreakpoint(w http.ResponseWriter, r *http.Request) error {
	var body breakpointBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	if body.WorkflowID == "" || body.StepID == "" {
		return badRequest("workflow_id and step_id are required")
	}
	version, versionName, err := numberOrName(body.WorkflowVersion)
	if err != nil {
		return badRequest("workflow_version: " + err.Error())
	}
	runRaw := body.Run
	if len(runRaw) == 0 {
		runRaw = body.RunID
	}
	run, runName, err := numberOrName(runRaw)
	if err != nil {
		return badRequest("workflow_run: " + err.Error())
	}
	for name, v := range map[string]*int64{"workflow_instance_id": body.InstanceID, "step_attempt_id": body.AttemptID} {
		if v != nil && *v <= 0 {
			return badRequest(name + " must be a positive integer")
		}
	}
	if (version < 0) || (run < 0) || (len(body.WorkflowVersion) > 0 && version == 0 && versionName == "") {
		return badRequest("workflow_version and workflow_run must be positive numbers")
	}
	ok, err := s.exists(r.Context(), `SELECT EXISTS (SELECT 1 FROM workflow WHERE workflow_id = $1)`, body.WorkflowID)
	if err != nil {
		return fmt.Errorf("read workflow: %w", err)
	}
	if !ok {
		return notFound(fmt.Sprintf("workflow %s not found", body.WorkflowID))
	}
	var versionID, runID *int64
	switch {
	case versionName != "":
		v, err := s.cfg.Definitions.Get(r.Context(), body.WorkflowID, versionName)
		if err != nil {
			return definitionError(err)
		}
		versionID = &v.Version
	case version > 0:
		versionID = &version
	}
	switch {
	case runName == "latest" && body.InstanceID == nil:
		return badRequest("workflow_run latest needs a workflow_instance_id")
	case runName == "latest":
		inst, err := s.cfg.Runs.Run(r.Context(), body.WorkflowID, *body.InstanceID, 0)
		if err != nil {
			return runError(err)
		}
		runID = &inst.RunID
	case runName != "":
		return badRequest("workflow_run must be a number or latest")
	case run > 0:
		runID = &run
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
		body.WorkflowID, body.StepID, versionID, body.InstanceID, runID, body.AttemptID, CallerFrom(r.Context()))
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
		bs = []wire.StepBreakpoint{}
	}
	writeJSON(w, http.StatusOK, bs)
	return nil
}

func (s *Server) listPausedAttempts(w http.ResponseWriter, r *http.Request) error {
	wf, step, err := stepQuery(r)
	if err != nil {
		return err
	}
	rows, err := s.cfg.DB.Query(r.Context(), `SELECT p.workflow_id, coalesce(i.workflow_version, 0), p.instance_id, p.run_id,
            p.step_id, p.attempt_id, p.paused_at
        FROM step_paused p
        LEFT JOIN workflow_instance i ON i.workflow_id = p.workflow_id AND i.instance_id = p.instance_id AND i.run_id = p.run_id
        WHERE `+strings.ReplaceAll(instance.OfWorkflowSQL, "workflow_id", "p.workflow_id")+` AND p.step_id = $2 AND NOT p.resumed
          AND EXISTS (SELECT 1 FROM step_instance s WHERE s.workflow_id = p.workflow_id AND s.instance_id = p.instance_id
              AND s.run_id = p.run_id AND s.step_id = p.step_id AND s.attempt_id = p.attempt_id AND s.status = 'PAUSED')
        ORDER BY p.workflow_id, p.instance_id, p.run_id, p.attempt_id`, wf, step)
	if err != nil {
		return fmt.Errorf("list paused attempts: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.PausedStepAttempt, error) {
		var p wire.PausedStepAttempt
		var paused time.Time
		err := r.Scan(&p.WorkflowID, &p.VersionID, &p.InstanceID, &p.RunID, &p.StepID, &p.AttemptID, &paused)
		p.CreateTime = wire.Millis(paused)
		return p, err
	})
	if err != nil {
		return fmt.Errorf("list paused attempts: %w", err)
	}
	if ps == nil {
		ps = []wire.PausedStepAttempt{}
	}
	writeJSON(w, http.StatusOK, ps)
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
	if resume, err := boolQuery(r, "resume", true); err != nil {
		return err
	} else if !resume {
		// A paused attempt here resumes by itself once no breakpoint
		// matches it; leaving it paused is not offered.
		return badRequest("resume=false is not supported: deleting a step's breakpoints resumes the attempts they paused")
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
	writeJSON(w, http.StatusOK, wire.StepBreakpointDeleteResponse{WorkflowID: wf, StepID: step, Deleted: deleted, Resumed: resumed,
		TimelineEvent: wire.LogEvent("StepBreakpoint has been removed by the user [%s]. Total of [%d] steps have been resumed",
			CallerFrom(r.Context()), resumed)})
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
	var runID int64
	if r.PathValue("run") == "latest" {
		latest, err := s.cfg.Runs.Run(r.Context(), r.PathValue("id"), iid, 0)
		if err != nil {
			return runError(err)
		}
		runID = latest.RunID
	} else if runID, err = pathInt(r, "run"); err != nil {
		return err
	}
	attempt, err := pathInt(r, "attempt")
	if err != nil {
		return err
	}
	ref := run.Ref{WorkflowID: r.PathValue("id"), InstanceID: iid, RunID: runID}
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
	writeJSON(w, http.StatusOK, wire.StepInstanceActionResponse{WorkflowID: ref.WorkflowID, InstanceID: ref.InstanceID,
		RunID: ref.RunID, StepID: step, AttemptID: &attempt,
		TimelineEvent: wire.LogEvent("User [%s] take action [RESUME] on the step [%s]", CallerFrom(r.Context()), step)})
	return nil
}

// wakeStep tells the engine node owning the run, through the outbox, that
// a step's attempt changed outside it.
func wakeStep(ctx context.Context, tx pgx.Tx, ref run.Ref, group int32, step string) error {
	_, err := queue.Enqueue(ctx, tx, queue.StepUpdate, group, run.StepUpdateMessage{Ref: ref, Group: group, StepID: step})
	return err
}
