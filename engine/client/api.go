package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Push stores a definition (JSON, or YAML when yaml is set) as a new
// version; validateOnly checks it and stores nothing (the answer then has
// only the workflow id).
func (c *Client) Push(ctx context.Context, def []byte, yaml, validateOnly bool) (*Version, error) {
	path, method := "/api/v3/workflows", http.MethodPost
	if validateOnly {
		path, method = "/api/v3/workflows/actions/validate", http.MethodPut
	}
	var body any = json.RawMessage(def)
	if yaml {
		path += "/yaml"
		body = yamlBody(def)
	}
	raw, err := c.Do(ctx, method, path, nil, body)
	if err != nil {
		return nil, err
	}
	return decodeVersion(raw)
}

// ListWorkflows lists workflows whose id, name or description holds text.
func (c *Client) ListWorkflows(ctx context.Context, text, cursor string, limit int) (*WorkflowPage, error) {
	q := url.Values{}
	if text != "" {
		q.Set("q", text)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	raw, err := c.get(ctx, "/api/v3/workflows", q, nil)
	if err != nil {
		return nil, err
	}
	return decodeWorkflowPage(raw)
}

// Overview reads a workflow's overview.
func (c *Client) Overview(ctx context.Context, workflowID string) (*Overview, error) {
	raw, err := c.get(ctx, "/api/v3/workflows/"+seg(workflowID)+"/overview", nil, nil)
	if err != nil {
		return nil, err
	}
	return decodeOverview(raw)
}

// Version reads a version of a workflow ("latest", "active", "default" or
// a number).
func (c *Client) Version(ctx context.Context, workflowID, version string) (*Version, error) {
	raw, err := c.get(ctx, "/api/v3/workflows/"+seg(workflowID)+"/versions/"+seg(version), nil, nil)
	if err != nil {
		return nil, err
	}
	return decodeVersion(raw)
}

// StartRequest starts a run.
type StartRequest struct {
	WorkflowID string
	// Version is "default" when empty.
	Version string
	// RunParams are Maestro run params: name → {"value"|"expression", "type"}.
	RunParams map[string]any
	// RequestID makes a repeated start a duplicate.
	RequestID string
}

// Start starts a run of a workflow.
func (c *Client) Start(ctx context.Context, r StartRequest) (*StartResult, error) {
	v := r.Version
	if v == "" {
		v = "default"
	}
	body := map[string]any{}
	if len(r.RunParams) > 0 {
		body["run_params"] = r.RunParams
	}
	if r.RequestID != "" {
		body["request_id"] = r.RequestID
	}
	raw, err := c.Do(ctx, http.MethodPost, "/api/v3/workflows/"+seg(r.WorkflowID)+"/versions/"+seg(v)+"/actions/start", nil, body)
	if err != nil {
		return nil, err
	}
	return decodeStart(raw)
}

// Instances lists a workflow's instances (each its latest run), newest
// first.
func (c *Client) Instances(ctx context.Context, workflowID string, limit int) ([]*Run, json.RawMessage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	raw, err := c.get(ctx, "/api/v3/workflows/"+seg(workflowID)+"/instances", q, nil)
	if err != nil {
		return nil, nil, err
	}
	runs, err := decodeRuns(raw)
	return runs, raw, err
}

// Run reads a run of an instance; run 0 is the latest.
func (c *Client) Run(ctx context.Context, workflowID string, instanceID, run int64) (*Run, error) {
	path := runPath(workflowID, instanceID, run)
	raw, err := c.get(ctx, path, nil, nil)
	if err != nil {
		return nil, err
	}
	return decodeRun(raw)
}

func runPath(workflowID string, instanceID, run int64) string {
	p := fmt.Sprintf("/api/v3/workflows/%s/instances/%d", seg(workflowID), instanceID)
	if run > 0 {
		p += fmt.Sprintf("/runs/%d", run)
	}
	return p
}

// Steps reads the latest attempt of each step of a run.
func (c *Client) Steps(ctx context.Context, workflowID string, instanceID, run int64) ([]*Step, json.RawMessage, error) {
	raw, err := c.get(ctx, runPath(workflowID, instanceID, run)+"/steps", nil, nil)
	if err != nil {
		return nil, nil, err
	}
	steps, err := decodeSteps(raw)
	return steps, raw, err
}

// RunWithSteps reads a run (0: the latest) and its steps.
func (c *Client) RunWithSteps(ctx context.Context, workflowID string, instanceID, run int64) (*Run, []*Step, json.RawMessage, error) {
	r, err := c.Run(ctx, workflowID, instanceID, run)
	if err != nil {
		return nil, nil, nil, err
	}
	steps, raw, err := c.Steps(ctx, workflowID, instanceID, r.RunID)
	return r, steps, raw, err
}

// Act stops or kills an instance's current run ("stop" or "kill").
func (c *Client) Act(ctx context.Context, workflowID string, instanceID int64, action string) (json.RawMessage, error) {
	return c.Do(ctx, http.MethodPut, fmt.Sprintf("/api/v3/workflows/%s/instances/%d/actions/%s", seg(workflowID), instanceID, action), nil, nil)
}

// RestartRequest restarts an instance.
type RestartRequest struct {
	WorkflowID string
	InstanceID int64
	// Policy is Maestro's restart policy (RESTART_FROM_INCOMPLETE when
	// empty); FromStep restarts from that step (RESTART_FROM_SPECIFIC).
	Policy   string
	FromStep string
}

// Restart starts the instance's next run.
func (c *Client) Restart(ctx context.Context, r RestartRequest) (*StartResult, error) {
	body := map[string]any{}
	switch {
	case r.FromStep != "":
		body["restart_config"] = map[string]any{"restart_policy": "RESTART_FROM_SPECIFIC",
			"restart_path": []map[string]any{{"workflow_id": r.WorkflowID, "instance_id": r.InstanceID, "step_id": r.FromStep}}}
	case r.Policy != "":
		body["restart_policy"] = r.Policy
	}
	raw, err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v3/workflows/%s/instances/%d/actions/restart", seg(r.WorkflowID), r.InstanceID), nil, body)
	if err != nil {
		return nil, err
	}
	return decodeStart(raw)
}

// SignalResult is the answer to a signal announcement.
type SignalResult struct {
	Name  string
	SeqID int64
	// Duplicated is true when the request id was announced before.
	Duplicated bool
	Raw        json.RawMessage
}

// SendSignal announces a signal with its params.
func (c *Client) SendSignal(ctx context.Context, name string, params map[string]any, requestID string) (*SignalResult, error) {
	body := map[string]any{"name": name}
	if len(params) > 0 {
		body["params"] = params
	}
	if requestID != "" {
		body["request_id"] = requestID
	}
	raw, err := c.Do(ctx, http.MethodPost, "/api/v3/signals", nil, body)
	if err != nil {
		return nil, err
	}
	return decodeSignal(raw)
}

// Preview is the next fire times of a time trigger.
type Preview struct {
	Timezone  string   `json:"timezone"`
	FireTimes []string `json:"fire_times"`
	Raw       json.RawMessage
}

// PreviewTrigger lists the next count fire times of a time trigger (a
// Maestro time trigger object, e.g. {"cron": "0 * * * *", "timezone": "UTC"}).
func (c *Client) PreviewTrigger(ctx context.Context, trigger json.RawMessage, count int, after time.Time) (*Preview, error) {
	body := map[string]any{"time_trigger": trigger}
	if count > 0 {
		body["count"] = count
	}
	if !after.IsZero() {
		body["after"] = after.UTC().Format(time.RFC3339)
	}
	raw, err := c.Do(ctx, http.MethodPost, "/api/v3/time-triggers/preview", nil, body)
	if err != nil {
		return nil, err
	}
	var p Preview
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decode preview: %w", err)
	}
	p.Raw = raw
	return &p, nil
}

// ArchivedRun reads the archive's whole record of a run the retention
// archiver moved out of the database (GET .../instances/{iid}/archive): run
// 0 is the latest archived run of the instance.
func (c *Client) ArchivedRun(ctx context.Context, workflowID string, instanceID, run int64) (json.RawMessage, error) {
	q := url.Values{}
	if run > 0 {
		q.Set("run", strconv.FormatInt(run, 10))
	}
	return c.get(ctx, fmt.Sprintf("/api/v3/workflows/%s/instances/%d/archive", seg(workflowID), instanceID), q, nil)
}
