package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/wire"
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
		{"PUT /api/v3/workflows/{id}/actions/unblock", s.unblockWorkflow},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/actions/unblock", s.unblockInstance},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/runs/{run}/actions/unblock", s.unblockInstance},
		// Maestro's step actions act on the latest run.
		{"POST /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/restart", s.restartStep},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/stop", s.stepAction(run.StepStop)},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/kill", s.stepAction(run.StepKill)},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/skip", s.stepAction(run.StepSkip)},
		{"PUT /api/v3/workflows/{id}/instances/{iid}/steps/{step}/actions/bypass", s.stepAction(run.StepBypassDependencies)},
		// This API's own run-scoped forms of the step actions.
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/restart", s.restartStep},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/skip", s.stepAction(run.StepSkip)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/stop", s.stepAction(run.StepStop)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/kill", s.stepAction(run.StepKill)},
		{"POST /api/v3/workflows/{id}/instances/{iid}/runs/{run}/steps/{step}/actions/bypass-dependencies", s.stepAction(run.StepBypassDependencies)},
		{"GET /api/v3/workflows/instances/action-map", s.instanceActionMap},
		{"GET /api/v3/workflows/steps/instances/action-map", s.stepActionMap},
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
		DownstreamPolicy  json.RawMessage            `json:"downstream_policy"`
		RestartParams     workflow.Params            `json:"restart_params"`
		StepRestartParams map[string]workflow.Params `json:"step_restart_params"`
		SkipSteps         json.RawMessage            `json:"skip_steps"`
	} `json:"restart_config"`
}

