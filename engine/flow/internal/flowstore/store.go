// Package flowstore is the flow engine's store: the SQL of flow groups, of
// the engine's state writes (each run and step write records its event in
// the same statement, fenced by the flow group's generation), of run
// admission under run strategies, and of the patterns the actors consult
// (tag permits, breakpoints, output data). See docs/engine.md.
package flowstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// Store holds the engine's SQL. Every write that touches a flow is fenced
// by the flow's generation.
type Store struct {
	db      *pgxpool.Pool
	log     *slog.Logger
	outputs outputReads
	// admissions gathers the checks for queued runs (admission.go).
	admissions admissions
}

// New builds the store over db; log receives what a caller does not wait
// for (an admission that failed and is left to the sweep).
func New(db *pgxpool.Pool, log *slog.Logger) *Store { return &Store{db: db, log: log} }

// DB is the pool the store writes through.
func (s *Store) DB() *pgxpool.Pool { return s.db }

// EnsureGroups creates the flow group rows below count that are missing.
func (s *Store) EnsureGroups(ctx context.Context, count int) error {
	_, err := s.db.Exec(ctx, `INSERT INTO flow_group (group_id) SELECT g FROM generate_series(0, $1 - 1) AS g ON CONFLICT DO NOTHING`, count)
	if err != nil {
		return fmt.Errorf("create flow groups: %w", err)
	}
	return nil
}

// InstanceRow is what the engine reads of a workflow instance.
type InstanceRow struct {
	run.Ref
	Version        int64
	GroupCount     int32
	GroupID        int32
	Status         instance.WorkflowStatus
	Seq            int64
	Definition     []byte
	RunParams      []byte
	Params         []byte
	TimeoutSeconds int64
	StartTime      *time.Time
	// Parent is the workflow_instance.parent column: set on a subworkflow's
	// child run (subworkflow.go).
	Parent []byte
	// UUID, Correlation and Depth are what the run's events carry.
	UUID        string
	Correlation string
	Depth       int
	// TraceContext is the traceparent the run was created in (""
	// untraced): the flow's work continues that trace on any node.
	TraceContext string
	// BackfillID is the backfill the run belongs to (its initiator's
	// backfill_id), "" for none: the run's events carry it.
	BackfillID string
	// Incremental is the range an incremental run covers (its initiator's
	// "incremental" object, docs/incremental.md), nil for another run:
	// its end also ends the range, and its events carry it.
	Incremental []byte
}

const instanceColumns = `workflow_id, instance_id, run_id, workflow_version, group_count, group_id, status, seq,
    definition, run_params, params, timeout_seconds, start_time, parent, uuid::text AS uuid_text,
    ` + run.CorrelationSQL + ` AS correlation, depth, COALESCE(trace_context, '') AS trace_ctx,
    COALESCE(initiator->>'backfill_id', '') AS backfill_id, initiator->'incremental' AS incremental`

// instanceColumnNames names instanceColumns, for a query reading them from
// a CTE.
const instanceColumnNames = `workflow_id, instance_id, run_id, workflow_version, group_count, group_id, status, seq,
    definition, run_params, params, timeout_seconds, start_time, parent, uuid_text, correlation, depth, trace_ctx, backfill_id, incremental`

// InstanceColumns and InstanceColumnNames are instanceColumns and
// instanceColumnNames for a statement written elsewhere that returns runs
// to start (composite: iterations created IN_PROGRESS); ScanInstance reads
// one such row.
const (
	InstanceColumns     = instanceColumns
	InstanceColumnNames = instanceColumnNames
)

// ScanInstance reads the instanceColumns of one row.
func ScanInstance(r pgx.CollectableRow) (InstanceRow, error) { return scanInstance(r) }

func scanInstance(r pgx.CollectableRow) (InstanceRow, error) {
	var i InstanceRow
	err := r.Scan(&i.WorkflowID, &i.InstanceID, &i.RunID, &i.Version, &i.GroupCount, &i.GroupID, &i.Status, &i.Seq,
		&i.Definition, &i.RunParams, &i.Params, &i.TimeoutSeconds, &i.StartTime, &i.Parent, &i.UUID, &i.Correlation, &i.Depth,
		&i.TraceContext, &i.BackfillID, &i.Incremental)
	return i, err
}

