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
