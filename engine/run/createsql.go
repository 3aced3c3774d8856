package run

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
)

// The SQL of Create.

// lockWorkflowsSQL locks workflows in id order, so that creations of
// overlapping workflows cannot deadlock, and reads their properties.
const lockWorkflowsSQL = `
SELECT workflow_id, properties FROM workflow WHERE workflow_id = ANY($1::text[])
ORDER BY workflow_id FOR NO KEY UPDATE`

// dedupSQL finds the first runs already started with request ids.
const dedupSQL = `
SELECT i.workflow_id, i.request_id, i.instance_id, i.uuid::text, i.group_id, i.status, i.queued
FROM unnest($1::text[], $2::text[]) AS k(id, request_id)
JOIN workflow_instance i ON i.workflow_id = k.id AND i.request_id = k.request_id AND i.run_id = 1`

// lockAllocateOneSQL locks one workflow, allocates $2 instance ids and
// reads its properties: the common start in one statement. An UPDATE of
// a non-key column takes the same FOR NO KEY UPDATE lock as
// lockWorkflowsSQL.
const lockAllocateOneSQL = `
UPDATE workflow SET latest_instance_id = latest_instance_id + $2
WHERE workflow_id = $1
RETURNING properties, latest_instance_id`

// allocateSQL allocates n instance ids per workflow in one statement.
const allocateSQL = `
UPDATE workflow w SET latest_instance_id = w.latest_instance_id + c.n
FROM unnest($1::text[], $2::bigint[]) AS c(id, n)
WHERE w.workflow_id = c.id
RETURNING w.workflow_id, w.latest_instance_id`

