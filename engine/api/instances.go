package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func (s *Server) instanceRoutes() {
	s.handle("POST /api/v3/workflows/{id}/versions/{version}/actions/start", s.startRun)
	s.handle("GET /api/v3/workflows/{id}/instances", s.listInstances)
	s.handle("GET /api/v3/workflows/{id}/instances/{iid}", s.getInstance)
	s.handle("GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}", s.getInstance)
	s.handle("GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps", s.listSteps)
	s.handle("GET /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/attempts/{attempt}", s.getAttempt)
	s.handle("PUT /api/v3/workflows/{id}/instances/{iid}/actions/stop", s.actOn(flow.ActionStop))
	s.handle("PUT /api/v3/workflows/{id}/instances/{iid}/actions/kill", s.actOn(flow.ActionKill))
	s.handle("PUT /api/v3/workflows/{id}/actions/stop", s.actOnAll(flow.ActionStop))
	s.handle("PUT /api/v3/workflows/{id}/actions/kill", s.actOnAll(flow.ActionKill))
	s.runControlRoutes()
}

// startBody is the body of a start request: Maestro's WorkflowStartRequest.
// Unknown fields are refused.
type startBody struct {
	RunParams workflow.Params `json:"run_params"`
	RequestID string          `json:"request_id"`
	// Initiator may only say MANUAL: its user is the caller, whatever the
	// body claims (manualInitiator).
	Initiator map[string]any `json:"initiator"`
	// RequestTime (epoch milliseconds) is accepted as Maestro clients send
	// it; the run's create_time is the server's clock.
	RequestTime *int64 `json:"request_time"`
	// PersistFailedRun is accepted: a run whose params fail to evaluate is
	// always kept, FAILED, with the reason on its timeline.
	PersistFailedRun *bool `json:"persist_failed_run"`
	// RuntimeTags and Artifacts are Maestro fields this implementation has
	// no use for yet: a non-empty value is refused rather than dropped.
	RuntimeTags json.RawMessage `json:"runtime_tags"`
	Artifacts   json.RawMessage `json:"artifacts"`
}

// unsupported refuses a non-empty value of a Maestro field that is not
// implemented.
func unsupported(field string, raw json.RawMessage) error {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "[]", "{}":
		return nil
	}
	return badRequest(field + " is not supported by this Maestro implementation; send it empty or leave it out")
}

// manualInitiator is the initiator of a run a caller starts or restarts
// through the API: Maestro's MANUAL initiator with the caller as its user.
// A body may name the type (any case) but never the user: a user in the
// body is replaced by the caller. Other initiator types are set by Maestro
// itself (triggers, subworkflows, foreach and while).
func manualInitiator(body map[string]any, caller string) (map[string]any, error) {
	if t, ok := body["type"]; ok {
		name, _ := t.(string)
		if !strings.EqualFold(name, "MANUAL") {
			return nil, badRequest(fmt.Sprintf("initiator.type %v cannot be set through the API; a run started or restarted by a caller is MANUAL", t))
		}
	}
	return execution.ManualInitiator(caller), nil
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) error {
	var body startBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := unsupported("runtime_tags", body.RuntimeTags); err != nil {
		return err
	}
	if err := unsupported("artifacts", body.Artifacts); err != nil {
		return err
	}
	if err := workflowParamsValid(body.RunParams); err != nil {
		return err
	}
	initiator, err := manualInitiator(body.Initiator, CallerFrom(r.Context()))
	if err != nil {
		return err
	}
	res, err := s.cfg.Runs.Start(r.Context(), execution.StartRequest{
		WorkflowID: r.PathValue("id"), Version: r.PathValue("version"),
		RunParams: body.RunParams, RequestID: body.RequestID, Initiator: initiator,
	})
	if err != nil {
		return runError(err)
	}
	status := "CREATED"
	code := http.StatusCreated
	if res.Duplicated {
		status, code = "DUPLICATED", http.StatusOK
	} else if res.Instance.Status == instance.WorkflowStopped {
		status = "STOPPED" // dropped by the FIRST_ONLY run strategy
	}
	writeJSON(w, code, map[string]any{"status": status, "workflow_instance": res.Instance})
	return nil
}