// AdoptFlows stamps every live flow of a group held in memory (not
// passivated: passive.go) with the node's generation and returns them. On a takeover the stamping
// UPDATE waits for writes still in flight from the previous owner; once it
// commits, that owner's writes are refused. On a periodic reconciliation
// nothing needs stamping and it writes nothing.
func (s *Store) AdoptFlows(ctx context.Context, group int32, gen int64) ([]InstanceRow, error) {
	if _, err := s.db.Exec(ctx, `UPDATE workflow_instance SET generation = $2
        WHERE group_id = $1 AND status IN ('IN_PROGRESS', 'PAUSED') AND passive_wake_at IS NULL AND generation <> $2`, group, gen); err != nil {
		return nil, fmt.Errorf("adopt flows of group %d: %w", group, err)
	}
	rows, err := s.db.Query(ctx, `SELECT `+instanceColumns+` FROM workflow_instance
        WHERE group_id = $1 AND status IN ('IN_PROGRESS', 'PAUSED') AND passive_wake_at IS NULL AND generation = $2`, group, gen)
	if err != nil {
		return nil, fmt.Errorf("load flows of group %d: %w", group, err)
	}
	flows, err := pgx.CollectRows(rows, scanInstance)
	if err != nil {
		return nil, fmt.Errorf("load flows of group %d: %w", group, err)
	}
	return flows, nil
}

// startFlowSQL moves a CREATED run to IN_PROGRESS, or re-stamps a running
// one with this node's generation, and records the CREATED -> IN_PROGRESS
// status change ($9, without its seq) in the same statement. prev locks
// the run and reads its status before the update, so exactly the write
// that ends CREATED writes the event, whoever else tries.
const startFlowSQL = `
WITH owned AS (
    SELECT 1 FROM flow_group WHERE group_id = $4 AND generation = $5 AND owner = $6 FOR KEY SHARE),
prev AS (
    SELECT status AS prev_status FROM workflow_instance
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
      AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued
      AND EXISTS (SELECT 1 FROM owned)
    FOR UPDATE),
w AS (
    UPDATE workflow_instance SET
        generation = $5,
        status = CASE WHEN status = 'CREATED' THEN 'IN_PROGRESS' ELSE status END,
        start_time = COALESCE(start_time, now()),
        seq = seq + 1,
        timeline = CASE WHEN status = 'CREATED' THEN timeline || $7::jsonb ELSE timeline END,
        params = CASE WHEN status = 'CREATED' THEN COALESCE($8::jsonb, params) ELSE params END,
        modify_time = now()
    FROM prev
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
    RETURNING ` + instanceColumns + `, prev.prev_status),
e AS (
    ` + event.InsertSQL + `
    SELECT $10::smallint, w.workflow_id, w.seq, $9::json FROM w
    WHERE w.prev_status = 'CREATED' AND $9::json IS NOT NULL)
SELECT ` + instanceColumnNames + ` FROM w`

// StartFlow moves a CREATED instance to IN_PROGRESS under this node's
// generation (or re-stamps one already running) and returns it. ok is false
// when the instance is over or unknown. The key-share lock on the group row
// keeps a concurrent takeover (FOR UPDATE) from claiming it before this
// write commits, so the new owner's adoption sees it. ev, when set, is the run's CREATED -> IN_PROGRESS event
// (written only if this write makes that change).
func (s *Store) StartFlow(ctx context.Context, ref run.Ref, group int32, gen int64, node string, params, ev []byte) (InstanceRow, bool, error) {
	tl, _ := json.Marshal(PickedUp(node))
	var p, e any
	if params != nil {
		p = params
	}
	if ev != nil {
		e = ev
	}
	rows, err := s.db.Query(ctx, startFlowSQL, ref.WorkflowID, ref.InstanceID, ref.RunID, group, gen, node, tl, p, e,
		run.InstanceStatusKind)
	if err != nil {
		return InstanceRow{}, false, fmt.Errorf("start flow %s: %w", ref, err)
	}
	row, err := pgx.CollectExactlyOneRow(rows, scanInstance)
	if errors.Is(err, pgx.ErrNoRows) {
		live, err := s.GroupHeld(ctx, group, gen, node)
		if err != nil {
			return InstanceRow{}, false, err
		}
		if !live {
			return InstanceRow{}, false, run.ErrFenced
		}
		return InstanceRow{}, false, nil
	}
	if err != nil {
		return InstanceRow{}, false, fmt.Errorf("start flow %s: %w", ref, err)
	}
	return row, true, nil
}

