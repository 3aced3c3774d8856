package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/breakpoint"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/wire"
)

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
	ok, err := s.cfg.Definitions.Exists(r.Context(), body.WorkflowID)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(fmt.Sprintf("workflow %s not found", body.WorkflowID))
	}
	var versionID, runID *int64
	switch {
	case versionName != "":
		v, err := s.cfg.Definitions.Get(r.Context(), body.WorkflowID, versionName)
		if err != nil {
			return err
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
			return err
		}
		runID = &inst.RunID
	case runName != "":
		return badRequest("workflow_run must be a number or latest")
	case run > 0:
		runID = &run
	}
	b, err := breakpoint.NewStore(s.cfg.DB).Create(r.Context(), breakpoint.Spec{WorkflowID: body.WorkflowID, StepID: body.StepID,
		Version: versionID, InstanceID: body.InstanceID, RunID: runID, AttemptID: body.AttemptID}, CallerFrom(r.Context()))
	if err != nil {
		return err
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
	bs, err := breakpoint.NewStore(s.cfg.DB).List(r.Context(), wf, step)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, bs)
	return nil
}

func (s *Server) listPausedAttempts(w http.ResponseWriter, r *http.Request) error {
	wf, step, err := stepQuery(r)
	if err != nil {
		return err
	}
	ps, err := breakpoint.NewStore(s.cfg.DB).Paused(r.Context(), wf, step)
	if err != nil {
		return err
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
	deleted, resumed, err := breakpoint.NewStore(s.cfg.DB).DeleteAll(r.Context(), wf, step, CallerFrom(r.Context()))
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
			return err
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
	if err := breakpoint.NewStore(s.cfg.DB).Resume(r.Context(), ref, step, attempt, CallerFrom(r.Context())); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.StepInstanceActionResponse{WorkflowID: ref.WorkflowID, InstanceID: ref.InstanceID,
		RunID: ref.RunID, StepID: step, AttemptID: &attempt,
		TimelineEvent: wire.LogEvent("User [%s] take action [RESUME] on the step [%s]", CallerFrom(r.Context()), step)})
	return nil
}
