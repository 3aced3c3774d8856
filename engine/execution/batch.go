package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// The batch start path: many starts in one transaction, with a handful of
// multi-row statements whatever their number, and every rule of a single
// Start (request-id dedup, param mode checks, run strategies and
// admission). Time triggers start their runs through it, and signal
// triggers will; a test checks that it and Start give the same result.

// BatchStart is one start of a batch: a run of a workflow version.
type BatchStart struct {
	WorkflowID string
	// Version is the version to run (a trigger's is the active version).
	Version int64
	// RequestID makes the start idempotent, as for Start; empty means none.
	RequestID string
	Initiator map[string]any
	RunParams workflow.Params
}

// BatchResult is what became of one start of a batch.
type BatchResult struct {
	WorkflowID string
	InstanceID int64
	// Status is CREATED, or STOPPED for a run its FIRST_ONLY strategy
	// dropped; for a duplicate, the first run's status.
	Status instance.WorkflowStatus
	// Queued: the run waits for its run strategy to admit it.
	Queued     bool
	Duplicated bool
	// Err is why this start did not happen (ErrNotFound, ErrInvalid); the
	// other starts of the batch are not affected.
	Err error
}

// StartBatch applies starts in order in one transaction, as if each were
// a Start, and returns one result per start.
func (s *Service) StartBatch(ctx context.Context, starts []BatchStart) ([]BatchResult, error) {
	var out []BatchResult
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		out, err = s.StartBatchTx(ctx, tx, starts)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.AfterBatch(ctx, out)
	return out, nil
}

// AfterBatch does what a start does once its transaction has committed:
// admission runs again for each workflow whose new run was queued (see
// admitLater). A caller of StartBatchTx calls it after its commit.
func (s *Service) AfterBatch(ctx context.Context, results []BatchResult) {
	seen := map[string]bool{}
	for _, r := range results {
		if r.Queued && !r.Duplicated && r.Err == nil && !seen[r.WorkflowID] {
			seen[r.WorkflowID] = true
			s.admitLater(ctx, r.WorkflowID)
		}
	}
}

// batchVersion is what the batch path reads of a workflow version: the
// definition without its steps and signal triggers (params, time
// triggers, timeout), decoded.
type batchVersion struct {
	wf workflow.Workflow
}

const batchVersionsSQL = `
SELECT v.workflow_id, v.version, v.definition - 'steps' - 'signal_triggers'
FROM unnest($1::text[], $2::bigint[]) AS k(id, version)
JOIN workflow_version v ON v.workflow_id = k.id AND v.version = k.version`

// batchLockSQL locks the workflows of a batch, in id order so that batches
// of overlapping workflows cannot deadlock, and reads their properties.
const batchLockSQL = `
SELECT workflow_id, properties FROM workflow WHERE workflow_id = ANY($1::text[])
ORDER BY workflow_id FOR NO KEY UPDATE`

const batchDedupSQL = `
SELECT i.workflow_id, i.request_id, i.instance_id, i.status, i.queued
FROM unnest($1::text[], $2::text[]) AS k(id, request_id)
JOIN workflow_instance i ON i.workflow_id = k.id AND i.request_id = k.request_id AND i.run_id = 1`

// batchAllocateSQL allocates n instance ids per workflow in one statement.
const batchAllocateSQL = `
UPDATE workflow w SET latest_instance_id = w.latest_instance_id + c.n
FROM unnest($1::text[], $2::bigint[]) AS c(id, n)
WHERE w.workflow_id = c.id
RETURNING w.workflow_id, w.latest_instance_id`

// batchInsertSQL inserts one round of runs; the definition is copied from
// the version row, not sent back and forth.
const batchInsertSQL = `
INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid, request_id, group_count,
    group_id, status, definition, run_params, initiator, timeline, timeout_seconds, queued, run_config, end_time)
SELECT r.id, r.iid, 1, r.version, r.uuid, r.request_id, $13, r.grp, r.status, v.definition, r.run_params,
    r.initiator, r.timeline, r.timeout, r.queued, $14, CASE WHEN r.status = 'STOPPED' THEN now() END
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::uuid[], $5::text[], $6::integer[], $7::text[],
    $8::jsonb[], $9::jsonb[], $10::jsonb[], $11::bigint[], $12::boolean[])
    AS r(id, iid, version, uuid, request_id, grp, status, run_params, initiator, timeline, timeout, queued)
JOIN workflow_version v ON v.workflow_id = r.id AND v.version = r.version`

// pending is a start of the batch that passed its checks and gets a run.
type pending struct {
	i         int // index in the batch
	wf        *workflow.Workflow
	runParams []byte
	initiator map[string]any
	timeout   int64
}

