package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/maestro-aws/maestro/engine/stepruntime/completion"
)

// putStepCompletion is the completion call of a job that reports back by
// itself (an asynchronous Lambda step): after setting its outputs with PUT
// /api/v3/output-data, it says how it ended. The attempt must be RUNNING
// and waiting for the call; the first call wins, and a repeat returns it.
func (s *Server) putStepCompletion(w http.ResponseWriter, r *http.Request) error {
	var body completion.Request
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	var problems []string
	if body.WorkflowID == "" || body.StepID == "" || body.InstanceID <= 0 || body.RunID <= 0 || body.AttemptID <= 0 || body.UUID == "" {
		problems = append(problems, "workflow_id, workflow_instance_id, workflow_run_id, step_id, step_attempt_id and step_instance_uuid are required")
	}
	body.State = strings.ToUpper(strings.TrimSpace(body.State))
	if !slices.Contains(completion.States, body.State) {
		problems = append(problems, "state: want one of "+strings.Join(completion.States, ", "))
	}
	if len(body.Message) > 4096 {
		problems = append(problems, "message: at most 4096 characters")
	}
	if _, err := uuid.Parse(body.UUID); body.UUID != "" && err != nil {
		problems = append(problems, "step_instance_uuid: not a UUID")
	}
	for _, v := range []string{body.WorkflowID, body.StepID, body.Message} {
		if strings.ContainsRune(v, 0) {
			problems = append(problems, "workflow_id, step_id and message may not contain NUL characters")
			break
		}
	}
	if len(problems) > 0 {
		return badRequest("invalid step completion", problems...)
	}
	if err := s.checkStepToken(r, body.UUID, body.StepToken); err != nil {
		return err
	}
	got, err := completion.NewStore(s.cfg.DB).Complete(r.Context(), body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"workflow_id": body.WorkflowID, "workflow_instance_id": body.InstanceID, "workflow_run_id": body.RunID,
		"step_id": body.StepID, "step_attempt_id": body.AttemptID, "state": got.State, "message": got.Message,
	})
	return nil
}

// checkStepToken refuses a callback without the attempt's step token
// (completion.TokenHeader, else the body's step_token): the
// step_instance_uuid is readable by every caller and proves nothing
// (docs/security.md, "Step callbacks").
func (s *Server) checkStepToken(r *http.Request, stepUUID, bodyToken string) error {
	token := r.Header.Get(completion.TokenHeader)
	if token == "" {
		token = bodyToken
	}
	if err := s.stepTokens.Verify(r.Context(), stepUUID, token); err != nil {
		// completion.ErrBadToken answers 403 (sentinels).
		return fmt.Errorf("%w; only the attempt's job receives its step token", err)
	}
	return nil
}
