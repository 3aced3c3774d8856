package incremental

// The SQL of the watermark tables (migrations/00210_incremental.sql).
// A change's place in a table's history is (commit_time, snapshot_id):
// Iceberg snapshot ids are not ordered, commit times are (ties broken by
// the id so that the order is total).

// sqlRecordWatermarks creates the watermark rows of the tables of a batch
// of changes ($1 workflow, $2 trigger, $3 tables).
const sqlRecordWatermarks = `
INSERT INTO incremental_watermark (workflow_id, table_ref, trigger_uuid)
SELECT DISTINCT $1::text, t, $2::text FROM unnest($3::text[]) AS t
ON CONFLICT (workflow_id, table_ref) DO NOTHING`

// sqlRecordChanges stores the changes; a redelivered one is the row it
// has.
const sqlRecordChanges = `
INSERT INTO incremental_change (workflow_id, table_ref, snapshot_id, parent_snapshot_id, commit_time, operation, signal_seq)
SELECT $1::text, c.table_ref, c.snapshot_id, c.parent_snapshot_id, c.commit_time, c.operation, c.signal_seq
FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::bigint[])
    AS c(table_ref, snapshot_id, parent_snapshot_id, commit_time, operation, signal_seq)
ON CONFLICT (workflow_id, table_ref, snapshot_id) DO NOTHING`

// sqlRecordLatest moves each table's latest change forward to the newest
// of the batch.
const sqlRecordLatest = `
UPDATE incremental_watermark w
SET latest_snapshot_id = m.snapshot_id, latest_commit_time = m.commit_time, trigger_uuid = $2, modify_time = now()
FROM (SELECT DISTINCT ON (table_ref) table_ref, snapshot_id, commit_time
      FROM unnest($3::text[], $4::bigint[], $5::bigint[]) AS c(table_ref, snapshot_id, commit_time)
      ORDER BY table_ref, commit_time DESC, snapshot_id DESC) m
WHERE w.workflow_id = $1 AND w.table_ref = m.table_ref
  AND (m.commit_time, m.snapshot_id) > (w.latest_commit_time, w.latest_snapshot_id)`

// planColumns lock the due watermarks of ($1 workflows, $2 tables).
const planLock = `
SELECT w.workflow_id, w.table_ref, w.trigger_uuid, w.runs_started + 1, w.snapshot_id, w.commit_time,
       w.latest_snapshot_id, w.latest_commit_time
FROM incremental_watermark w
JOIN unnest($1::text[], $2::text[]) AS k(workflow_id, table_ref)
  ON w.workflow_id = k.workflow_id AND w.table_ref = k.table_ref
WHERE w.inflight_instance_id IS NULL
  AND (w.latest_commit_time, w.latest_snapshot_id) > (w.attempted_commit_time, w.attempted_snapshot_id)
ORDER BY w.workflow_id, w.table_ref
FOR UPDATE OF w`

const (
	sqlPlan           = planLock
	sqlPlanSkipLocked = planLock + ` SKIP LOCKED`
)

// sqlRangeStats counts the changes received in the range ($3, $4] (as
// commit time and snapshot pairs) and reads the signal of its last one.
const sqlRangeStats = `
SELECT count(*), COALESCE(bool_or(operation = 'overwrite'), false), COALESCE(bool_or(operation = 'delete'), false),
       COALESCE((SELECT signal_seq FROM incremental_change
                 WHERE workflow_id = $1 AND table_ref = $2 AND snapshot_id = $6), 0)
FROM incremental_change
WHERE workflow_id = $1 AND table_ref = $2
  AND (commit_time, snapshot_id) > ($3::bigint, $4::bigint)
  AND (commit_time, snapshot_id) <= ($5::bigint, $6::bigint)`

// sqlStarted marks a planned range's run in flight and records its range,
// provided nothing moved the watermark since the plan ($12: the run's
// seq).
const sqlStarted = `
WITH w AS (
    UPDATE incremental_watermark
    SET inflight_instance_id = $3, attempted_snapshot_id = $5, attempted_commit_time = $7, runs_started = $12,
        modify_time = now()
    WHERE workflow_id = $1 AND table_ref = $2 AND inflight_instance_id IS NULL AND runs_started = $12 - 1
    RETURNING workflow_id)
INSERT INTO incremental_run (workflow_id, instance_id, table_ref, from_snapshot_id, to_snapshot_id, from_commit_time,
    to_commit_time, snapshot_count, has_overwrite, has_delete, backfill_id)
SELECT $1, $3, $2, $4, $5, $6, $7, $8, $9, $10, $11 FROM w`

// sqlEnded ends a run's range ($3: its terminal status): the run is no
// longer in flight, and a SUCCEEDED run whose range starts at the
// watermark moves it to the range's end. It returns whether changes
// arrived beyond the range meanwhile.
const sqlEnded = `
WITH r AS (
    UPDATE incremental_run SET state = $3, end_time = now()
    WHERE workflow_id = $1 AND instance_id = $2 AND state = 'RUNNING'
    RETURNING table_ref, from_snapshot_id, to_snapshot_id, to_commit_time)
UPDATE incremental_watermark w
SET inflight_instance_id = NULL, modify_time = now(),
    snapshot_id = CASE WHEN $3 = 'SUCCEEDED' AND w.snapshot_id = r.from_snapshot_id THEN r.to_snapshot_id ELSE w.snapshot_id END,
    commit_time = CASE WHEN $3 = 'SUCCEEDED' AND w.snapshot_id = r.from_snapshot_id THEN r.to_commit_time ELSE w.commit_time END
FROM r
WHERE w.workflow_id = $1 AND w.table_ref = r.table_ref AND w.inflight_instance_id = $2
RETURNING (w.latest_commit_time, w.latest_snapshot_id) > (w.attempted_commit_time, w.attempted_snapshot_id)`

