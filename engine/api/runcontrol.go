package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// runControlRoutes registers restart, unblock, step actions and the action
// maps (docs/run-control.md).
func (s *Server) runControlRoutes() {
	for _, rt := range s.runControlRouteTable() {
		s.handle(rt.pattern, rt.handler)
	}
}

func (s *Server) runControlRouteTable() []route {
	return []route{
		{"POST /api/v3/workflows/{id}/instances/{iid}/actions/restart", s.restartInstance},
		{"PUT /api/v3/workflows/{id}/actions/unblock", s.unblock},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/unblock", s.unblock},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/restart", s.stepAction(flow.StepRestart)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/skip", s.stepAction(flow.StepSkip)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/stop", s.stepAction(flow.StepStop)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/kill", s.stepAction(flow.StepKill)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/bypass-dependencies", s.bypassDependencies},
		{"GET /api/v3/instances/action-map", s.instanceActionMap},
		{"GET /api/v3/steps/instances/action-map", s.stepActionMap},
	}
}

// restartBody is the body of an instance restart: Maestro's
// WorkflowInstanceRestartRequest. The policy may be given at the top level
// or, as in Maestro's run request, in restart_config. Unknown fields are
// refused.
type restartBody struct {
	RestartPolicy string          `json:"restart_policy"`
	RunParams     workflow.Params `json:"run_params"`
	Initiator     map[string]any  `json:"initiator"`
	// RequestTime is accepted as Maestro clients send it.
	RequestTime *int64 `json:"request_time"`
	// RequestID is accepted (and checked like a start's) as Maestro clients
	// send it; a restart is not deduplicated by it: each accepted restart
	// creates the next run.
	RequestID     string          `json:"request_id"`
	Artifacts     json.RawMessage `json:"artifacts"`
	RestartConfig *struct {
		RestartPolicy string `json:"restart_policy"`
		// RestartPath, as in Maestro, names the step to restart from
		// (RESTART_FROM_SPECIFIC) in its last node.
		RestartPath []struct {
			WorkflowID string `json:"workflow_id"`
			InstanceID int64  `json:"instance_id"`
			StepID     string `json:"step_id"`
		} `json:"restart_path"`
		// Maestro fields this implementation does not support yet: refused
		// when not empty.
		DownstreamPolicy  json.RawMessage `json:"downstream_policy"`
		RestartParams     json.RawMessage `json:"restart_params"`
		StepRestartParams json.RawMessage `json:"step_restart_params"`
		SkipSteps         json.RawMessage `json:"skip_steps"`
	} `json:"restart_config"`
}

func (s *Server) restartInstance(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	var body restartBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := unsupported("artifacts", body.Artifacts); err != nil {
		return err
	}
	if len(body.RequestID) > execution.MaxRequestIDLength {
		return badRequest(fmt.Sprintf("request_id is %d bytes long; the limit is %d", len(body.RequestID), execution.MaxRequestIDLength))
	}
	if err := workflowParamsValid(body.RunParams); err != nil {
		return err
	}
	initiator, err := manualInitiator(body.Initiator, CallerFrom(r.Context()))
	if err != nil {
		return err
	}
	policy, step := body.RestartPolicy, ""
	if c := body.RestartConfig; c != nil {
		for name, raw := range map[string]json.RawMessage{"restart_config.downstream_policy": c.DownstreamPolicy,
			"restart_config.restart_params": c.RestartParams, "restart_config.step_restart_params": c.StepRestartParams,
			"restart_config.skip_steps": c.SkipSteps} {
			if err := unsupported(name, raw); err != nil {
				return err
			}
		}
		if c.RestartPolicy != "" {
			policy = c.RestartPolicy
		}
		if n := len(c.RestartPath); n > 0 {
			step = c.RestartPath[n-1].StepID
		}
	}
	inst, err := s.cfg.Runs.Restart(r.Context(), execution.RestartRequest{
		WorkflowID: r.PathValue("id"), InstanceID: iid, Policy: policy, StepID: step,
		RunParams: body.RunParams, Initiator: initiator,
	})
	if err != nil {
		return controlError(err)
	}
	writeJSON(w, http.StatusCreated, map[string]any{"status": "CREATED", "workflow_instance": inst})
	return nil
}

func (s *Server) unblock(w http.ResponseWriter, r *http.Request) error {
	var iid int64
	if r.PathValue("iid") != "" {
		var err error
		if iid, err = pathInt(r, "iid"); err != nil {
			return err
		}
	}
	n, err := s.cfg.Runs.Unblock(r.Context(), r.PathValue("id"), iid)
	if err != nil {
		return controlError(err)
	}
	resp := map[string]any{"workflow_id": r.PathValue("id"), "action": flow.ActionUnblock, "unblocked": n}
	if iid > 0 {
		resp["workflow_instance_id"] = iid
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) stepAction(action flow.Action) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		iid, run, err := pathRunOrLatest(r)
		if err != nil {
			return err
		}
		res, err := s.cfg.Runs.StepAct(r.Context(), r.PathValue("id"), iid, run, r.PathValue("step"), action)
		if err != nil {
			return controlError(err)
		}
		code := http.StatusAccepted
		if res.Restarted != nil {
			code = http.StatusCreated
		}
		writeJSON(w, code, res)
		return nil
	}
}

func (s *Server) instanceActionMap(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, flow.InstanceActionMap())
	return nil
}

func (s *Server) stepActionMap(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, flow.StepActionMap())
	return nil
}

// controlError maps run-control errors; the rest as runError does.
func controlError(err error) error {
	if errors.Is(err, execution.ErrInvalid) {
		return badRequest(err.Error())
	}
	return runError(err)
}
