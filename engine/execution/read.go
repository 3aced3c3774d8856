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

// Instance is a workflow instance run as the store reads it, with what
// the engine keeps beside Maestro's shape (group, parent, definition);
// engine/api renders it as wire.WorkflowInstance, the one declaration of
// that JSON shape.
type Instance struct {
	WorkflowID      string
	InstanceID      int64
	RunID           int64
	Version         int64
	UUID            string
	RequestID       *string
	Status          instance.WorkflowStatus
	Initiator       json.RawMessage
	RunParams       json.RawMessage
	Params          json.RawMessage
	Timeline        json.RawMessage
	RuntimeOverview *RuntimeOverview
	CreateTime      time.Time
	StartTime       *time.Time
	EndTime         *time.Time
	ModifyTime      time.Time
	Definition      json.RawMessage
	// Queued is true while the run waits for its workflow's run strategy
	// to admit it.
	Queued bool
	// RunConfig says how the run was started (START or a restart policy).
	RunConfig      json.RawMessage
	AggregatedInfo *AggregatedInfo
	// GroupID is the run's flow group.
	GroupID int32
	// TimeoutSeconds is the run's timeout (0: none).
	TimeoutSeconds int64
	// Parent is the run's parent (a subworkflow, foreach or while step)
	// as the engine records it; nil for a top-level run.
	Parent json.RawMessage
	// Artifacts are those the start request gave the run (Maestro's
	// WorkflowInstance.artifacts); nil when it gave none.
	Artifacts json.RawMessage

	groupID int32
}

// RuntimeOverview counts a run's steps by the status of their latest
// attempt.
type RuntimeOverview struct {
	TotalStepCount int
	StepOverview   map[instance.StepStatus]int64
	// RollupOverview counts leaf steps across nested child runs and
	// earlier runs (docs/rollup.md); only Detail fills it.
	RollupOverview *RollupOverview
	// Steps are the run's steps with the status and times of their latest
	// attempt, in step id order.
	Steps []StepSummary
}

// StepSummary is the latest attempt of one step of a run.
type StepSummary struct {
	StepID    string
	Status    instance.StepStatus
	StartTime *time.Time
	EndTime   *time.Time
}

const instanceSelect = `SELECT workflow_id, instance_id, run_id, workflow_version, uuid::text, request_id, status,
    initiator, run_params, params, timeline, create_time, start_time, end_time, modify_time, definition, group_id,
    queued, run_config, timeout_seconds, parent, artifacts
    FROM workflow_instance`

func scanInstance(r pgx.Row) (*Instance, error) {
	var i Instance
	err := r.Scan(&i.WorkflowID, &i.InstanceID, &i.RunID, &i.Version, &i.UUID, &i.RequestID, &i.Status,
		&i.Initiator, &i.RunParams, &i.Params, &i.Timeline, &i.CreateTime, &i.StartTime, &i.EndTime, &i.ModifyTime,
		&i.Definition, &i.groupID, &i.Queued, &i.RunConfig, &i.TimeoutSeconds, &i.Parent, &i.Artifacts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	i.GroupID = i.groupID
	return &i, nil
}

// runName names a run in messages; run 0 (the latest) names the instance,
// not a run 0 that never exists.
func runName(workflowID string, instanceID, run int64) string {
	if run == 0 {
		return fmt.Sprintf("workflow instance %s/%d", workflowID, instanceID)
	}
	return fmt.Sprintf("run %d of workflow instance %s/%d", run, workflowID, instanceID)
}

// Run reads one run without its step overview; run 0 means the latest.
func (s *Service) Run(ctx context.Context, workflowID string, instanceID, run int64) (*Instance, error) {
	q := instanceSelect + ` WHERE workflow_id = $1 AND instance_id = $2 AND ($3::bigint = 0 OR run_id = $3::bigint) ORDER BY run_id DESC LIMIT 1`
	inst, err := scanInstance(s.db.QueryRow(ctx, q, workflowID, instanceID, run))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", runName(workflowID, instanceID, run), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read workflow instance %s/%d: %w", workflowID, instanceID, err)
	}
	return inst, nil
}

