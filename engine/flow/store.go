package flow

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
	"github.com/maestro-aws/maestro/engine/signal"
)

// ErrFenced reports a write refused because this node no longer holds the
// generation of the flow's group: another node has taken the flow over.
var ErrFenced = errors.New("flow is owned by another engine node (generation fenced)")

// store holds the engine's SQL. Every write that touches a flow is fenced
// by the flow's generation.
type store struct {
	db  *pgxpool.Pool
	log *slog.Logger
}

// Ref names one run of a workflow instance.
type Ref struct {
	WorkflowID string `json:"workflow_id"`
	InstanceID int64  `json:"instance_id"`
	RunID      int64  `json:"run_id"`
}

func (r Ref) String() string { return fmt.Sprintf("%s/%d/%d", r.WorkflowID, r.InstanceID, r.RunID) }

// groupClaim is a flow group this node holds at a generation.
type groupClaim struct {
	ID         int32
	Generation int64
}

func (s *store) ensureGroups(ctx context.Context, count int) error {
	_, err := s.db.Exec(ctx, `INSERT INTO flow_group (group_id) SELECT g FROM generate_series(0, $1 - 1) AS g ON CONFLICT DO NOTHING`, count)
	if err != nil {
		return fmt.Errorf("create flow groups: %w", err)
	}
	return nil
}

const claimGroupsSQL = `
UPDATE flow_group SET owner = $1, generation = generation + 1, heartbeat_at = now(), expires_at = now() + $2::interval
WHERE group_id IN (
    SELECT group_id FROM flow_group
    WHERE group_id < $4 AND (owner IS NULL OR expires_at IS NULL OR expires_at < now())
    ORDER BY group_id
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
RETURNING group_id, generation`