// insertRunsSQL is the one statement of a round of Create: it admits,
// inserts the runs and enqueues their start messages. A run's run params
// are $31[rp_base] || its own ($32; 0: its own alone), its evaluated
// params likewise with $33: the objects a foreach batch's runs share are
// sent and parsed once (New.RunParamsBase, Local.ParamsBase). A run's
// first timeline events are $31[tl_base] ($34) when other runs of the
// statement share them (a trigger's or a backfill's batch: 200 bytes of
// JSON parsed once, not once per run), else its own ($16). $28 is the
// traceparent of the creating span (engine/tracing), shared by the runs
// one call creates and their messages. A run's definition is $2[def]
// (definitions shared by many runs are sent once), or, with def 0, copied
// from its version row. A run whose generation ($19) names the one under
// which node $1 holds its group is created IN_PROGRESS under it (a local
// start), with its evaluated params ($20), the pick-up entries ($3) on its
// timeline and its start event ($26, written with the row's seq); the
// group rows are locked FOR KEY SHARE so that a takeover, which claims
// them FOR UPDATE, comes after this transaction and then adopts the run. Every other run is created with its
// status ($12: CREATED or, dropped, STOPPED).
//
// Admission (room): a run with a limit ($18, its workflow's concurrency;
// NULL admits it at once) is queued, with the event $30 of its
// workflow's first run in the statement appended to its timeline (the
// others send NULL: one event per workflow to parse, not one per run), when its workflow has limit live admitted runs, a queued run,
// or ($29, STRICT_SEQUENTIAL) a failed run that blocks it; a limit of 0
// (paused) always queues. The k-th run with a limit of one workflow in
// the statement (k from 0, in the call's order) counts the k before it
// as live: they were admitted unless one was queued, and then so is it,
// as if each had been inserted by a statement of its own. The stored
// runs are counted once per workflow (room), not once per new run: a
// backfill's chunk of 250 runs of one workflow with 750 live would
// otherwise count 250 × 750 index entries. The caller
// holds the workflow locks, taken by an earlier statement, so this
// statement's snapshot sees every run of the workflow another start
// committed. A run_config ($21) of NULL is a start's, {"policy": "START"}.
// The admitted CREATED runs get their start_workflow messages
// and notifications here too: one notification per flow group for up to
// 300 messages, not one per message (its end, the last %s:
// insertRunsPlainSQL, or insertRunsNotedSQL with the messages' payloads
// returned). In a round of up to maxNotedStarts runs (a lone
// start, or the starts the API gathers from a burst; not a trigger's or
// a backfill's batch), the start of a first run (run_id 1) admitted at
// once with its version's definition gets a notification of its own
// carrying its run (note, run.StartNote), so that the engine can start
// it without a claim and a read: a round trip a network away, and a
// claim's commit and a read of the run's row for PostgreSQL. A restart
// is never noted: its carried steps are inserted after this statement,
// and its run must be read with them.
const insertRunsSQL = `
WITH owned AS (
    SELECT group_id, generation FROM flow_group
    WHERE $1::text <> '' AND owner = $1
      AND (group_id, generation) IN (SELECT * FROM unnest($8::integer[], $19::bigint[]))
    FOR KEY SHARE),
room AS MATERIALIZED (
    SELECT w.workflow_id, w.lim, w.strict,
        (SELECT count(*) FROM (SELECT 1 FROM workflow_instance
             WHERE workflow_id = w.workflow_id AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued
             LIMIT w.lim) AS live) AS live,
        EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = w.workflow_id AND queued)
            OR w.strict AND EXISTS (
                SELECT 1 FROM workflow_instance f
                WHERE f.workflow_id = w.workflow_id AND f.status = 'FAILED' AND NOT f.unblocked
                  AND NOT EXISTS (SELECT 1 FROM workflow_instance n
                      WHERE n.workflow_id = f.workflow_id AND n.instance_id = f.instance_id AND n.run_id > f.run_id)) AS blocked
    FROM (SELECT DISTINCT workflow_id, lim, strict FROM unnest($4::text[], $18::bigint[], $29::boolean[]) AS x(workflow_id, lim, strict)
          WHERE lim > 0) AS w),
r AS MATERIALIZED (
    SELECT u.*, CASE
        WHEN u.lim IS NULL THEN false
        WHEN u.lim <= 0 THEN true
        ELSE m.live + u.k >= u.lim OR m.blocked
        END AS is_queued
    FROM (SELECT u.*, row_number() OVER w - 1 AS k, first_value(u.queued_event) OVER w AS first_queued_event
        FROM unnest($4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::integer[], $9::uuid[], $10::text[],
            $11::integer[], $12::text[], $13::integer[], $14::jsonb[], $15::jsonb[], $16::jsonb[], $17::bigint[],
            $18::bigint[], $19::bigint[], $20::jsonb[], $21::jsonb[], $22::jsonb[], $23::text[], $24::integer[],
            $25::text[], $29::boolean[], $30::jsonb[], $32::integer[], $33::integer[], $34::integer[]) WITH ORDINALITY
        AS u(workflow_id, instance_id, run_id, version, group_id, uuid, request_id, group_count, status, def,
            run_params, initiator, timeline, timeout, lim, gen, params, run_config, parent, parent_key, depth,
            correlation, strict, queued_event, rp_base, p_base, tl_base, ord)
        WINDOW w AS (PARTITION BY u.workflow_id, u.lim IS NULL ORDER BY u.ord)) AS u
    LEFT JOIN room m ON m.workflow_id = u.workflow_id AND m.lim = u.lim AND m.strict = u.strict),
ins AS (
INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid, request_id, group_count,
    group_id, status, generation, seq, start_time, params, definition, run_params, initiator, timeline,
    timeout_seconds, queued, run_config, parent, parent_key, depth, correlation_id, end_time, trace_context)
SELECT r.workflow_id, r.instance_id, r.run_id, r.version, r.uuid, r.request_id, r.group_count, r.group_id,
    CASE WHEN o.group_id IS NULL THEN r.status ELSE 'IN_PROGRESS' END,
    COALESCE(o.generation, 0),
    CASE WHEN o.group_id IS NULL THEN 0 ELSE 1 END,
    CASE WHEN o.group_id IS NOT NULL THEN now() END,
    CASE WHEN o.group_id IS NULL THEN '{}'::jsonb
         WHEN r.p_base > 0 THEN ($31::jsonb[])[r.p_base] || r.params
         ELSE r.params END,
    COALESCE(($2::jsonb[])[r.def], v.definition),
    CASE WHEN r.rp_base > 0 THEN ($31::jsonb[])[r.rp_base] || r.run_params ELSE r.run_params END,
    r.initiator,
    CASE WHEN o.group_id IS NOT NULL THEN COALESCE(($31::jsonb[])[r.tl_base], r.timeline) || $3::jsonb
         WHEN r.is_queued THEN COALESCE(($31::jsonb[])[r.tl_base], r.timeline) || r.first_queued_event
         ELSE COALESCE(($31::jsonb[])[r.tl_base], r.timeline) END,
    r.timeout, r.is_queued, COALESCE(r.run_config, '{"policy": "START"}'::jsonb), r.parent, r.parent_key, r.depth, r.correlation,
    CASE WHEN r.status = 'STOPPED' THEN now() END,
    NULLIF($28::text, '')
FROM r
LEFT JOIN owned o ON o.group_id = r.group_id AND o.generation = r.gen
LEFT JOIN workflow_version v ON r.def = 0 AND v.workflow_id = r.workflow_id AND v.version = r.version
%s
RETURNING workflow_id, instance_id, run_id, group_id, status, seq, start_time, queued),
ev AS (
    ` + event.InsertSQL + `
    SELECT $27::smallint, ins.workflow_id, ins.seq, e.event
    FROM ins JOIN unnest($4::text[], $5::bigint[], $6::bigint[], $26::json[]) AS e(workflow_id, instance_id, run_id, event)
      ON e.workflow_id = ins.workflow_id AND e.instance_id = ins.instance_id AND e.run_id = ins.run_id
    WHERE ins.status = 'IN_PROGRESS' AND e.event IS NOT NULL),
msg AS (
    ` + queue.InsertSQL + `
    SELECT %s, ins.group_id, json_build_object('workflow_id', ins.workflow_id, 'instance_id', ins.instance_id,
        'run_id', ins.run_id, 'group_id', ins.group_id), NULLIF($28::text, '')
    FROM ins WHERE ins.status = 'CREATED' AND NOT ins.queued
    RETURNING message_id, group_id%s)%s`

