package trigger

// The package's SQL, named and kept together. The tables are defined in
// migrations/00020_time_trigger.sql.

// Sync: the workflow's active version, whether its time triggers are
// disabled, and the active version's time triggers.
const sqlSyncState = `
SELECT w.active_version, coalesce((w.properties->>'time_trigger_disabled')::boolean, false), v.definition->'time_triggers'
FROM workflow w
LEFT JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version = w.active_version
WHERE w.workflow_id = $1`

const triggerColumns = `t.workflow_id, t.trigger_index, t.workflow_version, t.trigger_key, t.trigger_uuid::text, t.definition,
    t.timezone, t.state, coalesce(t.error, ''), t.delay_seconds, t.next_schedule_at, t.next_fire_at, t.last_fire_at,
    t.last_instance_id, t.last_fired_at, t.missed_fires`

const sqlSelectTriggers = `SELECT ` + triggerColumns + ` FROM time_trigger t WHERE t.workflow_id = $1 ORDER BY t.trigger_index`

const sqlDeleteTriggers = `DELETE FROM time_trigger WHERE workflow_id = $1`

// Sync: the rows, as the JSON of []Trigger.
const sqlInsertTriggers = `
INSERT INTO time_trigger (workflow_id, trigger_index, workflow_version, trigger_key, trigger_uuid, definition, timezone,
    state, error, delay_seconds, next_schedule_at, next_fire_at, last_fire_at, last_instance_id, last_fired_at, missed_fires)
SELECT $1, r.trigger_index, r.workflow_version_id, r.trigger_key, r.trigger_uuid, r.time_trigger, r.timezone,
    r.state, nullif(r.error, ''), r.fuzzy_delay_seconds, r.next_schedule_time, r.next_fire_time, r.last_fire_time,
    r.last_workflow_instance_id, r.last_fired_at, r.missed_fire_times
FROM jsonb_to_recordset($2::jsonb) AS r(trigger_index integer, workflow_version_id bigint, trigger_key text,
    trigger_uuid uuid, time_trigger jsonb, timezone text, state text, error text, fuzzy_delay_seconds integer,
    next_schedule_time timestamptz, next_fire_time timestamptz, last_fire_time timestamptz,
    last_workflow_instance_id bigint, last_fired_at timestamptz, missed_fire_times bigint)`

// List: a workflow's triggers with the status of the latest run of the
// instance each started last.
const sqlListTriggers = `
SELECT ` + triggerColumns + `, (SELECT i.status FROM workflow_instance i
        WHERE i.workflow_id = t.workflow_id AND i.instance_id = t.last_instance_id ORDER BY i.run_id DESC LIMIT 1)
FROM time_trigger t WHERE t.workflow_id = $1 ORDER BY t.trigger_index`

// Claim: due triggers, earliest first, each with its workflow's row locked
// as a start locks it. SKIP LOCKED on both: a scheduler never waits, so it
// cannot deadlock with a definition change (which locks the workflow, then
// its triggers) or another scheduler; a trigger whose workflow is busy is
// claimed by the next batch.
const sqlClaim = `
SELECT ` + triggerColumns + `
FROM time_trigger t JOIN workflow w ON w.workflow_id = t.workflow_id
WHERE t.state = 'ACTIVE' AND t.next_fire_at <= $1
ORDER BY t.next_fire_at
LIMIT $2
FOR NO KEY UPDATE OF t, w SKIP LOCKED`

// Advance: each claimed trigger's next fire time, and what it fired.
const sqlAdvance = `
UPDATE time_trigger t SET
    state = CASE WHEN a.invalid THEN 'INVALID' WHEN a.next IS NULL THEN 'EXHAUSTED' ELSE 'ACTIVE' END,
    next_schedule_at = CASE WHEN a.invalid THEN NULL ELSE a.next END,
    next_fire_at = CASE WHEN a.invalid THEN NULL ELSE a.next + make_interval(secs => t.delay_seconds) END,
    last_fire_at = coalesce(a.fire, t.last_fire_at),
    last_instance_id = CASE WHEN a.iid > 0 THEN a.iid ELSE t.last_instance_id END,
    last_fired_at = CASE WHEN a.fire IS NOT NULL THEN $9 ELSE t.last_fired_at END,
    missed_fires = t.missed_fires + a.missed,
    error = nullif(a.error, ''),
    updated_at = now()
FROM unnest($1::text[], $2::integer[], $3::timestamptz[], $4::timestamptz[], $5::bigint[], $6::bigint[], $7::text[],
    $8::boolean[]) AS a(id, idx, next, fire, iid, missed, error, invalid)
WHERE t.workflow_id = a.id AND t.trigger_index = a.idx AND t.state = 'ACTIVE'`

// Pending: workflows whose rows must be built (see the migration), each
// with its workflow locked; SKIP LOCKED for the same reason as sqlClaim.
const sqlClaimPending = `
SELECT p.workflow_id FROM time_trigger_pending p JOIN workflow w ON w.workflow_id = p.workflow_id
LIMIT $1 FOR UPDATE OF p, w SKIP LOCKED`

const sqlDeletePending = `DELETE FROM time_trigger_pending WHERE workflow_id = ANY($1::text[])`

// Due: how many triggers are due, for the scheduler's log and tests.
const sqlCountDue = `SELECT count(*) FROM time_trigger WHERE state = 'ACTIVE' AND next_fire_at <= $1`

// SyncSignals: the workflow's active version, whether its signal triggers
// are disabled, and the active version's signal triggers.
const sqlSignalSyncState = `
SELECT w.active_version, coalesce((w.properties->>'signal_trigger_disabled')::boolean, false), v.definition->'signal_triggers'
FROM workflow w
LEFT JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version = w.active_version
WHERE w.workflow_id = $1`