// CreatedRow is what starting a run needs of a CREATED instance.
type CreatedRow struct {
	// Row is the run as stored (CREATED): its definition, run params and
	// what its events carry, and what a start through the writer (StartOp)
	// builds the flow from.
	Row       InstanceRow
	Initiator []byte
	// HasSteps: the run has step rows already (a restart's carried
	// steps); a fresh run has none, and starting it skips reading them.
	HasSteps bool
	// RunConfig says how the run was started ({"policy": ...}).
	RunConfig []byte
	// Owner is the owner of the pushed workflow the run belongs to (its
	// root workflow for an inline run), which the run's owner param holds;
	// "" when the workflow is gone. Read in the same statement: the start
	// path pays one round trip for both.
	Owner string
	// FromNote: made from the run's notification (CreatedFromNote), not
	// read.
	FromNote bool
}

// CreatedFromNote is the CreatedRow of a lone start's notification
// (run.StartNote), with definition, the definition its sha256 names, as
// a read of the run would have found it (CREATED, no steps).
func CreatedFromNote(n run.StartNote, definition []byte) CreatedRow {
	null := func(raw []byte) []byte {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		return raw
	}
	return CreatedRow{
		Row: InstanceRow{Ref: n.Ref, Version: n.Version, GroupCount: n.GroupCount, GroupID: n.Group,
			Status: instance.WorkflowCreated, Definition: definition, RunParams: n.RunParams, Params: []byte("{}"),
			TimeoutSeconds: n.Timeout, Parent: null(n.Parent), UUID: n.UUID, Correlation: n.Correlation, Depth: n.Depth,
			TraceContext: n.Trace, BackfillID: n.BackfillID, Incremental: null(n.Incremental)},
		Initiator: n.Initiator, RunConfig: n.RunConfig, Owner: n.Owner, FromNote: true,
	}
}

// ReadCreated reads a run that is still CREATED; ok is false otherwise.
func (s *Store) ReadCreated(ctx context.Context, ref run.Ref) (CreatedRow, bool, error) {
	r, ok, err := scanCreated(s.db.QueryRow(ctx, `SELECT `+createdColumns+`
        FROM workflow_instance i
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND status = 'CREATED' AND NOT queued`,
		ref.WorkflowID, ref.InstanceID, ref.RunID))
	if err != nil {
		return CreatedRow{}, false, fmt.Errorf("read run %s: %w", ref, err)
	}
	return r, ok, nil
}

// ReadStartInputs reads what a run's params were evaluated from at its
// start besides its row (InstanceRow has its definition and run params):
// its initiator, its run config and its workflow's owner, as ReadCreated
// reads them, whatever the run's status.
func (s *Store) ReadStartInputs(ctx context.Context, ref run.Ref) (initiator, runConfig []byte, owner string, err error) {
	err = s.db.QueryRow(ctx, `SELECT initiator, run_config, `+ownerColumn+`
        FROM workflow_instance i WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3`,
		ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&initiator, &runConfig, &owner)
	if err != nil {
		return nil, nil, "", fmt.Errorf("read the start inputs of run %s: %w", ref, err)
	}
	return initiator, runConfig, owner, nil
}

