package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
)

// Instance is the API view of a workflow instance run.
type Instance struct {
	WorkflowID      string                  `json:"workflow_id"`
	InstanceID      int64                   `json:"workflow_instance_id"`
	RunID           int64                   `json:"workflow_run_id"`
	Version         int64                   `json:"workflow_version_id"`
	UUID            string                  `json:"workflow_uuid"`
	RequestID       *string                 `json:"request_id,omitempty"`
	Status          instance.WorkflowStatus `json:"status"`
	Initiator       json.RawMessage         `json:"initiator"`
	RunParams       json.RawMessage         `json:"run_params"`
	Params          json.RawMessage         `json:"params"`
	Timeline        json.RawMessage         `json:"timeline"`
	RuntimeOverview *RuntimeOverview        `json:"runtime_overview,omitempty"`
	CreateTime      time.Time               `json:"create_time"`
	StartTime       *time.Time              `json:"start_time,omitempty"`
	EndTime         *time.Time              `json:"end_time,omitempty"`
	ModifyTime      time.Time               `json:"modify_time"`
	Definition      json.RawMessage         `json:"runtime_workflow,omitempty"`
	// Queued is true while the run waits for its workflow's run strategy
	// to admit it.
	Queued bool `json:"queued,omitempty"`
	// RunConfig says how the run was started (START or a restart policy).
	RunConfig      json.RawMessage `json:"run_config,omitempty"`
	AggregatedInfo *AggregatedInfo `json:"aggregated_info,omitempty"`

	groupID int32
}

// RuntimeOverview counts a run's steps by the status of their latest
// attempt.
type RuntimeOverview struct {
	TotalStepCount int                           `json:"total_step_count"`
	StepOverview   map[instance.StepStatus]int64 `json:"step_overview"`
	// RollupOverview counts leaf steps across nested child runs and
	// earlier runs (docs/rollup.md); only Detail fills it.
	RollupOverview *RollupOverview `json:"rollup_overview,omitempty"`
}

const instanceSelect = `SELECT workflow_id, instance_id, run_id, workflow_version, uuid::text, request_id, status,
    initiator, run_params, params, timeline, create_time, start_time, end_time, modify_time, definition, group_id,
    queued, run_config
    FROM workflow_instance`

func scanInstance(r pgx.Row) (*Instance, error) {
	var i Instance
	err := r.Scan(&i.WorkflowID, &i.InstanceID, &i.RunID, &i.Version, &i.UUID, &i.RequestID, &i.Status,
		&i.Initiator, &i.RunParams, &i.Params, &i.Timeline, &i.CreateTime, &i.StartTime, &i.EndTime, &i.ModifyTime,
		&i.Definition, &i.groupID, &i.Queued, &i.RunConfig)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &i, nil
}

// Instance reads one run with its step overview; run 0 means the latest.
func (s *Service) Instance(ctx context.Context, workflowID string, instanceID, run int64) (*Instance, error) {
	q := instanceSelect + ` WHERE workflow_id = $1 AND instance_id = $2 AND ($3::bigint = 0 OR run_id = $3::bigint) ORDER BY run_id DESC LIMIT 1`
	inst, err := scanInstance(s.db.QueryRow(ctx, q, workflowID, instanceID, run))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("workflow instance %s/%d run %d: %w", workflowID, instanceID, run, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read workflow instance %s/%d: %w", workflowID, instanceID, err)
	}
	rows, err := s.db.Query(ctx, `SELECT status, count(*) FROM (
            SELECT DISTINCT ON (step_id) status FROM step_instance
            WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
            ORDER BY step_id, attempt_id DESC) latest GROUP BY status`, workflowID, instanceID, inst.RunID)
	if err != nil {
		return nil, fmt.Errorf("count steps: %w", err)
	}
	defer rows.Close()
	ov := &RuntimeOverview{StepOverview: map[instance.StepStatus]int64{}}
	for rows.Next() {
		var st instance.StepStatus
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count steps: %w", err)
		}
		ov.StepOverview[st] = n
		ov.TotalStepCount += int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count steps: %w", err)
	}
	inst.RuntimeOverview = ov
	return inst, nil
}

// Detail reads one run like Instance, with the aggregated view of all the
// instance's runs up to it and the run's rollup (what the REST read
// returns).
func (s *Service) Detail(ctx context.Context, workflowID string, instanceID, run int64) (*Instance, error) {
	inst, err := s.Instance(ctx, workflowID, instanceID, run)
	if err != nil {
		return nil, err
	}
	if inst.AggregatedInfo, err = s.aggregate(ctx, inst); err != nil {
		return nil, err
	}
	if inst.RuntimeOverview.RollupOverview, err = s.Rollup(ctx, inst.WorkflowID, inst.InstanceID, inst.RunID); err != nil {
		return nil, err
	}
	return inst, nil
}

