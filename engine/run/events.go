package run

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// The events of the engine's own writes (docs/events.md): each status
// change of a run or a step is recorded in the statement that writes it
// (Store.go), so it commits, or rolls back, with the change.

var (
	StepStatusKind, _     = event.KindOf(event.StepInstanceStatusChange)
	InstanceStatusKind, _ = event.KindOf(event.WorkflowInstanceStatusChange)
)

// RunInfo is what a run's events carry that does not change while it runs.
type RunInfo struct {
	uuid        string
	correlation string
	depth       int
	name        string
	tags        []event.Tag
	// backfill is the backfill the run belongs to, "" for none.
	backfill string
	// incremental is the range an incremental run covers, nil for none.
	incremental *event.IncrementalRange
	// stepIndex is each step's position in the workflow, from 1 (the
	// events' step_instance_id).
	stepIndex map[string]int64
}

func NewRunInfo(wf *workflow.Workflow, uuid, correlation string, depth int) RunInfo {
	ri := RunInfo{uuid: uuid, correlation: correlation, depth: depth, name: wf.Name, stepIndex: make(map[string]int64, len(wf.Steps))}
	if ri.name == "" {
		ri.name = wf.ID
	}
	for _, t := range wf.Tags {
		ri.tags = append(ri.tags, event.Tag{Name: t.Name, Namespace: string(t.Namespace)})
	}
	for i := range wf.Steps {
		ri.stepIndex[wf.Steps[i].ID()] = int64(i + 1)
	}
	return ri
}

// SetBackfill names the backfill the run belongs to (its initiator's
// backfill_id): its events carry it.
func (ri *RunInfo) SetBackfill(id string) { ri.backfill = id }

// SetIncremental gives the run the range of an incremental trigger it
// covers: its initiator's "incremental" object (JSON; empty or null for
// none). Its status events carry it.
func (ri *RunInfo) SetIncremental(raw []byte) {
	ri.incremental = nil
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var r event.IncrementalRange
	if json.Unmarshal(raw, &r) == nil && r.Table != "" {
		ri.incremental = &r
	}
}

// BackfillOf is the backfill id an initiator (JSON) carries, "" for none.
func BackfillOf(initiator []byte) string {
	var v struct {
		BackfillID string `json:"backfill_id"`
	}
	_ = json.Unmarshal(initiator, &v)
	return v.BackfillID
}

// InstanceEvent is the event of a run's status change from -> to, without
// its seq (the write adds it).
func (ri *RunInfo) InstanceEvent(ref Ref, from, to instance.WorkflowStatus, at time.Time) []byte {
	return event.NewRecord(&event.WorkflowInstanceStatusChangeEvent{
		WorkflowID: ref.WorkflowID, WorkflowInstanceID: ref.InstanceID, WorkflowRunID: ref.RunID,
		WorkflowUUID: ri.uuid, CorrelationID: ri.correlation, Depth: ri.depth, WorkflowName: ri.name, Tags: ri.tags,
		OldStatus: from, NewStatus: to, EventTime: at.UnixMilli(), BackfillID: ri.backfill, Incremental: ri.incremental,
	}).Payload
}

// StepEvent is the event of a step attempt's write: the status changes in
// its timeline events since the last write, starting from from, the status
// last written. nil when the write changes no status.
func (ri *RunInfo) StepEvent(ref Ref, stepID string, attempt int64, stepUUID string, from instance.StepStatus,
	seq int64, timeline []instance.TimelineEvent) []byte {
	var records []event.StatusChangeRecord
	for _, ev := range timeline {
		if ev.Type != "STATUS" {
			continue
		}
		to := instance.StepStatus(ev.Status)
		records = append(records, event.StatusChangeRecord{OldStatus: from, NewStatus: to, EventTime: ev.Timestamp})
		from = to
	}
	if len(records) == 0 {
		return nil
	}
	return event.NewRecord(&event.StepInstanceStatusChangeEvent{
		WorkflowID: ref.WorkflowID, WorkflowInstanceID: ref.InstanceID, WorkflowRunID: ref.RunID,
		StepID: stepID, StepAttemptID: attempt, WorkflowUUID: ri.uuid, StepUUID: stepUUID, CorrelationID: ri.correlation,
		StepInstanceID: ri.stepIndex[stepID], StatusChangeRecords: records, Seq: seq, BackfillID: ri.backfill,
	}).Payload
}