// ownerColumn is the owner of the pushed workflow a run of
// workflow_instance i belongs to (its root workflow for an inline run).
const ownerColumn = `COALESCE((SELECT w.owner FROM workflow w WHERE w.workflow_id = split_part(i.workflow_id, ':', 1)), '')`

// createdColumns are what ReadCreated reads of workflow_instance i.
const createdColumns = instanceColumns + `, initiator, EXISTS (SELECT 1 FROM step_instance s
            WHERE s.workflow_id = i.workflow_id AND s.instance_id = i.instance_id AND s.run_id = i.run_id), run_config, ` + ownerColumn

// scanCreated scans a row of createdColumns; ok is false for none.
func scanCreated(row pgx.Row) (CreatedRow, bool, error) {
	var r CreatedRow
	i := &r.Row
	err := row.Scan(&i.WorkflowID, &i.InstanceID,
		&i.RunID, &i.Version, &i.GroupCount, &i.GroupID, &i.Status, &i.Seq, &i.Definition, &i.RunParams, &i.Params,
		&i.TimeoutSeconds, &i.StartTime, &i.Parent, &i.UUID, &i.Correlation, &i.Depth, &i.TraceContext, &i.BackfillID,
		&i.Incremental, &r.Initiator, &r.HasSteps, &r.RunConfig, &r.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return CreatedRow{}, false, nil
	}
	if err != nil {
		return CreatedRow{}, false, err
	}
	return r, true, nil
}

// ClaimReadCreated is ReadCreated sent with the claim of a start message
// (queue.ClaimRead): the run the message names, read in the claim's round
// trip, when it is CREATED and not queued. Its Read is a CreatedRow.
var ClaimReadCreated = &queue.ClaimRead{
	SQL: `SELECT ` + createdColumns + `
        FROM workflow_instance i
        WHERE (workflow_id, instance_id, run_id) = (
              SELECT q.payload->>'workflow_id', (q.payload->>'instance_id')::bigint, (q.payload->>'run_id')::bigint
              FROM maestro_queue q WHERE q.queue_id = $1 AND q.message_id = $2 AND q.owned_by = $3)
          AND status = 'CREATED' AND NOT queued`,
	Scan: func(row pgx.Row) (any, bool, error) {
		r, ok, err := scanCreated(row)
		return r, ok, err
	},
}

// StartOp moves a CREATED run to IN_PROGRESS under gen of its group, with
// its evaluated params (nil keeps them), the pick-up entry in its timeline
// and its start event (nil for none), through the writer: the run's first
// writes are ordered after it (Op.After) and may share its commit. It is
// refused (run.ErrFenced) when the group has moved on or the run is no longer
// CREATED or is queued.
func StartOp(ctx context.Context, ref run.Ref, group int32, gen int64, node string, params, ev []byte) *Op {
	return UpdateInstanceOp(ctx, ref, group, gen, InstanceUpdate{
		From: instance.WorkflowCreated, Status: instance.WorkflowInProgress, Params: params, Event: ev,
		Timeline: PickedUp(node),
	})
}

// PickedUp is the timeline entry of a run that engine node starts.
func PickedUp(node string) []instance.TimelineEvent {
	return instance.StatusChange(string(instance.WorkflowInProgress), "picked up by engine node "+node)
}

