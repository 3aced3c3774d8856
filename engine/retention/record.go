package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
)

// FormatV1 names the record format below; a reader refuses others.
const FormatV1 = "maestro.run.v1"

// Record is one archived run: one JSON line of an archive object. Each row
// is the database row as PostgreSQL's row_to_json writes it (column names,
// jsonb columns as JSON, timestamps in ISO 8601). The run's and its steps'
// timelines are their rows' timeline columns.
type Record struct {
	Format     string    `json:"format"`
	WorkflowID string    `json:"workflow_id"`
	InstanceID int64     `json:"workflow_instance_id"`
	RunID      int64     `json:"workflow_run_id"`
	ArchivedAt time.Time `json:"archived_at"`
	// Run is the workflow_instance row.
	Run json.RawMessage `json:"run"`
	// Steps are the step_instance rows (every attempt), by step and attempt.
	Steps []json.RawMessage `json:"steps"`
	// OutputData and Completions are the step_output_data and
	// step_completion rows of the run's attempts.
	OutputData  []json.RawMessage `json:"step_output_data,omitempty"`
	Completions []json.RawMessage `json:"step_completions,omitempty"`
	// SignalWaits are the step_signal_wait rows (signal dependencies and
	// what met them), Paused the step_paused rows (breakpoints).
	SignalWaits []json.RawMessage `json:"signal_waits,omitempty"`
	Paused      []json.RawMessage `json:"paused_steps,omitempty"`
	// Lineage are the signal_lineage rows naming the run; Signals the
	// signal_instance rows they name (copied: signals are not deleted with
	// runs).
	Lineage []json.RawMessage `json:"signal_lineage,omitempty"`
	Signals []json.RawMessage `json:"signals,omitempty"`
}

// runRow is the part of a workflow_instance row the API renders.
type runRow struct {
	WorkflowID      string          `json:"workflow_id"`
	InstanceID      int64           `json:"instance_id"`
	RunID           int64           `json:"run_id"`
	Version         int64           `json:"workflow_version"`
	UUID            string          `json:"uuid"`
	RequestID       *string         `json:"request_id"`
	Status          string          `json:"status"`
	Initiator       json.RawMessage `json:"initiator"`
	RunParams       json.RawMessage `json:"run_params"`
	Params          json.RawMessage `json:"params"`
	Timeline        json.RawMessage `json:"timeline"`
	CreateTime      time.Time       `json:"create_time"`
	StartTime       *time.Time      `json:"start_time"`
	EndTime         *time.Time      `json:"end_time"`
	ModifyTime      time.Time       `json:"modify_time"`
	Definition      json.RawMessage `json:"definition"`
	GroupID         int32           `json:"group_id"`
	Queued          bool            `json:"queued"`
	RunConfig       json.RawMessage `json:"run_config"`
	TimeoutSeconds  int64           `json:"timeout_seconds"`
	Parent          json.RawMessage `json:"parent"`
	RuntimeOverview json.RawMessage `json:"runtime_overview"`
}

// stepRow is the part of a step_instance row the run's overview needs.
type stepRow struct {
	StepID    string     `json:"step_id"`
	AttemptID int64      `json:"attempt_id"`
	Status    string     `json:"status"`
	StartTime *time.Time `json:"start_time"`
	EndTime   *time.Time `json:"end_time"`
}

// EndTime is when the run ended.
func (r *Record) EndTime() (time.Time, error) {
	var row runRow
	if err := json.Unmarshal(r.Run, &row); err != nil {
		return time.Time{}, fmt.Errorf("retention: archived run %s/%d/%d: %w", r.WorkflowID, r.InstanceID, r.RunID, err)
	}
	if row.EndTime == nil {
		return time.Time{}, fmt.Errorf("retention: archived run %s/%d/%d has no end time", r.WorkflowID, r.InstanceID, r.RunID)
	}
	return *row.EndTime, nil
}

