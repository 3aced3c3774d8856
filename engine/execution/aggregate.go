package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
)

// AggregatedInfo merges every run of a workflow instance up to the one
// read, as Maestro's aggregated view does: each step shows its status in
// the latest run that ran it. A step a restart carried over keeps the run
// that did the work; a step the latest run has not reached keeps its
// status from an earlier run.
type AggregatedInfo struct {
	StepAggregatedViews map[string]StepAggregatedView
	// WorkflowInstanceStatus is the instance's status derived from the
	// view: the latest run's while it is live; once it ended, SUCCEEDED
	// when every step completed, FAILED when a step failed, STOPPED when
	// steps were only stopped, else the latest run's.
	WorkflowInstanceStatus instance.WorkflowStatus
}

// StepAggregatedView is one step in the aggregated view.
type StepAggregatedView struct {
	Status        instance.StepStatus
	WorkflowRunID int64
	StepAttemptID int64
	StartTime     *time.Time
	EndTime       *time.Time
}

const aggregatedStepsSQL = `
SELECT DISTINCT ON (run_id, step_id) run_id, step_id, attempt_id, status,
    (runtime_state->'carried_from'->>'workflow_run_id')::bigint, start_time, end_time
FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id <= $3
ORDER BY run_id, step_id, attempt_id DESC`

// notCreated is the aggregated status of a step no run has created.
const notCreated instance.StepStatus = "NOT_CREATED"

// Aggregate returns the aggregated view of an instance's runs up to inst.
func (s *Service) Aggregate(ctx context.Context, inst *Instance) (*AggregatedInfo, error) {
	return s.aggregate(ctx, inst)
}

func (s *Service) aggregate(ctx context.Context, inst *Instance) (*AggregatedInfo, error) {
	rows, err := s.db.Query(ctx, aggregatedStepsSQL, inst.WorkflowID, inst.InstanceID, inst.RunID)
	if err != nil {
		return nil, fmt.Errorf("aggregate steps: %w", err)
	}
	defer rows.Close()
	views := map[string]StepAggregatedView{}
	for rows.Next() {
		var (
			run, attempt int64
			step         string
			status       instance.StepStatus
			carriedFrom  *int64
			start, end   *time.Time
		)
		if err := rows.Scan(&run, &step, &attempt, &status, &carriedFrom, &start, &end); err != nil {
			return nil, fmt.Errorf("aggregate steps: %w", err)
		}
		if prev, seen := views[step]; seen && carriedFrom != nil && prev.Status == status {
			continue // carried over: the earlier run's entry names the run that did the work
		}
		views[step] = StepAggregatedView{Status: status, WorkflowRunID: run, StepAttemptID: attempt, StartTime: start, EndTime: end}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("aggregate steps: %w", err)
	}
	// Only the top-level step ids are needed: a light decode, not the
	// validating one of package workflow.
	var wf struct {
		Steps []map[string]struct {
			ID string `json:"id"`
		} `json:"steps"`
	}
	if len(inst.Definition) > 0 && json.Unmarshal(inst.Definition, &wf) == nil {
		for _, wrapper := range wf.Steps {
			for _, n := range wrapper {
				if _, ok := views[n.ID]; !ok && n.ID != "" {
					views[n.ID] = StepAggregatedView{Status: notCreated}
				}
			}
		}
	}
	return &AggregatedInfo{StepAggregatedViews: views, WorkflowInstanceStatus: aggregateStatus(inst.Status, views)}, nil
}

// aggregateStatus derives the instance status from the aggregated view.
func aggregateStatus(latest instance.WorkflowStatus, views map[string]StepAggregatedView) instance.WorkflowStatus {
	if !latest.IsTerminal() {
		return latest
	}
	complete, stopped := true, false
	for _, v := range views {
		switch {
		case v.Status.IsComplete():
		case v.Status == instance.StepStopped:
			complete, stopped = false, true
		case v.Status.IsTerminal():
			return instance.WorkflowFailed
		default:
			complete = false
		}
	}
	switch {
	case complete && len(views) > 0:
		return instance.WorkflowSucceeded
	case stopped:
		return instance.WorkflowStopped
	}
	return latest
}