// insertRunsNotedSQL ends insertRunsSQL for a round of up to
// maxNotedStarts runs: each first run admitted at once with its version's
// definition is noted (note: its run.StartNote, with the sha256 of the
// definition computed once per version, noted), its message notified on
// its own with it, the others together (queue.NotifyNotedSQL).
const insertRunsNotedSQL = `,
noted AS MATERIALIZED (
    SELECT v.workflow_id, v.version, encode(sha256(convert_to(v.definition::text, 'UTF8')), 'base64') AS sha
    FROM workflow_version v
    WHERE (v.workflow_id, v.version) IN (SELECT workflow_id, version FROM r WHERE def = 0 AND rp_base = 0 AND run_id = 1)
      AND pg_column_size(v.definition) <= 262144),
note AS (
    SELECT m.message_id, m.group_id, json_build_object('workflow_id', r.workflow_id, 'instance_id', r.instance_id, 'run_id', r.run_id,
        'group_id', r.group_id, 'version', r.version, 'group_count', r.group_count, 'uuid', r.uuid,
        'run_params', r.run_params, 'initiator', r.initiator, 'timeout', r.timeout,
        'run_config', COALESCE(r.run_config, '{"policy": "START"}'::jsonb), 'parent', r.parent, 'depth', r.depth,
        'correlation', COALESCE(r.correlation, r.workflow_id || ':' || r.instance_id || ':' || r.run_id),
        'trace', NULLIF($28::text, ''), 'backfill_id', COALESCE(r.initiator->>'backfill_id', ''),
        'incremental', r.initiator->'incremental',
        'definition_sha256', d.sha,
        'owner', COALESCE(w.owner, '')) AS run
    FROM (SELECT message_id, group_id, payload->>'workflow_id' AS workflow_id, (payload->>'instance_id')::bigint AS instance_id,
              (payload->>'run_id')::bigint AS run_id
          FROM msg OFFSET 0) AS m -- the keys taken out once, not once per pair the join compares
    JOIN r ON r.workflow_id = m.workflow_id AND r.instance_id = m.instance_id AND r.run_id = m.run_id
    JOIN noted d ON d.workflow_id = r.workflow_id AND d.version = r.version
    LEFT JOIN workflow w ON w.workflow_id = split_part(r.workflow_id, ':', 1)
    WHERE r.def = 0 AND r.rp_base = 0 AND r.run_id = 1)
SELECT ins.workflow_id, ins.instance_id, ins.run_id, ins.status, ins.start_time, ins.queued, n.notified
FROM ins CROSS JOIN (` + queue.NotifyNotedSQL + `) AS n`

// insertRunsPlainSQL ends insertRunsSQL for a larger round: its messages
// are notified together (queue.NotifyManySQL), none noted.
const insertRunsPlainSQL = `
SELECT ins.workflow_id, ins.instance_id, ins.run_id, ins.status, ins.start_time, ins.queued, n.notified
FROM ins CROSS JOIN (` + queue.NotifyManySQL + `) AS n`