// stoppedColumns are what a multi-run status write (run strategies,
// stopping runs that never started) returns of each run it changed, for
// its event.
const stoppedColumns = `instance_id, run_id, uuid::text, ` + CorrelationSQL + `, depth,
    COALESCE(NULLIF(definition->>'name', ''), workflow_id), COALESCE(definition->'tags', '[]'::jsonb), seq`

// stoppedEvents reads the rows a write RETURNING stoppedColumns changed
// from one status to another and returns their events. With workflowID
// empty the write spans many workflows and each row leads with its
// workflow_id (RETURNING workflow_id, stoppedColumns).
func stoppedEvents(rows pgx.Rows, workflowID string, from, to instance.WorkflowStatus) ([]event.Record, error) {
	now := time.Now().UnixMilli()
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (event.Record, error) {
		e := event.WorkflowInstanceStatusChangeEvent{WorkflowID: workflowID, OldStatus: from, NewStatus: to, EventTime: now}
		var tags []byte
		dest := []any{&e.WorkflowInstanceID, &e.WorkflowRunID, &e.WorkflowUUID, &e.CorrelationID, &e.Depth,
			&e.WorkflowName, &tags, &e.Seq}
		if workflowID == "" {
			dest = append([]any{&e.WorkflowID}, dest...)
		}
		if err := r.Scan(dest...); err != nil {
			return event.Record{}, err
		}
		_ = json.Unmarshal(tags, &e.Tags)
		return event.NewRecord(&e), nil
	})
}

// DroppedRunEvent is the event of a run that ends as it is created, because
// its run strategy dropped it (CREATED -> STOPPED): the API writes it with
// the run. definition is the run's workflow JSON.
func DroppedRunEvent(ref Ref, definition []byte, uuid string, depth int, correlation, backfill string) event.Record {
	var wf workflow.Workflow
	if err := json.Unmarshal(definition, &wf); err != nil {
		wf = workflow.Workflow{ID: ref.WorkflowID}
	}
	return DroppedRunEventOf(ref, &wf, uuid, depth, correlation, backfill)
}

// DroppedRunEventOf is DroppedRunEvent for a definition already decoded.
func DroppedRunEventOf(ref Ref, wf *workflow.Workflow, uuid string, depth int, correlation, backfill string) event.Record {
	ri := NewRunInfo(wf, uuid, correlation, depth)
	ri.SetBackfill(backfill)
	return event.Record{Kind: InstanceStatusKind, WorkflowID: ref.WorkflowID,
		Payload: ri.InstanceEvent(ref, instance.WorkflowCreated, instance.WorkflowStopped, time.Now())}
}

// RootCorrelation is the correlation id of a run that has no parent.
func RootCorrelation(ref Ref) string {
	return ref.WorkflowID + ":" + strconv.FormatInt(ref.InstanceID, 10) + ":" + strconv.FormatInt(ref.RunID, 10)
}

// SkippedStepEvent is the event of a step recorded SKIPPED in a new run
// that a restart creates (a skip of a failed step of an ended run).
func SkippedStepEvent(ref Ref, wf *workflow.Workflow, runUUID, correlation, stepID string, attempt int64, stepUUID string, seq int64) event.Record {
	ri := NewRunInfo(wf, runUUID, correlation, 0)
	return event.NewRecord(&event.StepInstanceStatusChangeEvent{
		WorkflowID: ref.WorkflowID, WorkflowInstanceID: ref.InstanceID, WorkflowRunID: ref.RunID,
		StepID: stepID, StepAttemptID: attempt, WorkflowUUID: runUUID, StepUUID: stepUUID, CorrelationID: correlation,
		StepInstanceID: ri.stepIndex[stepID], Seq: seq,
		StatusChangeRecords: []event.StatusChangeRecord{{OldStatus: instance.StepNotCreated, NewStatus: instance.StepSkipped,
			EventTime: time.Now().UnixMilli()}},
	})
}