// restartInstance restarts an ended instance as a new run and answers
// Maestro's WorkflowInstanceRestartResponse (200).
func (s *Server) restartInstance(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	var body restartBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	// Maestro's restart request has no artifacts (its controller: "no
	// runtimeTags, correlationId, or artifacts"): refused, not dropped.
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
	runParams := body.RunParams
	var stepParams map[string]workflow.Params
	if c := body.RestartConfig; c != nil {
		for name, raw := range map[string]json.RawMessage{"restart_config.downstream_policy": c.DownstreamPolicy,
			"restart_config.skip_steps": c.SkipSteps} {
			if err := unsupported(name, raw); err != nil {
				return err
			}
		}
		if err := workflowParamsValid(c.RestartParams); err != nil {
			return err
		}
		if len(c.RestartParams) > 0 {
			runParams = maps.Clone(runParams)
			if runParams == nil {
				runParams = workflow.Params{}
			}
			maps.Copy(runParams, c.RestartParams)
		}
		for _, ps := range c.StepRestartParams {
			if err := workflowParamsValid(ps); err != nil {
				return err
			}
		}
		stepParams = c.StepRestartParams
		if c.RestartPolicy != "" {
			policy = c.RestartPolicy
		}
		if n := len(c.RestartPath); n > 0 {
			step = c.RestartPath[n-1].StepID
		}
	}
	inst, err := s.cfg.Runs.Restart(r.Context(), execution.RestartRequest{
		WorkflowID: r.PathValue("id"), InstanceID: iid, Policy: policy, StepID: step,
		RunParams: runParams, StepRunParams: stepParams, Initiator: initiator,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, startResponse(inst, wire.RunCreated,
		wire.LogEvent("Manually restart the workflow instance by a user [%s]", CallerFrom(r.Context()))))
	return nil
}

// unblockWorkflow unblocks every FAILED instance of a workflow that
// blocks STRICT_SEQUENTIAL runs and answers Maestro's UNBLOCK timeline
// event; info is how many it unblocked.
func (s *Server) unblockWorkflow(w http.ResponseWriter, r *http.Request) error {
	n, err := s.cfg.Runs.Unblock(r.Context(), r.PathValue("id"), 0)
	if err != nil {
		return err
	}
	count := int64(n)
	ev := wire.ActionEvent("UNBLOCK", CallerFrom(r.Context()), "Unblocked [%d] failed workflow instances of workflow [%s]", n, r.PathValue("id"))
	ev.Info = &count
	writeJSON(w, http.StatusOK, ev)
	return nil
}

// unblockInstance unblocks a FAILED instance (its latest run, or the run
// named, which must be the latest) and answers Maestro's
// WorkflowInstanceActionResponse.
func (s *Server) unblockInstance(w http.ResponseWriter, r *http.Request) error {
	iid, err := pathInt(r, "iid")
	if err != nil {
		return err
	}
	latest, err := s.latestRunToAct(r, iid, "UNBLOCK")
	if err != nil {
		return err
	}
	if latest.Status != instance.WorkflowFailed {
		return badRequest(fmt.Sprintf("Cannot unblock a workflow instance [%s][%d][%d] from status [%s] as it is not FAILED status",
			latest.WorkflowID, latest.InstanceID, latest.RunID, latest.Status))
	}
	n, err := s.cfg.Runs.Unblock(r.Context(), r.PathValue("id"), iid)
	if err != nil {
		return err
	}
	ev := wire.ActionEvent("UNBLOCK", CallerFrom(r.Context()), "Unblocked the workflow instance.")
	ev.Reason = "[API] call to UNBLOCK a failed workflow instance run."
	info := wire.InfoDone
	if n == 0 {
		info = wire.InfoNoop
	}
	writeJSON(w, http.StatusOK, wire.WorkflowInstanceActionResponse{WorkflowID: latest.WorkflowID, InstanceID: latest.InstanceID,
		RunID: latest.RunID, InstanceStatus: string(latest.Status), Info: info, TimelineEvent: ev, Completed: true})
	return nil
}

// stepRestartBody is Maestro's StepInstanceRestartRequest.
type stepRestartBody struct {
	RequestID           string          `json:"request_id"`
	RequestTime         *int64          `json:"request_time"`
	RestartPolicy       string          `json:"restart_policy"`
	UpstreamRestartMode string          `json:"upstream_restart_mode"`
	StepRunParams       workflow.Params `json:"step_run_params"`
}

// restartStep restarts a step of an instance's latest run: a new attempt
// when the run is live, else a new run from the step. It answers
// Maestro's StepInstanceRestartResponse (200).
func (s *Server) restartStep(w http.ResponseWriter, r *http.Request) error {
	iid, runID, err := pathRunOrLatest(r)
	if err != nil {
		return err
	}
	var body stepRestartBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if len(body.RequestID) > execution.MaxRequestIDLength {
		return badRequest(fmt.Sprintf("request_id is %d bytes long; the limit is %d", len(body.RequestID), execution.MaxRequestIDLength))
	}
	switch strings.ToUpper(body.RestartPolicy) {
	case "", execution.RestartFromIncomplete, execution.RestartFromBeginning, execution.RestartFromSpecific:
	default:
		return badRequest("restart_policy must be RESTART_FROM_INCOMPLETE, RESTART_FROM_BEGINNING or RESTART_FROM_SPECIFIC")
	}
	switch strings.ToUpper(body.UpstreamRestartMode) {
	case "", "RESTART_FROM_STEP", "RESTART_FROM_INLINE_ROOT":
	default:
		return badRequest("upstream_restart_mode must be RESTART_FROM_STEP or RESTART_FROM_INLINE_ROOT")
	}
	if err := workflowParamsValid(body.StepRunParams); err != nil {
		return err
	}
	prev, _ := s.cfg.Runs.Attempt(r.Context(), r.PathValue("id"), iid, runID, r.PathValue("step"), 0)
	res, err := s.cfg.Runs.RestartStep(r.Context(), r.PathValue("id"), iid, runID, r.PathValue("step"), body.StepRunParams)
	if err != nil {
		return err
	}
	resp := wire.StepInstanceRestartResponse{WorkflowID: res.WorkflowID, InstanceID: res.InstanceID, RunID: res.RunID,
		StepID: res.StepID, Status: wire.RunCreated,
		TimelineEvent: wire.LogEvent("User [%s] take action [RESTART] on the step", CallerFrom(r.Context()))}
	if res.Restarted != nil {
		// The new run's first attempt of the step (attempts count per run).
		first := int64(1)
		resp.RunID, resp.VersionID, resp.AttemptID = res.Restarted.RunID, res.Restarted.Version, &first
	} else {
		if latest, err := s.cfg.Runs.Run(r.Context(), res.WorkflowID, res.InstanceID, res.RunID); err == nil {
			resp.VersionID = latest.Version
		}
		if prev != nil && prev.RunID == res.RunID {
			next := prev.AttemptID + 1
			resp.AttemptID = &next
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// stepActionNames are Maestro's names of the step actions.
var stepActionNames = map[run.Action]string{
	run.StepStop: "STOP", run.StepKill: "KILL", run.StepSkip: "SKIP", run.StepRestart: "RESTART",
	run.StepBypassDependencies: "BYPASS_STEP_DEPENDENCIES",
}

// stepAction applies stop, kill, skip or bypass to a step of an instance's
// latest run and answers Maestro's StepInstanceActionResponse (200) with
// the attempt's state. A skip of a step of an ended run starts a new run
// with the step skipped.
func (s *Server) stepAction(action run.Action) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		iid, runID, err := pathRunOrLatest(r)
		if err != nil {
			return err
		}
		var res *execution.StepActionResult
		if action == run.StepBypassDependencies {
			res, err = s.cfg.Runs.BypassDependencies(r.Context(), r.PathValue("id"), iid, runID, r.PathValue("step"), CallerFrom(r.Context()))
		} else {
			res, err = s.cfg.Runs.StepAct(r.Context(), r.PathValue("id"), iid, runID, r.PathValue("step"), action)
		}
		if err != nil {
			return err
		}
		resp := wire.StepInstanceActionResponse{WorkflowID: res.WorkflowID, InstanceID: res.InstanceID, RunID: res.RunID,
			StepID: res.StepID, TimelineEvent: wire.LogEvent("User [%s] take action [%s] on the step",
				CallerFrom(r.Context()), stepActionNames[action])}
		if res.Restarted != nil {
			resp.RunID = res.Restarted.RunID
		} else if a, err := s.cfg.Runs.Attempt(r.Context(), res.WorkflowID, res.InstanceID, res.RunID, res.StepID, 0); err == nil {
			resp.AttemptID = &a.AttemptID
			resp.StepRuntimeState = runtimeStateView(a)
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
}

// instanceActionMap is Maestro's map of workflow instance statuses to the
// actions they allow.
func (s *Server) instanceActionMap(w http.ResponseWriter, _ *http.Request) error {
	out := map[instance.WorkflowStatus][]string{}
	for st, actions := range run.InstanceActionMap() {
		for _, a := range actions {
			out[st] = append(out[st], strings.ToUpper(string(a)))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// stepActionMap is Maestro's map of step statuses to the actions they
// allow (PAUSE and RESUME are breakpoints here: see the breakpoint API).
func (s *Server) stepActionMap(w http.ResponseWriter, _ *http.Request) error {
	out := map[instance.StepStatus][]string{}
	for st, actions := range run.StepActionMap() {
		for _, a := range actions {
			out[st] = append(out[st], stepActionNames[a])
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// latestRunToAct reads the latest run of instance iid for an action (verb
// in Maestro's words); a run named in the path must be that run, as
// Maestro acts only on an instance's latest run.
func (s *Server) latestRunToAct(r *http.Request, iid int64, verb string) (*execution.Instance, error) {
	latest, err := s.cfg.Runs.Run(r.Context(), r.PathValue("id"), iid, 0)
	if err != nil {
		return nil, err
	}
	if r.PathValue("run") == "" {
		return latest, nil
	}
	run, err := pathInt(r, "run")
	if err != nil {
		return nil, err
	}
	if run != latest.RunID {
		return nil, badRequest(fmt.Sprintf("Cannot %s the workflow instance run [%d] as it is not the latest run [%d]", verb, run, latest.RunID))
	}
	return latest, nil
}