// maxNotedStarts is the most runs a round of Create may have for its
// starts to be noted: one notification each is a few microseconds of its
// commit, against a claim and a read saved; the larger rounds are
// triggers', signals' and backfills' batches (hundreds of runs), whose
// creation rate (BenchmarkBatchStarts) the notes would cost.
const maxNotedStarts = 100

// insertRunsStatement is insertRunsSQL; with skipExisting a run whose row
// exists already is left out rather than failing the statement; with
// noted (a round of up to maxNotedStarts runs) the starts are noted.
func insertRunsStatement(skipExisting, noted bool) string {
	switch {
	case skipExisting && noted:
		return insertRunsSkipNotedSQL
	case skipExisting:
		return insertRunsSkipSQL
	case noted:
		return insertRunsFailNotedSQL
	}
	return insertRunsFailSQL
}

var (
	startQueue             = strconv.Itoa(int(queue.StartWorkflow))
	plainEnd               = fmt.Sprintf(insertRunsPlainSQL, startQueue)
	notedEnd               = fmt.Sprintf(insertRunsNotedSQL, startQueue)
	insertRunsFailSQL      = fmt.Sprintf(insertRunsSQL, "", startQueue, "", plainEnd)
	insertRunsSkipSQL      = fmt.Sprintf(insertRunsSQL, "ON CONFLICT DO NOTHING", startQueue, "", plainEnd)
	insertRunsFailNotedSQL = fmt.Sprintf(insertRunsSQL, "", startQueue, ", payload", notedEnd)
	insertRunsSkipNotedSQL = fmt.Sprintf(insertRunsSQL, "ON CONFLICT DO NOTHING", startQueue, ", payload", notedEnd)
)

// The first statement of a single start (execution.Start): under the
// workflow lock it allocates the run's instance id, resolves the version
// to run and reads its definition unless the caller has it decoded
// already, and finds a stored run with the start's request id. Create
// then needs no lock, allocation or dedup statement of its own
// (Options.Props, New.Ref.InstanceID, Options.Deduplicated), so a start
// admitted at once is BEGIN, this, Create's one INSERT and COMMIT.

// StartLock is what LockForStart read.
type StartLock struct {
	// Props are the workflow's current properties.
	Props []byte
	// InstanceID is the instance id allocated to the run.
	InstanceID int64
	// Version is the version the selector names, 0 when it names none
	// (no active version, or a number beyond the latest);
	// LatestVersion the workflow's newest.
	Version, LatestVersion int64
	// Found says the version's row was read; it can be missing while
	// Version is set when the version was pushed between the statement's
	// snapshot and the lock (the caller tries again).
	Found bool
	// Fingerprint is the version's definition fingerprint; Definition its
	// JSON, nil when the fingerprint is the one the caller passed.
	Fingerprint []byte
	Definition  []byte
	// Duplicate is the run 1 that has the start's request id, if any.
	Duplicate *Created
	// Owner and Operators (the raw properties.access_control.operators)
	// are who may act on the workflow, as locked: a caller's authorization
	// is decided on them before the run is inserted, with no statement of
	// its own, and an access change committed before the lock is seen.
	Owner     string
	Operators []byte
}

// lockForStartSQL: $1 workflow, $2 version number (0 for a name), $3 the
// name (latest, active, default), $4 the fingerprint whose definition the
// caller has, $5 the request id (” for none). The UPDATE takes the same
// FOR NO KEY UPDATE lock as LockWorkflow and returns the row as it is
// once locked.
const lockForStartSQL = `
WITH w AS (
    UPDATE workflow SET latest_instance_id = latest_instance_id + 1
    WHERE workflow_id = $1
    RETURNING properties, latest_instance_id, latest_version, owner, properties->'access_control'->'operators' AS operators, CASE
        WHEN $2::bigint > 0 THEN $2::bigint
        WHEN $3::text = 'latest' THEN latest_version
        WHEN $3::text = 'active' THEN active_version
        ELSE coalesce(active_version, latest_version) END AS version)
SELECT w.properties, w.latest_instance_id, coalesce(w.version, 0), w.latest_version, v.version IS NOT NULL,
    v.fingerprint, CASE WHEN v.fingerprint = $4::bytea THEN NULL ELSE v.definition END,
    d.instance_id, d.uuid::text, d.group_id, d.status, d.queued, w.owner, w.operators
FROM w
LEFT JOIN workflow_version v ON v.workflow_id = $1 AND v.version = w.version
LEFT JOIN workflow_instance d ON $5::text <> '' AND d.workflow_id = $1 AND d.request_id = $5 AND d.run_id = 1`