// StartBatchTx applies starts in order inside tx, as if each were a Start,
// and returns one result per start. The caller commits tx and then calls
// AfterBatch. It takes the lock of every workflow of the batch (in id
// order), so the caller may hold some of them already.
func (s *Service) StartBatchTx(ctx context.Context, tx pgx.Tx, starts []BatchStart) ([]BatchResult, error) {
	out := make([]BatchResult, len(starts))
	if len(starts) == 0 {
		return out, nil
	}
	for i, st := range starts {
		out[i].WorkflowID = st.WorkflowID
	}
	versions, err := s.batchVersions(ctx, tx, starts)
	if err != nil {
		return nil, err
	}
	props, err := lockBatch(ctx, tx, starts)
	if err != nil {
		return nil, err
	}
	existing, err := dedupBatch(ctx, tx, starts)
	if err != nil {
		return nil, err
	}
	// Each start in order, as Start checks it: the workflow and version
	// exist, a repeated request id is a duplicate (of a run stored before
	// or of an earlier start of this batch), the run params respect the
	// param modes.
	byWorkflow := map[string][]pending{}
	var order []string // workflows in first-start order
	for i, st := range starts {
		key := batchKey{st.WorkflowID, st.Version}
		v, ok := versions[key]
		if _, exists := props[st.WorkflowID]; !ok || !exists {
			out[i].Err = fmt.Errorf("workflow %s version %d: %w", st.WorkflowID, st.Version, ErrNotFound)
			continue
		}
		if st.RequestID != "" {
			if d, ok := existing[requestKey{st.WorkflowID, st.RequestID}]; ok {
				out[i] = d
				continue
			}
		}
		rp, initiator, timeout, err := startInputs(&v.wf, st.RunParams, st.Initiator)
		if errors.Is(err, ErrInvalid) {
			out[i].Err = err
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, seen := byWorkflow[st.WorkflowID]; !seen {
			order = append(order, st.WorkflowID)
		}
		byWorkflow[st.WorkflowID] = append(byWorkflow[st.WorkflowID], pending{i: i, wf: &v.wf, runParams: rp, initiator: initiator, timeout: timeout})
		if st.RequestID != "" {
			// A later start with this request id duplicates this one.
			existing[requestKey{st.WorkflowID, st.RequestID}] = BatchResult{WorkflowID: st.WorkflowID, Duplicated: true, Err: errPendingDuplicate(i)}
		}
	}
	if err := s.allocateBatch(ctx, tx, order, byWorkflow, out); err != nil {
		return nil, err
	}
	// Round r starts the r-th new run of every workflow: the workflows of a
	// round are distinct, and a round sees the runs of the rounds before.
	for r := 0; ; r++ {
		var round []pending
		for _, id := range order {
			if ps := byWorkflow[id]; r < len(ps) {
				round = append(round, ps[r])
			}
		}
		if len(round) == 0 {
			break
		}
		if err := s.startRound(ctx, tx, starts, round, props, out); err != nil {
			return nil, err
		}
	}
	// Duplicates of earlier starts of this batch take their run's result.
	for i := range out {
		var p pendingDuplicate
		if errors.As(out[i].Err, &p) {
			first := out[int(p)]
			out[i] = BatchResult{WorkflowID: first.WorkflowID, InstanceID: first.InstanceID, Status: first.Status,
				Queued: first.Queued, Duplicated: true}
		}
	}
	return out, nil
}

type batchKey struct {
	id      string
	version int64
}

type requestKey struct{ id, requestID string }

// pendingDuplicate marks a start that repeats the request id of start i of
// the same batch until that start's run is known.
type pendingDuplicate int

func (p pendingDuplicate) Error() string { return fmt.Sprintf("duplicate of start %d", int(p)) }

func errPendingDuplicate(i int) error { return pendingDuplicate(i) }

// batchVersions reads the versions the batch runs.
func (s *Service) batchVersions(ctx context.Context, tx pgx.Tx, starts []BatchStart) (map[batchKey]*batchVersion, error) {
	seen := map[batchKey]bool{}
	var ids []string
	var vs []int64
	for _, st := range starts {
		k := batchKey{st.WorkflowID, st.Version}
		if !seen[k] {
			seen[k] = true
			ids, vs = append(ids, k.id), append(vs, k.version)
		}
	}
	rows, err := tx.Query(ctx, batchVersionsSQL, ids, vs)
	if err != nil {
		return nil, fmt.Errorf("read %d workflow versions: %w", len(ids), err)
	}
	defer rows.Close()
	out := make(map[batchKey]*batchVersion, len(ids))
	for rows.Next() {
		var k batchKey
		var raw []byte
		if err := rows.Scan(&k.id, &k.version, &raw); err != nil {
			return nil, fmt.Errorf("read %d workflow versions: %w", len(ids), err)
		}
		v := &batchVersion{}
		if err := json.Unmarshal(raw, &v.wf); err != nil {
			return nil, fmt.Errorf("decode workflow %s version %d: %w", k.id, k.version, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %d workflow versions: %w", len(ids), err)
	}
	return out, nil
}

// startInputs checks a start's run params against the version's param
// modes (a refusal is ErrInvalid, before anything is written rather than
// failing the run later) and returns what the run row stores: the encoded
// run params, the initiator (MANUAL when none) and the timeout in seconds
// (the workflow's, else DefaultTimeout).
func startInputs(wf *workflow.Workflow, runParams workflow.Params, initiator map[string]any) ([]byte, map[string]any, int64, error) {
	if _, err := params.WorkflowDefs(params.WorkflowInput{Workflow: wf, RunParams: runParams, Phase: params.PhaseStart}); err != nil {
		return nil, nil, 0, fmt.Errorf("%w: run params: %w", ErrInvalid, err)
	}
	encoded, err := json.Marshal(orEmptyParams(runParams))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("encode run params: %w", err)
	}
	if initiator == nil {
		initiator = map[string]any{"type": "MANUAL"}
	}
	timeout := DefaultTimeout
	if wf.Timeout != nil {
		if d, err := wf.Timeout.Resolve(); err == nil && d > 0 {
			timeout = d
		}
	}
	return encoded, initiator, int64(timeout / time.Second), nil
}

// lockBatch locks the batch's workflows and returns their properties; a
// workflow that does not exist is absent.
func lockBatch(ctx context.Context, tx pgx.Tx, starts []BatchStart) (map[string][]byte, error) {
	ids := make([]string, 0, len(starts))
	for _, st := range starts {
		ids = append(ids, st.WorkflowID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, err := tx.Query(ctx, batchLockSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	defer rows.Close()
	out := make(map[string][]byte, len(ids))
	for rows.Next() {
		var id string
		var props []byte
		if err := rows.Scan(&id, &props); err != nil {
			return nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
		}
		out[id] = props
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	return out, nil
}

// dedupBatch finds the runs already started with the batch's request ids.
func dedupBatch(ctx context.Context, tx pgx.Tx, starts []BatchStart) (map[requestKey]BatchResult, error) {
	var ids, rids []string
	for _, st := range starts {
		if st.RequestID != "" {
			ids, rids = append(ids, st.WorkflowID), append(rids, st.RequestID)
		}
	}
	out := map[requestKey]BatchResult{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, batchDedupSQL, ids, rids)
	if err != nil {
		return nil, fmt.Errorf("find duplicate starts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k requestKey
		r := BatchResult{Duplicated: true}
		if err := rows.Scan(&k.id, &k.requestID, &r.InstanceID, &r.Status, &r.Queued); err != nil {
			return nil, fmt.Errorf("find duplicate starts: %w", err)
		}
		r.WorkflowID = k.id
		out[k] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find duplicate starts: %w", err)
	}
	return out, nil
}

// allocateBatch gives each new run its instance id: one UPDATE allocates
// every workflow's ids, in start order within a workflow.
func (s *Service) allocateBatch(ctx context.Context, tx pgx.Tx, order []string, byWorkflow map[string][]pending, out []BatchResult) error {
	if len(order) == 0 {
		return nil
	}
	counts := make([]int64, len(order))
	for i, id := range order {
		counts[i] = int64(len(byWorkflow[id]))
	}
	rows, err := tx.Query(ctx, batchAllocateSQL, order, counts)
	if err != nil {
		return fmt.Errorf("allocate instance ids: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var last int64
		if err := rows.Scan(&id, &last); err != nil {
			return fmt.Errorf("allocate instance ids: %w", err)
		}
		ps := byWorkflow[id]
		for k, p := range ps {
			out[p.i].InstanceID = last - int64(len(ps)-1-k)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("allocate instance ids: %w", err)
	}
	if n != len(order) {
		return fmt.Errorf("allocate instance ids: %d of %d locked workflows updated", n, len(order))
	}
	return nil
}

// startRound inserts one new run of each of the round's (distinct)
// workflows: PrepareStart's effects, then RoomNow's admission, then the
// rows and the start messages of the admitted runs.
func (s *Service) startRound(ctx context.Context, tx pgx.Tx, starts []BatchStart, round []pending,
	props map[string][]byte, out []BatchResult) error {
	strategies := make(map[string]run.Strategy, len(round))
	for _, p := range round {
		id := starts[p.i].WorkflowID
		strategies[id] = run.ParseStrategy(props[id])
	}
	drops, err := run.PrepareStarts(ctx, tx, strategies)
	if err != nil {
		return err
	}
	var ids []string
	var strict []bool
	for _, p := range round {
		id := starts[p.i].WorkflowID
		if _, dropped := drops[id]; !dropped && strategies[id].Concurrency > 0 {
			ids = append(ids, id)
			strict = append(strict, strategies[id].Rule == workflow.RunStrategyStrictSequential)
		}
	}
	rooms, err := run.Rooms(ctx, tx, ids, strict)
	if err != nil {
		return err
	}
	n := len(round)
	var (
		wfIDs      = make([]string, 0, n)
		iids       = make([]int64, 0, n)
		versions   = make([]int64, 0, n)
		uuids      = make([]uuid.UUID, 0, n)
		requestIDs = make([]*string, 0, n)
		groups     = make([]int32, 0, n)
		statuses   = make([]string, 0, n)
		runParams  = make([][]byte, 0, n)
		initiators = make([]map[string]any, 0, n)
		timelines  = make([][]instance.TimelineEvent, 0, n)
		timeouts   = make([]int64, 0, n)
		queued     = make([]bool, 0, n)
		msgGroups  []int32
		msgs       []run.StartMessage
		dropped    []event.Record
	)
	for _, p := range round {
		st := starts[p.i]
		res := &out[p.i]
		group := instance.GroupFor(st.WorkflowID, res.InstanceID, s.groupCount)
		timeline := []instance.TimelineEvent{instance.StatusEvent(string(instance.WorkflowCreated), createdReason(p.initiator))}
		res.Status = instance.WorkflowCreated
		runUUID := uuid.New()
		if reason, drop := drops[st.WorkflowID]; drop {
			res.Status = instance.WorkflowStopped
			timeline = append(timeline, instance.StatusEvent(string(instance.WorkflowStopped), reason))
			// Its status change is an event like any other (docs/events.md).
			ref := run.Ref{WorkflowID: st.WorkflowID, InstanceID: res.InstanceID, RunID: 1}
			dropped = append(dropped, run.DroppedRunEventOf(ref, p.wf, runUUID.String(), 0, run.RootCorrelation(ref)))
		} else {
			strategy := strategies[st.WorkflowID]
			res.Queued = !strategy.HasRoom(rooms[st.WorkflowID])
			if res.Queued {
				timeline = append(timeline, instance.LogEvent("INFO",
					fmt.Sprintf("queued by the %s run strategy", strategy.Rule)))
			} else {
				msgGroups = append(msgGroups, group)
				msgs = append(msgs, run.StartMessage{Ref: run.Ref{WorkflowID: st.WorkflowID, InstanceID: res.InstanceID, RunID: 1}, Group: group})
			}
		}
		var rid *string
		if st.RequestID != "" {
			rid = &st.RequestID
		}
		wfIDs, iids, versions = append(wfIDs, st.WorkflowID), append(iids, res.InstanceID), append(versions, st.Version)
		uuids, requestIDs, groups = append(uuids, runUUID), append(requestIDs, rid), append(groups, group)
		statuses, runParams, initiators = append(statuses, string(res.Status)), append(runParams, p.runParams), append(initiators, p.initiator)
		timelines, timeouts, queued = append(timelines, timeline), append(timeouts, p.timeout), append(queued, res.Queued)
	}
	tag, err := tx.Exec(ctx, batchInsertSQL, wfIDs, iids, versions, uuids, requestIDs, groups, statuses, runParams,
		initiators, timelines, timeouts, queued, s.groupCount, map[string]any{"policy": "START"})
	if err != nil {
		return fmt.Errorf("insert %d instances: %w", n, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("insert %d instances: %d inserted", n, tag.RowsAffected())
	}
	if err := event.Insert(ctx, tx, dropped...); err != nil {
		return err
	}
	return queue.EnqueueBatch(ctx, tx, queue.StartWorkflow, msgGroups, msgs)
}

// createdReason is the reason on a new run's CREATED event: for a run a
// trigger started, the initiator's own line, as Maestro writes it.
func createdReason(initiator map[string]any) string {
	typ, _ := initiator["type"].(string)
	if typ == "TIME" || typ == "SIGNAL" {
		if id, ok := initiator["trigger_uuid"].(string); ok {
			return fmt.Sprintf("%s-based trigger runs a new workflow instance by trigger uuid [%s]", typ, id)
		}
	}
	return "run requested"
}