func (s *Service) byRequestID(ctx context.Context, workflowID, requestID string) (*Instance, error) {
	inst, err := scanInstance(s.db.QueryRow(ctx, instanceSelect+` WHERE workflow_id = $1 AND request_id = $2 AND run_id = 1`, workflowID, requestID))
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// Page is one page of a listing; Next is the cursor of the following page,
// absent on the last.
type Page[T any] struct {
	Items []T    `json:"items"`
	Next  *int64 `json:"next_cursor,omitempty"`
}

// MaxListBytes bounds what a listing reads into memory and answers with
// (runs' and attempts' params, outputs and timelines): well below the 6 MB a
// Lambda may answer through API Gateway.
const MaxListBytes = 4 << 20

// size is roughly what the run's JSON takes.
func (i *Instance) size() int {
	return len(i.Initiator) + len(i.RunParams) + len(i.Params) + len(i.Timeline) + len(i.RunConfig) + 512
}

// List returns a workflow's instances (latest run of each), newest first,
// starting below cursor (0 for the first page). A page ends early when it
// holds MaxListBytes; its next cursor goes on from there.
func (s *Service) List(ctx context.Context, workflowID string, cursor int64, limit int) (*Page[*Instance], error) {
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (instance_id) workflow_id, instance_id, run_id, workflow_version, uuid::text,
            request_id, status, initiator, run_params, params, timeline, create_time, start_time, end_time, modify_time,
            NULL::jsonb, group_id, queued, run_config
        FROM workflow_instance WHERE workflow_id = $1 AND ($2::bigint = 0 OR instance_id < $2::bigint)
        ORDER BY instance_id DESC, run_id DESC LIMIT $3`, workflowID, cursor, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	defer rows.Close()
	page := &Page[*Instance]{Items: []*Instance{}}
	size := 0
	for rows.Next() {
		inst, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list instances: %w", err)
		}
		page.Items = append(page.Items, inst)
		// A page ends early once it holds MaxListBytes: runs may carry
		// up to 750 KB of params each.
		if size += inst.size(); size > MaxListBytes && len(page.Items) <= limit {
			limit = len(page.Items)
			rows.Close()
			page.Items = append(page.Items, nil) // there is more
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		next := page.Items[limit-1].InstanceID
		page.Next = &next
	}
	return page, nil
}

// StepAttempt is the API view of one step attempt.
type StepAttempt struct {
	WorkflowID   string              `json:"workflow_id"`
	InstanceID   int64               `json:"workflow_instance_id"`
	RunID        int64               `json:"workflow_run_id"`
	StepID       string              `json:"step_id"`
	AttemptID    int64               `json:"step_attempt_id"`
	UUID         string              `json:"step_instance_uuid"`
	Type         string              `json:"step_type"`
	Status       instance.StepStatus `json:"status"`
	Params       json.RawMessage     `json:"params"`
	Outputs      json.RawMessage     `json:"outputs"`
	RuntimeState json.RawMessage     `json:"runtime_state"`
	RetryInfo    json.RawMessage     `json:"step_retry"`
	Timeline     json.RawMessage     `json:"timeline"`
	CreateTime   time.Time           `json:"create_time"`
	StartTime    *time.Time          `json:"start_time,omitempty"`
	EndTime      *time.Time          `json:"end_time,omitempty"`
	ModifyTime   time.Time           `json:"modify_time"`
	// DetailOmitted is set in a step list once the list holds MaxListBytes:
	// this attempt's params, outputs, runtime state and timeline are left
	// out (null); read the attempt itself for them.
	DetailOmitted bool `json:"detail_omitted,omitempty"`
}

// omitDetail drops the attempt's large fields.
func (a *StepAttempt) omitDetail() {
	a.Params, a.Outputs, a.RuntimeState, a.Timeline = nil, nil, nil, nil
	a.DetailOmitted = true
}

const stepSelect = `SELECT workflow_id, instance_id, run_id, step_id, attempt_id, uuid::text, step_type, status,
    params, outputs, runtime_state, retry, timeline, create_time, start_time, end_time, modify_time FROM step_instance`

func scanStep(r pgx.Row) (*StepAttempt, error) {
	var a StepAttempt
	err := r.Scan(&a.WorkflowID, &a.InstanceID, &a.RunID, &a.StepID, &a.AttemptID, &a.UUID, &a.Type, &a.Status,
		&a.Params, &a.Outputs, &a.RuntimeState, &a.RetryInfo, &a.Timeline, &a.CreateTime, &a.StartTime, &a.EndTime, &a.ModifyTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return &a, err
}

// Steps returns the latest attempt of every step of a run, in step id order.
// Once the list holds MaxListBytes, the rest come without their detail
// (StepAttempt.DetailOmitted).
func (s *Service) Steps(ctx context.Context, workflowID string, instanceID, run int64) ([]*StepAttempt, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (step_id) * FROM (`+stepSelect+`
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3) s ORDER BY step_id, attempt_id DESC`,
		workflowID, instanceID, run)
	if err != nil {
		return nil, fmt.Errorf("list steps: %w", err)
	}
	defer rows.Close()
	out := []*StepAttempt{}
	size := 0
	for rows.Next() {
		a, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("list steps: %w", err)
		}
		if size += len(a.Params) + len(a.Outputs) + len(a.RuntimeState) + len(a.Timeline) + 512; size > MaxListBytes {
			a.omitDetail()
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Attempt reads one attempt of a step; attempt 0 means the latest.
func (s *Service) Attempt(ctx context.Context, workflowID string, instanceID, run int64, stepID string, attempt int64) (*StepAttempt, error) {
	a, err := scanStep(s.db.QueryRow(ctx, stepSelect+` WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
        AND step_id = $4 AND ($5::bigint = 0 OR attempt_id = $5::bigint) ORDER BY attempt_id DESC LIMIT 1`,
		workflowID, instanceID, run, stepID, attempt))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("step %s attempt %d of %s/%d/%d: %w", stepID, attempt, workflowID, instanceID, run, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read step attempt: %w", err)
	}
	return a, nil
}