// LockForStart locks workflowID, allocates one instance id and reads the
// version named by n (> 0) or name, inside tx; see StartLock. known is the
// fingerprint of a definition the caller has decoded. It returns
// ErrWorkflowGone when the workflow does not exist. A caller that does not
// go on to create the run (a duplicate, a missing version) rolls tx back,
// so that the instance id is not spent.
func LockForStart(ctx context.Context, tx Tx, workflowID string, n int64, name string, known []byte, requestID string) (*StartLock, error) {
	var (
		l      StartLock
		dupID  *int64
		dupUID *string
		dupGrp *int32
		dupSt  *instance.WorkflowStatus
		dupQ   *bool
	)
	if known == nil {
		known = []byte{}
	}
	err := tx.QueryRow(ctx, lockForStartSQL, workflowID, n, name, known, requestID).Scan(&l.Props, &l.InstanceID,
		&l.Version, &l.LatestVersion, &l.Found, &l.Fingerprint, &l.Definition, &dupID, &dupUID, &dupGrp, &dupSt, &dupQ, &l.Owner, &l.Operators)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("workflow %s: %w", workflowID, ErrWorkflowGone)
	}
	if err != nil {
		return nil, fmt.Errorf("lock workflow %s for a start: %w", workflowID, err)
	}
	if dupID != nil {
		l.Duplicate = &Created{Ref: Ref{WorkflowID: workflowID, InstanceID: *dupID, RunID: 1}, UUID: *dupUID,
			GroupID: *dupGrp, Status: *dupSt, Queued: *dupQ, Duplicated: true}
	}
	return &l, nil
}

// lockAllocateManySQL locks workflows $1 (sorted, distinct) in id order,
// allocates $2 instance ids to each and reads their properties and who may
// act on them: a batch's lock and allocation in one statement. The locks
// are taken by the materialized CTE, whose rows come in id order however
// the join reads them, before the UPDATE writes a row.
const lockAllocateManySQL = `
WITH locked AS MATERIALIZED (
    SELECT workflow_id FROM workflow WHERE workflow_id = ANY($1::text[])
    ORDER BY workflow_id FOR NO KEY UPDATE)
UPDATE workflow w SET latest_instance_id = w.latest_instance_id + c.n
FROM unnest($1::text[], $2::bigint[]) AS c(id, n)
WHERE w.workflow_id = c.id AND c.id IN (SELECT workflow_id FROM locked)
RETURNING w.workflow_id, w.properties, w.latest_instance_id, w.owner, w.properties->'access_control'->'operators'`

// BatchLock is what ReadLockAllocate read of one workflow.
type BatchLock struct {
	// Props are its properties, as locked.
	Props []byte
	// Last is its latest instance id once the ids were allocated: the
	// caller's runs take the n ids up to it, in order.
	Last int64
	// Owner and Operators (the raw properties.access_control.operators)
	// are who may act on the workflow, as locked.
	Owner     string
	Operators []byte
}

// QueueLockAllocate queues on b the statement that locks the workflows
// ids (sorted, distinct) in id order and allocates counts[i] instance ids
// to ids[i], for a caller that sends it in one round trip with other
// statements (execution.StartBatchTx); ReadLockAllocate reads its answer
// from the batch's results, in queue order. A workflow that does not
// exist is absent from the answer. The caller passes the runs to Create
// with their instance ids and Options.Props.
func QueueLockAllocate(b *pgx.Batch, ids []string, counts []int64) {
	b.Queue(lockAllocateManySQL, ids, counts)
}

// ReadLockAllocate reads the answer of the statement QueueLockAllocate
// queued for n workflows.
func ReadLockAllocate(br pgx.BatchResults, n int) (map[string]BatchLock, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("lock %d workflows and allocate their instance ids: %w", n, err)
	}
	defer rows.Close()
	out := make(map[string]BatchLock, n)
	for rows.Next() {
		var id string
		var l BatchLock
		if err := rows.Scan(&id, &l.Props, &l.Last, &l.Owner, &l.Operators); err != nil {
			return nil, fmt.Errorf("lock %d workflows and allocate their instance ids: %w", n, err)
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock %d workflows and allocate their instance ids: %w", n, err)
	}
	return out, nil
}