// workflowParamsValid checks run params' shape: types known, one of value
// or expression.
func workflowParamsValid(ps workflow.Params) error {
	if len(ps) == 0 {
		return nil
	}
	d := &workflow.Definition{Workflow: workflow.Workflow{ID: "run_params", Params: ps, Steps: []workflow.StepNode{{Step: &workflow.Step{StepCommon: workflow.StepCommon{ID: "s"}, Type: "NoOp"}}}}}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		var ve *workflow.ValidationError
		if errors.As(err, &ve) {
			details := make([]string, 0, len(ve.Problems))
			for _, p := range ve.Problems {
				details = append(details, p.Path+": "+p.Message)
			}
			return badRequest("invalid run_params", details...)
		}
		return badRequest("invalid run_params: " + err.Error())
	}
	return nil
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	var run int64
	if r.PathValue("run") != "" && r.PathValue("run") != "latest" {
		if run, err = pathInt(r, "run"); err != nil {
			return err
		}
	}
	inst, err := s.cfg.Runs.Detail(r.Context(), r.PathValue("id"), iid, run)
	if err != nil {
		return runError(err)
	}
	writeJSON(w, http.StatusOK, inst)
	return nil
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) error {
	cursor, _ := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	page, err := s.cfg.Runs.List(r.Context(), r.PathValue("id"), cursor, limit)
	if err != nil {
		return runError(err)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) listSteps(w http.ResponseWriter, r *http.Request) error {
	iid, run, err := pathRun(r)
	if err != nil {
		return err
	}
	steps, err := s.cfg.Runs.Steps(r.Context(), r.PathValue("id"), iid, run)
	if err != nil {
		return runError(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"steps": steps})
	return nil
}

func (s *Server) getAttempt(w http.ResponseWriter, r *http.Request) error {
	iid, run, err := pathRun(r)
	if err != nil {
		return err
	}
	var attempt int64
	if r.PathValue("attempt") != "latest" {
		if attempt, err = pathInt(r, "attempt"); err != nil {
			return err
		}
	}
	a, err := s.cfg.Runs.Attempt(r.Context(), r.PathValue("id"), iid, run, r.PathValue("step"), attempt)
	if err != nil {
		return runError(err)
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) actOn(action flow.Action) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		iid, err := pathInt(r, "iid")
		if err != nil {
			return err
		}
		inst, err := s.cfg.Runs.Act(r.Context(), r.PathValue("id"), iid, 0, action)
		if err != nil {
			return runError(err)
		}
		writeJSON(w, http.StatusAccepted, map[string]any{
			"workflow_id": inst.WorkflowID, "workflow_instance_id": inst.InstanceID, "workflow_run_id": inst.RunID,
			"action": action, "status": "ACCEPTED",
		})
		return nil
	}
}

func (s *Server) actOnAll(action flow.Action) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := s.cfg.Definitions.Get(r.Context(), r.PathValue("id"), "latest"); err != nil {
			return runError(err)
		}
		n, err := s.cfg.Runs.ActOnAll(r.Context(), r.PathValue("id"), action)
		if err != nil {
			return runError(err)
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"workflow_id": r.PathValue("id"), "action": action, "instances": n})
		return nil
	}
}

func pathInt(r *http.Request, name string) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest(name + " must be a positive integer, got " + strconv.Quote(r.PathValue(name)))
	}
	return n, nil
}

// pathRun reads the {iid} and {run} path values.
// pathRunOrLatest is pathRun where the run may be "latest" (run 0).
func pathRunOrLatest(r *http.Request) (iid, run int64, err error) {
	if iid, err = pathInt(r, "iid"); err != nil {
		return 0, 0, err
	}
	if r.PathValue("run") != "latest" {
		if run, err = pathInt(r, "run"); err != nil {
			return 0, 0, err
		}
	}
	return iid, run, nil
}

func pathRun(r *http.Request) (iid, run int64, err error) {
	if iid, err = pathInt(r, "iid"); err != nil {
		return 0, 0, err
	}
	if run, err = pathInt(r, "run"); err != nil {
		return 0, 0, err
	}
	return iid, run, nil
}

// runError maps execution and definition errors to responses.
func runError(err error) error {
	switch {
	case errors.Is(err, execution.ErrNotFound), errors.Is(err, definition.ErrNotFound):
		return notFound(err.Error())
	case errors.Is(err, execution.ErrInvalid):
		return badRequest(err.Error())
	case errors.Is(err, definition.ErrInvalidSelector):
		return badRequest(err.Error())
	case errors.Is(err, execution.ErrConflict):
		return conflict(err.Error())
	}
	return err
}
