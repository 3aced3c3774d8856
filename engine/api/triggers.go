package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// timeTriggerRoutes registers the time trigger endpoints (docs/triggers.md).
func (s *Server) timeTriggerRoutes() {
	s.handle("GET /api/v3/workflows/{id}/time-triggers", s.listTimeTriggers)
	s.handle("POST /api/v3/time-triggers/preview", s.previewTimeTrigger)
}

// listTimeTriggers answers a workflow's time triggers (those of its active
// version) with their states, next fire times and last fired runs.
func (s *Server) listTimeTriggers(w http.ResponseWriter, r *http.Request) error {
	return listWorkflowTriggers(s, w, r, "time_triggers", trigger.List)
}

// listWorkflowTriggers answers {"workflow_id", key: list(workflow)}: 404
// for an unknown workflow, an empty list for one without such triggers.
func listWorkflowTriggers[T any](s *Server, w http.ResponseWriter, r *http.Request, key string,
	list func(ctx context.Context, db trigger.Querier, workflowID string) ([]T, error)) error {
	id := r.PathValue("id")
	ok, err := s.cfg.Definitions.Exists(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(fmt.Sprintf("workflow %s does not exist", id))
	}
	ts, err := list(r.Context(), s.cfg.DB, id)
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []T{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflow_id": id, key: ts})
	return nil
}

// Preview limits.
const (
	defaultPreviewCount = 10
	maxPreviewCount     = 100
)

type previewBody struct {
	TimeTrigger json.RawMessage `json:"time_trigger"`
	// Count is how many fire times to list (default 10, at most 100).
	Count *int `json:"count"`
	// After lists the fire times after this time (RFC 3339; default now).
	After string `json:"after"`
	// WorkflowID salts the fuzzy delay as the workflow's trigger would be.
	WorkflowID string `json:"workflow_id"`
}

type previewResult struct {
	TimeTrigger  json.RawMessage `json:"time_trigger"`
	Timezone     string          `json:"timezone"`
	TriggerKey   string          `json:"trigger_key"`
	DelaySeconds int             `json:"fuzzy_delay_seconds"`
	FireTimes    []string        `json:"fire_times"`
}

// previewTimeTrigger lists the next fire times of a time trigger, checked
// as a definition's would be; the times are in the trigger's zone.
func (s *Server) previewTimeTrigger(w http.ResponseWriter, r *http.Request) error {
	var body previewBody
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	count := defaultPreviewCount
	if body.Count != nil {
		if *body.Count < 1 || *body.Count > maxPreviewCount {
			return badRequest(fmt.Sprintf("count must be 1 to %d", maxPreviewCount))
		}
		count = *body.Count
	}
	after := time.Now()
	if body.After != "" {
		t, err := time.Parse(time.RFC3339Nano, body.After)
		if err != nil {
			return badRequest("after must be an RFC 3339 time such as 2024-05-01T00:00:00Z")
		}
		after = t
	}
	tt, err := decodeTimeTrigger(body.TimeTrigger)
	if err != nil {
		return err
	}
	c, err := schedule.Compile(tt.ScheduleTrigger())
	if err != nil {
		return badRequest("invalid time trigger", "time_trigger: "+err.Error())
	}
	res := previewResult{Timezone: c.TimezoneName(), TriggerKey: c.Key(),
		DelaySeconds: int(c.Delay(body.WorkflowID) / time.Second), FireTimes: []string{}}
	if res.TimeTrigger, err = json.Marshal(tt); err != nil {
		return err
	}
	for _, f := range c.Preview(body.WorkflowID, after, count) {
		res.FireTimes = append(res.FireTimes, f.In(c.Location).Format(time.RFC3339))
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// previewPath is where a previewed trigger sits in the definition it is
// checked as.
const previewPath = "workflow.time_triggers[0]"

// decodeTimeTrigger decodes and checks a time trigger exactly as the same
// trigger in a pushed definition, with the problems' paths relative to
// time_trigger.
func decodeTimeTrigger(raw json.RawMessage) (*workflow.TimeTrigger, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("time_trigger is required")
	}
	doc := `{"workflow":{"id":"preview","time_triggers":[` + string(raw) + `],"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`
	d, err := workflow.DecodeJSON([]byte(doc))
	if err == nil {
		err = (workflow.Validator{}).Validate(d)
	}
	var ve *workflow.ValidationError
	if errors.As(err, &ve) {
		details := make([]string, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			path := strings.Replace(p.Path, previewPath, "time_trigger", 1)
			if !strings.HasPrefix(path, "time_trigger") {
				path = "time_trigger"
			}
			details = append(details, path+": "+p.Message)
		}
		return nil, badRequest("invalid time trigger", details...)
	}
	if err != nil {
		return nil, badRequest("invalid time trigger", "time_trigger: "+err.Error())
	}
	if len(d.Workflow.TimeTriggers) != 1 {
		return nil, badRequest("time_trigger must be one JSON object")
	}
	return &d.Workflow.TimeTriggers[0], nil
}