// Instance reads one run with its step overview; run 0 means the latest.
func (s *Service) Instance(ctx context.Context, workflowID string, instanceID, run int64) (*Instance, error) {
	inst, err := s.Run(ctx, workflowID, instanceID, run)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (step_id) step_id, status, start_time, end_time FROM step_instance
            WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
            ORDER BY step_id, attempt_id DESC`, workflowID, instanceID, inst.RunID)
	if err != nil {
		return nil, fmt.Errorf("count steps: %w", err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StepSummary, error) {
		var st StepSummary
		err := r.Scan(&st.StepID, &st.Status, &st.StartTime, &st.EndTime)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("count steps: %w", err)
	}
	ov := &RuntimeOverview{StepOverview: map[instance.StepStatus]int64{}, Steps: steps}
	for _, st := range steps {
		ov.StepOverview[st.Status]++
		ov.TotalStepCount++
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

// MaxListBytes bounds what a listing reads into memory and answers with
// (runs' and attempts' params, outputs and timelines): well below the 6 MB a
// Lambda may answer through API Gateway.
const MaxListBytes = 4 << 20

// size is roughly what the run's JSON takes.
func (i *Instance) size() int {
	return len(i.Initiator) + len(i.RunParams) + len(i.Params) + len(i.Timeline) + len(i.RunConfig) + len(i.Artifacts) + 512
}

// StepAttempt is the API view of one step attempt.
type StepAttempt struct {
	WorkflowID   string
	InstanceID   int64
	RunID        int64
	StepID       string
	AttemptID    int64
	UUID         string
	Type         string
	Status       instance.StepStatus
	Params       json.RawMessage
	Outputs      json.RawMessage
	RuntimeState json.RawMessage
	RetryInfo    json.RawMessage
	Timeline     json.RawMessage
	CreateTime   time.Time
	StartTime    *time.Time
	EndTime      *time.Time
	ModifyTime   time.Time
	// Artifacts are those an external job sent with its output data.
	Artifacts json.RawMessage
	// DetailOmitted is set in a step list once the list holds MaxListBytes:
	// this attempt's params, outputs, runtime state and timeline are left
	// out (null); read the attempt itself for them.
	DetailOmitted bool
}

// omitDetail drops the attempt's large fields.
func (a *StepAttempt) omitDetail() {
	a.Params, a.Outputs, a.RuntimeState, a.Timeline, a.Artifacts = nil, nil, nil, nil, nil
	a.DetailOmitted = true
}

const stepSelect = `SELECT workflow_id, instance_id, run_id, step_id, attempt_id, uuid::text, step_type, status,
    params, outputs, runtime_state, retry, timeline, create_time, start_time, end_time, modify_time,
    (SELECT o.artifacts FROM step_output_data o WHERE o.step_uuid = step_instance.uuid) AS artifacts FROM step_instance`

func scanStep(r pgx.Row) (*StepAttempt, error) {
	var a StepAttempt
	err := r.Scan(&a.WorkflowID, &a.InstanceID, &a.RunID, &a.StepID, &a.AttemptID, &a.UUID, &a.Type, &a.Status,
		&a.Params, &a.Outputs, &a.RuntimeState, &a.RetryInfo, &a.Timeline, &a.CreateTime, &a.StartTime, &a.EndTime, &a.ModifyTime,
		&a.Artifacts)
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
	return collectSteps(rows)
}

// collectSteps reads step attempts; once they hold MaxListBytes, the rest
// come without their detail (StepAttempt.DetailOmitted).
func collectSteps(rows pgx.Rows) ([]*StepAttempt, error) {
	defer rows.Close()
	out := []*StepAttempt{}
	size := 0
	for rows.Next() {
		a, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("list steps: %w", err)
		}
		if size += len(a.Params) + len(a.Outputs) + len(a.RuntimeState) + len(a.Timeline) + len(a.Artifacts) + 512; size > MaxListBytes {
			a.omitDetail()
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list steps: %w", err)
	}
	return out, nil
}

// Attempt reads one attempt of a step; attempt 0 means the latest.
func (s *Service) Attempt(ctx context.Context, workflowID string, instanceID, run int64, stepID string, attempt int64) (*StepAttempt, error) {
	a, err := scanStep(s.db.QueryRow(ctx, stepSelect+` WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
        AND step_id = $4 AND ($5::bigint = 0 OR attempt_id = $5::bigint) ORDER BY attempt_id DESC LIMIT 1`,
		workflowID, instanceID, run, stepID, attempt))
	if errors.Is(err, ErrNotFound) {
		what := fmt.Sprintf("attempt %d of step %s", attempt, stepID)
		if attempt == 0 {
			what = "step " + stepID
		}
		return nil, fmt.Errorf("%s of %s: %w", what, runName(workflowID, instanceID, run), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read step attempt: %w", err)
	}
	return a, nil
}

// Bounds are the lowest and highest ids of a range (instance ids of a
// workflow, run ids of an instance); both are 0 when there is none.
type Bounds struct{ Low, High int64 }

// InstanceBounds returns the lowest and highest instance ids of a workflow.
func (s *Service) InstanceBounds(ctx context.Context, workflowID string) (Bounds, error) {
	var b Bounds
	err := s.db.QueryRow(ctx, `SELECT coalesce(min(instance_id), 0), coalesce(max(instance_id), 0)
        FROM workflow_instance WHERE workflow_id = $1`, workflowID).Scan(&b.Low, &b.High)
	if err != nil {
		return b, fmt.Errorf("read instance ids of %s: %w", workflowID, err)
	}
	return b, nil
}

// RunBounds returns the lowest and highest run ids of an instance.
func (s *Service) RunBounds(ctx context.Context, workflowID string, instanceID int64) (Bounds, error) {
	var b Bounds
	err := s.db.QueryRow(ctx, `SELECT coalesce(min(run_id), 0), coalesce(max(run_id), 0)
        FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2`, workflowID, instanceID).Scan(&b.Low, &b.High)
	if err != nil {
		return b, fmt.Errorf("read run ids of %s/%d: %w", workflowID, instanceID, err)
	}
	return b, nil
}

// collectInstances reads runs, newest first, without their definitions
// (listings stay small), ending early once they hold MaxListBytes.
func collectInstances(rows pgx.Rows) ([]*Instance, error) {
	defer rows.Close()
	out := []*Instance{}
	size := 0
	for rows.Next() {
		inst, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, inst)
		if size += inst.size(); size > MaxListBytes {
			break
		}
	}
	return out, rows.Err()
}

// InstancesBetween returns the latest run of each instance with an id from
// low to high, newest first, without definitions. It ends early once the
// runs read hold MaxListBytes.
func (s *Service) InstancesBetween(ctx context.Context, workflowID string, low, high int64) ([]*Instance, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (instance_id) workflow_id, instance_id, run_id, workflow_version,
            uuid::text, request_id, status, initiator, run_params, params, timeline, create_time, start_time, end_time,
            modify_time, NULL::jsonb, group_id, queued, run_config, timeout_seconds, parent, artifacts
        FROM workflow_instance WHERE workflow_id = $1 AND instance_id BETWEEN $2 AND $3
        ORDER BY instance_id DESC, run_id DESC`, workflowID, low, high)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", workflowID, err)
	}
	out, err := collectInstances(rows)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", workflowID, err)
	}
	return out, nil
}