// giveBackSQL returns the last $2 instance ids of each workflow $1 that
// QueueLockAllocate's statement allocated and no run took (a start found
// a duplicate or refused once the workflows were locked); the caller
// holds the locks.
const giveBackSQL = `
UPDATE workflow w SET latest_instance_id = w.latest_instance_id - c.n
FROM unnest($1::text[], $2::bigint[]) AS c(id, n)
WHERE w.workflow_id = c.id`

// GiveBack returns the counts[i] highest instance ids of ids[i], which
// QueueLockAllocate's statement allocated in tx and no run took: a caller
// that allocates for every start it may create before it knows which it
// will (the duplicates of stored runs, the refusals are known only under
// the lock) gives the rest back, so that the workflow's ids stay dense. The runs
// created took the lowest of the allocated ids, and the workflows are
// still locked, so no other transaction allocated above them.
func GiveBack(ctx context.Context, tx Tx, ids []string, counts []int64) error {
	if len(ids) == 0 {
		return nil
	}
	tag, err := tx.Exec(ctx, giveBackSQL, ids, counts)
	if err != nil {
		return fmt.Errorf("give back the unused instance ids of %d workflows: %w", len(ids), err)
	}
	if tag.RowsAffected() != int64(len(ids)) {
		return fmt.Errorf("give back the unused instance ids of %d workflows: %d updated: %w", len(ids), tag.RowsAffected(), ErrWorkflowGone)
	}
	return nil
}

// StartKey names a first run by its workflow and request id.
type StartKey struct{ WorkflowID, RequestID string }

// FindStarted finds the first runs (run_id 1) already started with the
// request ids requestIDs[i] of the workflows workflowIDs[i], as Created
// duplicates. Under the workflows' locks (taken by an earlier statement
// of tx) it sees every such run another transaction committed.
func FindStarted(ctx context.Context, tx Tx, workflowIDs, requestIDs []string) (map[StartKey]Created, error) {
	if len(workflowIDs) == 0 {
		return map[StartKey]Created{}, nil
	}
	rows, err := tx.Query(ctx, dedupSQL, workflowIDs, requestIDs)
	return readStarted(rows, err)
}

// QueueFindStarted queues FindStarted's statement on b (when there is a
// request id to look up), for a caller that sends it in one round trip
// with other statements: queued after QueueLockAllocate's, it still runs
// after the locks are held, in a snapshot of its own (see
// ReadFindStarted). ReadFindStarted reads its answer.
func QueueFindStarted(b *pgx.Batch, workflowIDs, requestIDs []string) {
	if len(workflowIDs) > 0 {
		b.Queue(dedupSQL, workflowIDs, requestIDs)
	}
}

// ReadFindStarted reads the answer of the statement QueueFindStarted
// queued for len(workflowIDs) request ids: FindStarted's. PostgreSQL runs
// a pipeline's statements one after the other, each bound (and so given
// its READ COMMITTED snapshot) only once the one before it has finished:
// queued after the locking statement, the lookup's snapshot is taken with
// the locks held and sees every run another transaction committed under
// them, as when it is sent on its own.
func ReadFindStarted(br pgx.BatchResults, workflowIDs []string) (map[StartKey]Created, error) {
	if len(workflowIDs) == 0 {
		return map[StartKey]Created{}, nil
	}
	rows, err := br.Query()
	return readStarted(rows, err)
}

// readStarted reads dedupSQL's rows.
func readStarted(rows pgx.Rows, err error) (map[StartKey]Created, error) {
	if err != nil {
		return nil, fmt.Errorf("find duplicate starts: %w", err)
	}
	defer rows.Close()
	stored := map[StartKey]Created{}
	for rows.Next() {
		var k StartKey
		c := Created{Duplicated: true, Ref: Ref{RunID: 1}}
		if err := rows.Scan(&k.WorkflowID, &k.RequestID, &c.Ref.InstanceID, &c.UUID, &c.GroupID, &c.Status, &c.Queued); err != nil {
			return nil, fmt.Errorf("find duplicate starts: %w", err)
		}
		c.Ref.WorkflowID = k.WorkflowID
		stored[k] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find duplicate starts: %w", err)
	}
	return stored, nil
}
