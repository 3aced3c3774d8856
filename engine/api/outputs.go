package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// patternRoutes registers the endpoints of output params, tag permits and
// step breakpoints.
func (s *Server) patternRoutes() {
	s.handle("PUT /api/v3/output-data", s.putOutputData)
	s.handle("PUT /api/v3/step-completion", s.putStepCompletion)
	s.handle("POST /api/v3/tag-permits", s.putTagPermit)
	s.handle("GET /api/v3/tag-permits", s.listTagPermits)
	s.handle("GET /api/v3/tag-permits/{tag}", s.getTagPermit)
	s.handle("DELETE /api/v3/tag-permits/{tag}", s.deleteTagPermit)
	s.handle("POST /api/v3/workflows/steps/breakpoints", s.createBreakpoint)
	s.handle("GET /api/v3/workflows/steps/breakpoints", s.listBreakpoints)
	s.handle("DELETE /api/v3/workflows/steps/breakpoints", s.deleteBreakpoints)
	s.handle("GET /api/v3/workflows/steps/breakpoints/paused-step-attempts", s.listPausedAttempts)
	s.handle("PUT /api/v3/workflows/steps/breakpoints/{id}/instances/{iid}/runs/{run}/steps/{step}/attempts/{attempt}/actions/resume", s.resumePausedAttempt)
}

// outputDataBody is what an external job sends to set output params of the
// step attempt that runs it: Maestro's StepOutputDataRequest (params,
// artifacts and its extra fields external_job_type, external_job_id,
// created_time) with the attempt's identity. step_instance_uuid is the
// attempt's step_instance_uuid param: knowing it proves the caller runs
// the attempt.
type outputDataBody struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"workflow_instance_id"`
	RunID      int64  `json:"workflow_run_id"`
	StepID     string `json:"step_id"`
	AttemptID  int64  `json:"step_attempt_id"`
	UUID       string `json:"step_instance_uuid"`
	// StepToken is the attempt's step token, when not sent in the
	// completion.TokenHeader header: the proof that the caller runs the
	// attempt (the uuid is readable by all).
	StepToken string `json:"step_token"`
	// Params are typed values: {"name": {"type": "LONG", "value": 5}}, or
	// Maestro's evaluated Parameters (evaluated_result, evaluated_time).
	Params map[string]struct {
		Type            workflow.ParamType `json:"type"`
		Value           json.RawMessage    `json:"value"`
		EvaluatedResult json.RawMessage    `json:"evaluated_result"`
		EvaluatedTime   *int64             `json:"evaluated_time"`
		Expression      *string            `json:"expression"`
		Mode            workflow.ParamMode `json:"mode"`
	} `json:"params"`
	// Artifacts are kept with the attempt and shown on it.
	Artifacts map[string]json.RawMessage `json:"artifacts"`
	// Maestro's extra fields: who sent the data.
	ExternalJobType string `json:"external_job_type"`
	ExternalJobID   string `json:"external_job_id"`
	CreatedTime     *int64 `json:"created_time"`
}

func (s *Server) putOutputData(w http.ResponseWriter, r *http.Request) error {
	var body outputDataBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	var problems []string
	if body.WorkflowID == "" || body.StepID == "" || body.InstanceID <= 0 || body.RunID <= 0 || body.AttemptID <= 0 || body.UUID == "" {
		problems = append(problems, "workflow_id, workflow_instance_id, workflow_run_id, step_id, step_attempt_id and step_instance_uuid are required")
	}
	if len(body.Params) == 0 && len(body.Artifacts) == 0 {
		problems = append(problems, "params: at least one output param (or artifact) is required")
	}
	vals := make(params.Values, len(body.Params))
	for _, name := range slices.Sorted(maps.Keys(body.Params)) {
		p := body.Params[name]
		if !outputName.MatchString(name) || strings.Contains(name, "__") {
			problems = append(problems, fmt.Sprintf("params.%s: a param name starts with a letter or '_' and has only letters, digits, '.', '-' and '_' (no '__')", name))
			continue
		}
		if params.Reserved(name) {
			problems = append(problems, fmt.Sprintf("params.%s: the name is reserved and set by Maestro", name))
			continue
		}
		if !p.Type.Valid() {
			problems = append(problems, fmt.Sprintf("params.%s: unknown type %q", name, p.Type))
			continue
		}
		value := p.Value
		if len(value) == 0 || string(value) == "null" {
			value = p.EvaluatedResult
		}
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.UseNumber()
		var raw any
		if len(value) == 0 || dec.Decode(&raw) != nil {
			problems = append(problems, fmt.Sprintf("params.%s: value is required", name))
			continue
		}
		v, err := params.Convert(p.Type, raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("params.%s: %v", name, err))
			continue
		}
		vals[name] = params.Value{Type: p.Type, Value: v}
	}
	if err := params.CheckSize(vals); err != nil {
		problems = append(problems, "params: "+err.Error())
	}
	if len(problems) > 0 {
		return badRequest("invalid output data", problems...)
	}
	if err := s.checkStepToken(r, body.UUID, body.StepToken); err != nil {
		return err
	}
	encoded, err := json.Marshal(vals)
	if err != nil {
		return err
	}
	artifacts, err := json.Marshal(orEmptyRaw(body.Artifacts))
	if err != nil {
		return err
	}
	merged, err := completion.NewStore(s.cfg.DB).SetOutputs(r.Context(), completion.Outputs{WorkflowID: body.WorkflowID,
		InstanceID: body.InstanceID, RunID: body.RunID, StepID: body.StepID, AttemptID: body.AttemptID, UUID: body.UUID,
		Params: encoded, Artifacts: artifacts, MaxBytes: params.MaxBytes})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"workflow_id": body.WorkflowID, "workflow_instance_id": body.InstanceID, "workflow_run_id": body.RunID,
		"step_id": body.StepID, "step_attempt_id": body.AttemptID, "params": json.RawMessage(merged),
	})
	return nil
}

// outputName is the shape of a param name.
var outputName = regexp.MustCompile(`^[_a-zA-Z][.\-_a-zA-Z0-9]{0,127}$`)

// orEmptyRaw is m, or an empty map when m is nil.
func orEmptyRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