// Instance is the archived run as execution reads a run (without the
// aggregated view of the instance's runs, which an archive does not
// keep), for the API to render in Maestro's shape.
func (r *Record) Instance() (*execution.Instance, error) {
	var row runRow
	if err := json.Unmarshal(r.Run, &row); err != nil {
		return nil, fmt.Errorf("retention: archived run %s/%d/%d: %w", r.WorkflowID, r.InstanceID, r.RunID, err)
	}
	inst := &execution.Instance{
		WorkflowID: row.WorkflowID, InstanceID: row.InstanceID, RunID: row.RunID, Version: row.Version, UUID: row.UUID,
		RequestID: row.RequestID, Status: instance.WorkflowStatus(row.Status), Initiator: row.Initiator,
		RunParams: row.RunParams, Params: row.Params, Timeline: row.Timeline, CreateTime: row.CreateTime,
		StartTime: row.StartTime, EndTime: row.EndTime, ModifyTime: row.ModifyTime, Definition: row.Definition,
		Queued: row.Queued, RunConfig: nullable(row.RunConfig), GroupID: row.GroupID, TimeoutSeconds: row.TimeoutSeconds,
		Parent: nullable(row.Parent),
	}
	// The overview as execution computes it: the latest attempt of each step.
	latest := map[string]stepRow{}
	var order []string
	for _, raw := range r.Steps {
		var s stepRow
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("retention: archived step of %s/%d/%d: %w", r.WorkflowID, r.InstanceID, r.RunID, err)
		}
		prev, seen := latest[s.StepID]
		if !seen {
			order = append(order, s.StepID)
		}
		if !seen || s.AttemptID > prev.AttemptID {
			latest[s.StepID] = s
		}
	}
	ov := &execution.RuntimeOverview{StepOverview: map[instance.StepStatus]int64{}}
	for _, id := range order {
		s := latest[id]
		ov.StepOverview[instance.StepStatus(s.Status)]++
		ov.TotalStepCount++
		ov.Steps = append(ov.Steps, execution.StepSummary{StepID: id, Status: instance.StepStatus(s.Status),
			StartTime: s.StartTime, EndTime: s.EndTime})
	}
	inst.RuntimeOverview = ov
	return inst, nil
}

func nullable(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// ErrNotArchived reports a run the archive does not hold.
var ErrNotArchived = errors.New("run not archived")

// Archived is an archived run as Lookup finds it.
type Archived struct {
	// Key is the archive object holding the run.
	Key    string
	Record *Record
}

// Reader reads archived runs: run_archive says which object holds a run,
// the store holds the objects.
type Reader struct {
	db    Querier
	store archive.Store
}

// Querier is the database a Reader reads run_archive from (a pool).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewReader builds a reader.
func NewReader(db Querier, store archive.Store) *Reader { return &Reader{db: db, store: store} }

// Lookup reads run runID of an instance from the archive, or the latest
// archived run of the instance when runID is 0; ErrNotArchived when the
// archive does not hold it.
func (rd *Reader) Lookup(ctx context.Context, workflowID string, instanceID, runID int64) (*Archived, error) {
	var run int64
	var key string
	var at time.Time
	err := rd.db.QueryRow(ctx, sqlLocate, workflowID, instanceID, runID).Scan(&run, &key, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s/%d/%d: %w", workflowID, instanceID, runID, ErrNotArchived)
	}
	if err != nil {
		return nil, fmt.Errorf("retention: locate archived run %s/%d/%d: %w", workflowID, instanceID, runID, err)
	}
	body, err := rd.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("retention: read archived run %s/%d/%d: %w", workflowID, instanceID, run, err)
	}
	var found *Record
	var decodeErr error
	err = archive.Decode(body, func(line json.RawMessage) bool {
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			decodeErr = err
			return false
		}
		if rec.WorkflowID == workflowID && rec.InstanceID == instanceID && rec.RunID == run {
			found = &rec
			return false
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, fmt.Errorf("retention: decode %s: %w", key, err)
	}
	if found == nil {
		return nil, fmt.Errorf("retention: %s does not hold run %s/%d/%d", key, workflowID, instanceID, run)
	}
	if found.Format != FormatV1 {
		return nil, fmt.Errorf("retention: %s: unknown record format %q", key, found.Format)
	}
	return &Archived{Key: key, Record: found}, nil
}