// RunsBetween returns an instance's runs with ids from low to high, newest
// first, without definitions, ending early once they hold MaxListBytes.
func (s *Service) RunsBetween(ctx context.Context, workflowID string, instanceID, low, high int64) ([]*Instance, error) {
	rows, err := s.db.Query(ctx, `SELECT workflow_id, instance_id, run_id, workflow_version,
            uuid::text, request_id, status, initiator, run_params, params, timeline, create_time, start_time, end_time,
            modify_time, NULL::jsonb, group_id, queued, run_config, timeout_seconds, parent, artifacts
        FROM workflow_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id BETWEEN $3 AND $4
        ORDER BY run_id DESC`, workflowID, instanceID, low, high)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s/%d: %w", workflowID, instanceID, err)
	}
	out, err := collectInstances(rows)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s/%d: %w", workflowID, instanceID, err)
	}
	return out, nil
}

// LatestSteps returns the newest attempt of each step of an instance
// across all its runs (of stepID only, when it is not ""), in step id
// order; the detail of attempts past MaxListBytes is omitted.
func (s *Service) LatestSteps(ctx context.Context, workflowID string, instanceID int64, stepID string) ([]*StepAttempt, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (step_id) * FROM (`+stepSelect+`
        WHERE workflow_id = $1 AND instance_id = $2 AND ($3 = '' OR step_id = $3)) s
        ORDER BY step_id, run_id DESC, attempt_id DESC`, workflowID, instanceID, stepID)
	if err != nil {
		return nil, fmt.Errorf("list steps of %s/%d: %w", workflowID, instanceID, err)
	}
	return collectSteps(rows)
}