// GroupHeld reports whether node still holds group at gen.
func (s *Store) GroupHeld(ctx context.Context, group int32, gen int64, node string) (bool, error) {
	var live bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flow_group WHERE group_id = $1 AND generation = $2 AND owner = $3)`,
		group, gen, node).Scan(&live); err != nil {
		return false, fmt.Errorf("check group %d: %w", group, err)
	}
	return live, nil
}

// InstanceUpdate is one write-through of a flow's own state.
type InstanceUpdate struct {
	// From is the status the run has now: the write applies only to a run
	// still in it, so a write repeated after a lost acknowledgement is
	// refused rather than applied (and reported) twice.
	From     instance.WorkflowStatus
	Status   instance.WorkflowStatus
	Params   []byte // nil keeps the stored params
	Timeline []instance.TimelineEvent
	End      bool
	// Event is the status change's event without its seq; nil writes none.
	Event []byte
}

func orEmpty(ev []instance.TimelineEvent) []instance.TimelineEvent {
	if ev == nil {
		return []instance.TimelineEvent{}
	}
	return ev
}

// StepRow is one step attempt as stored.
type StepRow struct {
	StepID    string
	AttemptID int64
	UUID      string
	Status    instance.StepStatus
	Seq       int64
	Type      string
	Params    []byte
	Outputs   []byte
	Runtime   RuntimeState
	Retry     instance.RetryInfo
	StartTime *time.Time
	EndTime   *time.Time
}

// RuntimeState is the step_instance.runtime_state column: what a restarted
// engine needs to resume the attempt.
type RuntimeState struct {
	// Data is the runtime's own data (stepruntime.Result.Data).
	Data map[string]any `json:"data,omitempty"`
	// RetryAt is when the next attempt is due, for a failed attempt that
	// will be retried.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Message is the last runtime message.
	Message string `json:"message,omitempty"`
}

// latestAttemptsSQL reads the newest attempt of each step of a run.
const latestAttemptsSQL = `SELECT DISTINCT ON (step_id)
            step_id, attempt_id, uuid::text, status, seq, step_type, params, outputs, runtime_state, retry, start_time, end_time
        FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
        ORDER BY step_id, attempt_id DESC`

func scanStep(r pgx.CollectableRow) (StepRow, error) {
	var s StepRow
	err := r.Scan(&s.StepID, &s.AttemptID, &s.UUID, &s.Status, &s.Seq, &s.Type, &s.Params, &s.Outputs,
		&s.Runtime, &s.Retry, &s.StartTime, &s.EndTime)
	return s, err
}

// LoadLatestAttempts returns the newest attempt of each step of a run.
func (s *Store) LoadLatestAttempts(ctx context.Context, ref run.Ref) ([]StepRow, error) {
	rows, err := s.db.Query(ctx, latestAttemptsSQL, ref.WorkflowID, ref.InstanceID, ref.RunID)
	if err != nil {
		return nil, fmt.Errorf("load steps of %s: %w", ref, err)
	}
	out, err := pgx.CollectRows(rows, scanStep)
	if err != nil {
		return nil, fmt.Errorf("load steps of %s: %w", ref, err)
	}
	return out, nil
}

// StepWrite is one write-through of a step attempt: its new status and the
// timeline events of every transition since the last write.
type StepWrite struct {
	Status instance.StepStatus
	Seq    int64 // the new seq; the stored one must be Seq-1 (0 for an insert)
	// Params are the attempt's params, all of them; nil on an update
	// leaves the stored ones, with ParamsPatch set on them: a JSON
	// object whose keys replace theirs (output params merged in,
	// params.MergeOutputs), nil for none.
	Params      []byte
	ParamsPatch []byte
	Outputs     []byte
	Runtime     RuntimeState
	Retry       instance.RetryInfo
	Timeline    []instance.TimelineEvent
	Start       bool // set start_time now
	End         bool // set end_time now
	// Event is the event of the status changes the write makes; nil when
	// it makes none.
	Event []byte
	// Signals are the output signals a successful attempt announces with
	// its terminal state (JSON of []signal.Output); nil when it has none.
	Signals []byte
}

func jsonOr(b []byte) []byte {
	if b == nil {
		return []byte("{}")
	}
	return b
}

// IsLive reports whether a run has not ended.
func (s *Store) IsLive(ctx context.Context, ref run.Ref) (bool, error) {
	var live bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED'))`,
		ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("check run %s: %w", ref, err)
	}
	return live, nil
}

// HasBreakpoints reports whether any breakpoint is set on a workflow.
func (s *Store) HasBreakpoints(ctx context.Context, workflowID string) (bool, error) {
	var has bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM step_breakpoint WHERE workflow_id = $1)`, workflowID).Scan(&has); err != nil {
		return false, fmt.Errorf("look up breakpoints of %s: %w", workflowID, err)
	}
	return has, nil
}