// sqlDue lists the watermarks waiting for a run.
const sqlDue = `
SELECT workflow_id, table_ref FROM incremental_watermark
WHERE inflight_instance_id IS NULL
  AND (latest_commit_time, latest_snapshot_id) > (attempted_commit_time, attempted_snapshot_id)
ORDER BY modify_time
LIMIT $1`

// sqlOrphans lists runs in flight whose latest run has ended without
// ending their range (stopped before they started, or gone).
const sqlOrphans = `
SELECT w.workflow_id, w.inflight_instance_id, COALESCE(i.status, 'STOPPED')
FROM incremental_watermark w
LEFT JOIN LATERAL (
    SELECT status FROM workflow_instance i
    WHERE i.workflow_id = w.workflow_id AND i.instance_id = w.inflight_instance_id
    ORDER BY i.run_id DESC LIMIT 1) i ON true
WHERE w.inflight_instance_id IS NOT NULL
  AND (i.status IS NULL OR i.status IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT'))
LIMIT $1`

// sqlTouch moves a watermark to the back of the due list.
const sqlTouch = `UPDATE incremental_watermark SET modify_time = now() WHERE workflow_id = $1 AND table_ref = $2`

const sqlResetLock = `
SELECT inflight_instance_id FROM incremental_watermark WHERE workflow_id = $1 AND table_ref = $2 FOR UPDATE`

const sqlChangeCommitTime = `
SELECT commit_time FROM incremental_change WHERE workflow_id = $1 AND table_ref = $2 AND snapshot_id = $3`

// sqlReset moves a watermark (and the last range started) to a snapshot;
// the changes after it are due again. A watermark moved beyond the latest
// change makes it the latest.
const sqlReset = `
UPDATE incremental_watermark SET snapshot_id = $3, commit_time = $4, attempted_snapshot_id = $3,
    attempted_commit_time = $4, modify_time = now(),
    latest_snapshot_id = CASE WHEN ($4::bigint, $3::bigint) > (latest_commit_time, latest_snapshot_id) THEN $3 ELSE latest_snapshot_id END,
    latest_commit_time = CASE WHEN ($4::bigint, $3::bigint) > (latest_commit_time, latest_snapshot_id) THEN $4 ELSE latest_commit_time END
WHERE workflow_id = $1 AND table_ref = $2`

const sqlBackfillLock = `
SELECT snapshot_id, commit_time, inflight_instance_id FROM incremental_watermark
WHERE workflow_id = $1 AND table_ref = $2 FOR UPDATE`

// sqlBackfillChanges lists the changes in ($3, $4] .. ($5, $6], in commit
// order.
const sqlBackfillChanges = `
SELECT snapshot_id, commit_time, operation FROM incremental_change
WHERE workflow_id = $1 AND table_ref = $2
  AND (commit_time, snapshot_id) > ($3::bigint, $4::bigint)
  AND (commit_time, snapshot_id) <= ($5::bigint, $6::bigint)
ORDER BY commit_time, snapshot_id`

// sqlLastBefore is the last change committed before $3 (epoch ms).
const sqlLastBefore = `
SELECT snapshot_id, commit_time FROM incremental_change
WHERE workflow_id = $1 AND table_ref = $2 AND commit_time < $3
ORDER BY commit_time DESC, snapshot_id DESC LIMIT 1`

// sqlStartedBackfill records a backfill run's range; a run started again
// for the same partition attempt (a duplicate) keeps its row.
const sqlStartedBackfill = `
INSERT INTO incremental_run (workflow_id, instance_id, table_ref, from_snapshot_id, to_snapshot_id, from_commit_time,
    to_commit_time, snapshot_count, has_overwrite, has_delete, backfill_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (workflow_id, instance_id) DO NOTHING`

// sqlRestarted puts a restarted run's range back in flight when its end
// left the watermark at the range's start and no run is in flight.
const sqlRestarted = `
WITH r AS (
    SELECT table_ref, from_snapshot_id, to_snapshot_id, from_commit_time, to_commit_time FROM incremental_run
    WHERE workflow_id = $1 AND instance_id = $2 AND backfill_id = '' AND state IN ('FAILED', 'STOPPED', 'TIMED_OUT')
    FOR UPDATE),
w AS (
    UPDATE incremental_watermark w SET inflight_instance_id = $2, modify_time = now()
    FROM r
    WHERE w.workflow_id = $1 AND w.table_ref = r.table_ref AND w.inflight_instance_id IS NULL
      AND w.snapshot_id = r.from_snapshot_id
    RETURNING w.table_ref)
UPDATE incremental_run x SET state = 'RUNNING', end_time = NULL
FROM w
WHERE x.workflow_id = $1 AND x.instance_id = $2
RETURNING x.table_ref, x.from_snapshot_id, x.to_snapshot_id,
    CASE WHEN x.from_snapshot_id = 0 THEN 0 ELSE x.from_commit_time END, x.to_commit_time`