// claimGroups takes up to limit free or expired groups below count.
func (s *store) claimGroups(ctx context.Context, node string, lease time.Duration, limit, count int) ([]groupClaim, error) {
	rows, err := s.db.Query(ctx, claimGroupsSQL, node, lease, limit, count)
	if err != nil {
		return nil, fmt.Errorf("claim flow groups: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (groupClaim, error) {
		var c groupClaim
		err := r.Scan(&c.ID, &c.Generation)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim flow groups: %w", err)
	}
	return claims, nil
}

const heartbeatSQL = `
UPDATE flow_group g SET heartbeat_at = now(), expires_at = now() + $2::interval
FROM unnest($3::integer[], $4::bigint[]) AS h(group_id, generation)
WHERE g.group_id = h.group_id AND g.generation = h.generation AND g.owner = $1
RETURNING g.group_id`

// heartbeat extends the lease of the held groups and returns those still held.
func (s *store) heartbeat(ctx context.Context, node string, lease time.Duration, held []groupClaim) (map[int32]bool, error) {
	ids := make([]int32, len(held))
	gens := make([]int64, len(held))
	for i, c := range held {
		ids[i], gens[i] = c.ID, c.Generation
	}
	rows, err := s.db.Query(ctx, heartbeatSQL, node, lease, ids, gens)
	if err != nil {
		return nil, fmt.Errorf("heartbeat flow groups: %w", err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("heartbeat flow groups: %w", err)
	}
	out := make(map[int32]bool, len(kept))
	for _, id := range kept {
		out[id] = true
	}
	return out, nil
}

// releaseGroups hands groups back so another node can take them at once.
func (s *store) releaseGroups(ctx context.Context, node string, held []groupClaim) error {
	ids := make([]int32, len(held))
	for i, c := range held {
		ids[i] = c.ID
	}
	_, err := s.db.Exec(ctx, `UPDATE flow_group SET owner = NULL, expires_at = NULL WHERE owner = $1 AND group_id = ANY ($2::integer[])`, node, ids)
	if err != nil {
		return fmt.Errorf("release flow groups: %w", err)
	}
	return nil
}

// instanceRow is what the engine reads of a workflow instance.
type instanceRow struct {
	Ref
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
}

// correlationSQL is a run's correlation id: its root run's identity
// (docs/events.md).
const correlationSQL = `COALESCE(correlation_id, workflow_id || ':' || instance_id || ':' || run_id)`

const instanceColumns = `workflow_id, instance_id, run_id, workflow_version, group_count, group_id, status, seq,
    definition, run_params, params, timeout_seconds, start_time, parent, uuid::text AS uuid_text,
    ` + correlationSQL + ` AS correlation, depth`

// instanceColumnNames names instanceColumns, for a query reading them from
// a CTE.
const instanceColumnNames = `workflow_id, instance_id, run_id, workflow_version, group_count, group_id, status, seq,
    definition, run_params, params, timeout_seconds, start_time, parent, uuid_text, correlation, depth`

func scanInstance(r pgx.CollectableRow) (instanceRow, error) {
	var i instanceRow
	err := r.Scan(&i.WorkflowID, &i.InstanceID, &i.RunID, &i.Version, &i.GroupCount, &i.GroupID, &i.Status, &i.Seq,
		&i.Definition, &i.RunParams, &i.Params, &i.TimeoutSeconds, &i.StartTime, &i.Parent, &i.UUID, &i.Correlation, &i.Depth)
	return i, err
}

// adoptFlows stamps every live flow of a group with the node's generation
// and returns all live flows of the group. On a takeover the stamping
// UPDATE waits for writes still in flight from the previous owner; once it
// commits, that owner's writes are refused. On a periodic reconciliation
// nothing needs stamping and it writes nothing.
func (s *store) adoptFlows(ctx context.Context, group int32, gen int64) ([]instanceRow, error) {
	if _, err := s.db.Exec(ctx, `UPDATE workflow_instance SET generation = $2
        WHERE group_id = $1 AND status IN ('IN_PROGRESS', 'PAUSED') AND generation <> $2`, group, gen); err != nil {
		return nil, fmt.Errorf("adopt flows of group %d: %w", group, err)
	}
	rows, err := s.db.Query(ctx, `SELECT `+instanceColumns+` FROM workflow_instance
        WHERE group_id = $1 AND status IN ('IN_PROGRESS', 'PAUSED') AND generation = $2`, group, gen)
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
    SELECT 1 FROM flow_group WHERE group_id = $4 AND generation = $5 AND owner = $6 FOR SHARE),
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

// startFlow moves a CREATED instance to IN_PROGRESS under this node's
// generation (or re-stamps one already running) and returns it. ok is false
// when the instance is over or unknown. The share lock on the group row
// makes a concurrent takeover wait for this write, so the new owner's
// adoption sees it. ev, when set, is the run's CREATED -> IN_PROGRESS event
// (written only if this write makes that change).
func (s *store) startFlow(ctx context.Context, ref Ref, group int32, gen int64, node string, params, ev []byte) (instanceRow, bool, error) {
	tl, _ := json.Marshal([]instance.TimelineEvent{instance.StatusEvent(string(instance.WorkflowInProgress), "picked up by engine node "+node)})
	var p, e any
	if params != nil {
		p = params
	}
	if ev != nil {
		e = ev
	}
	rows, err := s.db.Query(ctx, startFlowSQL, ref.WorkflowID, ref.InstanceID, ref.RunID, group, gen, node, tl, p, e,
		instanceStatusKind)
	if err != nil {
		return instanceRow{}, false, fmt.Errorf("start flow %s: %w", ref, err)
	}
	row, err := pgx.CollectExactlyOneRow(rows, scanInstance)
	if errors.Is(err, pgx.ErrNoRows) {
		var live bool
		if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flow_group WHERE group_id = $1 AND generation = $2 AND owner = $3)`, group, gen, node).Scan(&live); err != nil {
			return instanceRow{}, false, fmt.Errorf("check group %d: %w", group, err)
		}
		if !live {
			return instanceRow{}, false, ErrFenced
		}
		return instanceRow{}, false, nil
	}
	if err != nil {
		return instanceRow{}, false, fmt.Errorf("start flow %s: %w", ref, err)
	}
	return row, true, nil
}

// createdRow is what starting a run needs of a CREATED instance.
type createdRow struct {
	Definition []byte
	RunParams  []byte
	Initiator  []byte
	// HasSteps: the run has step rows already (a restart's carried
	// steps); a fresh run has none, and starting it skips reading them.
	HasSteps bool
	// RunConfig says how the run was started ({"policy": ...}).
	RunConfig []byte
	// UUID, Correlation and Depth are what the run's events carry.
	UUID        string
	Correlation string
	Depth       int
}

// readCreated reads a run that is still CREATED; ok is false otherwise.
func (s *store) readCreated(ctx context.Context, ref Ref) (createdRow, bool, error) {
	var r createdRow
	err := s.db.QueryRow(ctx, `SELECT definition, run_params, initiator, EXISTS (SELECT 1 FROM step_instance s
            WHERE s.workflow_id = i.workflow_id AND s.instance_id = i.instance_id AND s.run_id = i.run_id),
            uuid::text, `+correlationSQL+`, depth, run_config
        FROM workflow_instance i
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND status = 'CREATED' AND NOT queued`,
		ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&r.Definition, &r.RunParams, &r.Initiator, &r.HasSteps, &r.UUID, &r.Correlation, &r.Depth, &r.RunConfig)
	if errors.Is(err, pgx.ErrNoRows) {
		return createdRow{}, false, nil
	}
	if err != nil {
		return createdRow{}, false, fmt.Errorf("read run %s: %w", ref, err)
	}
	return r, true, nil
}

// instanceUpdate is one write-through of a flow's own state.
type instanceUpdate struct {
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

const updateInstanceSQL = `
UPDATE workflow_instance SET
    status = $5, seq = seq + 1,
    params = COALESCE($6::jsonb, params),
    timeline = timeline || $7::jsonb,
    end_time = CASE WHEN $8 THEN now() ELSE end_time END,
    modify_time = now()
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND generation = $4 AND status = $9`

// updateInstanceEventSQL is updateInstanceSQL that also writes the status
// change's event ($10, completed with the run's new seq): one row per
// updated run, so the rows affected are the runs updated.
const updateInstanceEventSQL = `
WITH w AS (` + updateInstanceSQL + `
RETURNING workflow_id, seq)
` + event.InsertSQL + `
SELECT $11::smallint, w.workflow_id, w.seq, $10::json FROM w`

func (s *store) updateInstance(ctx context.Context, ref Ref, gen int64, u instanceUpdate) error {
	return execInstanceUpdate(ctx, s.db, ref, gen, u)
}

// execInstanceUpdate writes u in q (the pool, or a transaction that
// writes more with it).
func execInstanceUpdate(ctx context.Context, q queue.Execer, ref Ref, gen int64, u instanceUpdate) error {
	ev, _ := json.Marshal(orEmpty(u.Timeline))
	var params any
	if u.Params != nil {
		params = u.Params
	}
	args := []any{ref.WorkflowID, ref.InstanceID, ref.RunID, gen, u.Status, params, ev, u.End, u.From}
	sql := updateInstanceSQL
	if u.Event != nil {
		sql = updateInstanceEventSQL
		args = append(args, u.Event, instanceStatusKind)
	}
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("update flow %s: %w", ref, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

func orEmpty(ev []instance.TimelineEvent) []instance.TimelineEvent {
	if ev == nil {
		return []instance.TimelineEvent{}
	}
	return ev
}

// stepRow is one step attempt as stored.
type stepRow struct {
	StepID    string
	AttemptID int64
	UUID      string
	Status    instance.StepStatus
	Seq       int64
	Type      string
	Params    []byte
	Outputs   []byte
	Runtime   runtimeState
	Retry     instance.RetryInfo
	StartTime *time.Time
	EndTime   *time.Time
}

// runtimeState is the step_instance.runtime_state column: what a restarted
// engine needs to resume the attempt.
type runtimeState struct {
	// Data is the runtime's own data (stepruntime.Result.Data).
	Data map[string]any `json:"data,omitempty"`
	// RetryAt is when the next attempt is due, for a failed attempt that
	// will be retried.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Message is the last runtime message.
	Message string `json:"message,omitempty"`
}

// loadLatestAttempts returns the newest attempt of each step of a run.
func (s *store) loadLatestAttempts(ctx context.Context, ref Ref) ([]stepRow, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (step_id)
            step_id, attempt_id, uuid::text, status, seq, step_type, params, outputs, runtime_state, retry, start_time, end_time
        FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3
        ORDER BY step_id, attempt_id DESC`, ref.WorkflowID, ref.InstanceID, ref.RunID)
	if err != nil {
		return nil, fmt.Errorf("load steps of %s: %w", ref, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stepRow, error) {
		var s stepRow
		err := r.Scan(&s.StepID, &s.AttemptID, &s.UUID, &s.Status, &s.Seq, &s.Type, &s.Params, &s.Outputs,
			&s.Runtime, &s.Retry, &s.StartTime, &s.EndTime)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("load steps of %s: %w", ref, err)
	}
	return out, nil
}

// stepWrite is one write-through of a step attempt: its new status and the
// timeline events of every transition since the last write.
type stepWrite struct {
	Status   instance.StepStatus
	Seq      int64 // the new seq; the stored one must be Seq-1 (0 for an insert)
	Params   []byte
	Outputs  []byte
	Runtime  runtimeState
	Retry    instance.RetryInfo
	Timeline []instance.TimelineEvent
	Start    bool // set start_time now
	End      bool // set end_time now
	// Event is the event of the status changes the write makes; nil when
	// it makes none.
	Event []byte
	// Signals are the output signals a successful attempt announces with
	// its terminal state (JSON of []signal.Output); nil when it has none.
	Signals []byte
}

// Step writes, each with or without its event. With the event the write
// is a data-modifying CTE whose rows feed the event insert: one event row
// per step row written, in the same statement, so the rows affected are
// still the step rows written (expressible per row, for group commit).

const insertStepFence = `
WITH fence AS (
    SELECT 1 FROM workflow_instance
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND generation = $4 FOR SHARE)`

const insertStepBody = `
INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, seq, step_type,
    params, outputs, runtime_state, retry, timeline, start_time, end_time)
SELECT $1, $2, $3, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
    CASE WHEN $16 THEN now() END, CASE WHEN $17 THEN now() END
FROM fence`

const insertStepSQL = insertStepFence + insertStepBody

const insertStepEventSQL = insertStepFence + `,
w AS (` + insertStepBody + `
RETURNING 1)
` + event.InsertSQL + `
SELECT $18::smallint, $1, $9, $19::json FROM w`

func (s *store) insertStep(ctx context.Context, ref Ref, gen int64, stepID string, attempt int64, uuid, stepType string, w stepWrite) error {
	if w.Signals != nil {
		// A successful attempt's terminal write is always an update: its
		// row was written STARTING before its runtime was called.
		return fmt.Errorf("insert step %s attempt %d of %s: output signals need the attempt's row", stepID, attempt, ref)
	}
	ev, _ := json.Marshal(orEmpty(w.Timeline))
	args := []any{ref.WorkflowID, ref.InstanceID, ref.RunID, gen,
		stepID, attempt, uuid, w.Status, w.Seq, stepType, jsonOr(w.Params), jsonOr(w.Outputs), w.Runtime, w.Retry, ev, w.Start, w.End}
	sql := insertStepSQL
	if w.Event != nil {
		sql = insertStepEventSQL
		args = append(args, stepStatusKind, w.Event)
	}
	tag, err := s.db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("insert step %s attempt %d of %s: %w", stepID, attempt, ref, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// updateStepSQL checks the generation without locking the run's row: the
// seq guard makes a write based on state another node has changed fail, so
// a stale owner's late write can only make the new owner reload, never
// roll state back. Inserts (new attempts) keep the share lock, since there
// is no row yet for the seq guard to protect. The seq guard also makes a
// write repeated after a lost acknowledgement fail instead of writing its
// event twice.
const updateStepSQL = `
WITH fence AS (
    SELECT 1 FROM workflow_instance
    WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND generation = $4 )
UPDATE step_instance SET
    status = $7, seq = $8,
    params = COALESCE($9::jsonb, params),
    outputs = COALESCE($10::jsonb, outputs),
    runtime_state = $11, retry = $12,
    timeline = timeline || $13::jsonb,
    start_time = CASE WHEN $14 THEN now() ELSE start_time END,
    end_time = CASE WHEN $15 THEN now() ELSE end_time END,
    modify_time = now()
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $5 AND attempt_id = $6
  AND seq = $8 - 1
  AND EXISTS (SELECT 1 FROM fence)`

const updateStepEventSQL = `
WITH w AS (` + updateStepSQL + `
RETURNING 1)
` + event.InsertSQL + `
SELECT $16::smallint, $1, $8, $17::json FROM w`

// The terminal writes of an attempt that announces output signals: the
// step write, signal.OutputsSQL (the signals, in the last parameter) and,
// with events, the event, in one statement.
var (
	updateStepSignalsSQL = `
WITH w AS (` + updateStepSQL + `
RETURNING 1)` + signal.OutputsSQLAt(16) + `
SELECT 1 FROM w`
	updateStepEventSignalsSQL = `
WITH w AS (` + updateStepSQL + `
RETURNING 1)` + signal.OutputsSQLAt(18) + event.InsertSQL + `
SELECT $16::smallint, $1, $8, $17::json FROM w`
)

func (s *store) updateStep(ctx context.Context, ref Ref, gen int64, stepID string, attempt int64, w stepWrite) error {
	ev, _ := json.Marshal(orEmpty(w.Timeline))
	var params, outputs any
	if w.Params != nil {
		params = w.Params
	}
	if w.Outputs != nil {
		outputs = w.Outputs
	}
	args := []any{ref.WorkflowID, ref.InstanceID, ref.RunID, gen, stepID, attempt,
		w.Status, w.Seq, params, outputs, w.Runtime, w.Retry, ev, w.Start, w.End}
	sql := updateStepSQL
	if w.Event != nil {
		sql = updateStepEventSQL
		args = append(args, stepStatusKind, w.Event)
	}
	if w.Signals != nil {
		sql = updateStepSignalsSQL
		if w.Event != nil {
			sql = updateStepEventSignalsSQL
		}
		args = append(args, w.Signals)
	}
	tag, err := s.db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("update step %s attempt %d of %s: %w", stepID, attempt, ref, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

func jsonOr(b []byte) []byte {
	if b == nil {
		return []byte("{}")
	}
	return b
}

// isLive reports whether a run has not ended.
func (s *store) isLive(ctx context.Context, ref Ref) (bool, error) {
	var live bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_instance
        WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED'))`,
		ref.WorkflowID, ref.InstanceID, ref.RunID).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("check run %s: %w", ref, err)
	}
	return live, nil
}