const sqlSignalSyncRows = `
SELECT trigger_uuid::text, trigger_index, workflow_version, state FROM signal_trigger WHERE workflow_id = $1`

// SyncSignals: triggers the active version lacks go, with their
// subscriptions and what they waited for.
const sqlSignalDeleteGone = `
DELETE FROM signal_trigger WHERE workflow_id = $1 AND NOT (trigger_uuid = ANY($2::uuid[]))`

// SyncSignals: the rows, as the JSON of []SignalTrigger; a kept trigger
// keeps its counters.
const sqlSignalUpsert = `
INSERT INTO signal_trigger (workflow_id, trigger_uuid, trigger_index, workflow_version, definition, signal_names, state)
SELECT $1, r.trigger_uuid, r.trigger_index, r.workflow_version_id, r.signal_trigger, r.signal_names, r.state
FROM jsonb_to_recordset($2::jsonb) AS r(trigger_uuid uuid, trigger_index integer, workflow_version_id bigint,
    signal_trigger jsonb, signal_names text[], state text)
ON CONFLICT (workflow_id, trigger_uuid) DO UPDATE SET
    trigger_index = EXCLUDED.trigger_index, workflow_version = EXCLUDED.workflow_version, state = EXCLUDED.state,
    updated_at = now()
WHERE (signal_trigger.trigger_index, signal_trigger.workflow_version, signal_trigger.state) IS DISTINCT FROM
      (EXCLUDED.trigger_index, EXCLUDED.workflow_version, EXCLUDED.state)`

// SyncSignals: a disabled trigger subscribes to nothing and forgets the
// signals it waited for.
const sqlSignalUnsubscribe = `
WITH s AS (
    DELETE FROM signal_subscription WHERE workflow_id = $1 AND trigger_uuid = ANY($2::uuid[]))
DELETE FROM signal_trigger_pending WHERE workflow_id = $1 AND trigger_uuid = ANY($2::uuid[])`

// SyncSignals: an active trigger subscribes to each of its signal names.
const sqlSignalSubscribe = `
INSERT INTO signal_subscription (signal_name, workflow_id, trigger_uuid)
SELECT unnest(t.signal_names), t.workflow_id, t.trigger_uuid FROM signal_trigger t
WHERE t.workflow_id = $1 AND t.trigger_uuid = ANY($2::uuid[])
ON CONFLICT DO NOTHING`

// ListSignals: a workflow's signal triggers with how many signals each
// holds waiting for partners.
const sqlSignalList = `
SELECT t.workflow_id, t.trigger_uuid::text, t.trigger_index, t.workflow_version, t.definition, t.signal_names, t.state,
    t.match_count, t.start_count, t.last_matched_at, t.last_signal_ids, t.last_instance_id, coalesce(t.error, ''),
    (SELECT count(*) FROM signal_trigger_pending p WHERE p.workflow_id = t.workflow_id AND p.trigger_uuid = t.trigger_uuid)
FROM signal_trigger t WHERE t.workflow_id = $1 ORDER BY t.trigger_index`

// The broker's matching. Subscriptions: the ACTIVE triggers subscribed to
// any of a set of names, among a set of workflows (those it has locked).
const sqlSubscriptions = `
SELECT s.signal_name, t.workflow_id, t.trigger_uuid::text, t.definition, t.signal_names
FROM signal_subscription s JOIN signal_trigger t USING (workflow_id, trigger_uuid)
WHERE s.signal_name = ANY($1::text[]) AND ($2::text[] IS NULL OR t.workflow_id = ANY($2::text[]))
  AND t.state = 'ACTIVE'`

// The signal instances a set of (trigger, join key) pairs hold waiting,
// oldest first, with their params.
const sqlPendingFor = `
SELECT p.workflow_id, p.trigger_uuid::text, p.join_key, p.signal_name, p.seq, s.params
FROM unnest($1::text[], $2::uuid[], $3::text[]) AS k(w, u, j)
JOIN signal_trigger_pending p ON p.workflow_id = k.w AND p.trigger_uuid = k.u AND p.join_key = k.j
JOIN signal_instance s ON s.seq = p.seq
ORDER BY p.seq`

const sqlPendingAdd = `
INSERT INTO signal_trigger_pending (workflow_id, trigger_uuid, join_key, signal_name, seq)
SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::bigint[])
ON CONFLICT DO NOTHING`

const sqlPendingConsume = `
DELETE FROM signal_trigger_pending p
USING unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::bigint[]) AS k(w, u, j, n, s)
WHERE p.workflow_id = k.w AND p.trigger_uuid = k.u AND p.join_key = k.j AND p.signal_name = k.n AND p.seq = k.s`

// What matching did to each trigger: counters, the last set, the error.
const sqlSignalMatched = `
UPDATE signal_trigger t SET
    match_count = t.match_count + m.matches, start_count = t.start_count + m.starts,
    last_matched_at = now(), last_signal_ids = m.ids,
    last_instance_id = CASE WHEN m.iid > 0 THEN m.iid ELSE t.last_instance_id END,
    error = nullif(m.error, ''), updated_at = now()
FROM unnest($1::text[], $2::uuid[], $3::bigint[], $4::bigint[], $5::jsonb[], $6::bigint[], $7::text[])
    AS m(w, u, matches, starts, ids, iid, error)
WHERE t.workflow_id = m.w AND t.trigger_uuid = m.u`

// The broker locks the workflows whose triggers a batch may start, in id
// order, as a start does (so that it cannot deadlock with a start or a
// definition change), and reads their active versions.
const sqlLockWorkflows = `
SELECT workflow_id, active_version FROM workflow WHERE workflow_id = ANY($1::text[])
ORDER BY workflow_id FOR NO KEY UPDATE`
