package backfill

// The store's SQL, named and kept together.

const backfillColumns = `backfill_id, workflow_id, workflow_version, param, param_type, format, spec, concurrency,
    downstream, rerun, status, coalesce(request_id, ''), created_by, partition_count, create_time, modify_time, end_time`

// sqlInsert creates a backfill; a request id the workflow has used already
// inserts nothing (the caller reads that backfill back).
const sqlInsert = `
INSERT INTO backfill (backfill_id, workflow_id, workflow_version, param, param_type, format, spec, concurrency,
    downstream, rerun, status, request_id, created_by, partition_count)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'RUNNING', NULLIF($11, ''), $12, $13)
ON CONFLICT (workflow_id, request_id) WHERE request_id IS NOT NULL DO NOTHING`

// sqlInsertPartitions inserts every partition with one statement: the
// values in order, seq from 0.
const sqlInsertPartitions = `
INSERT INTO backfill_partition (backfill_id, seq, value, state)
SELECT $1, (t.n - 1)::integer, t.v, 'PENDING' FROM unnest($2::text[]) WITH ORDINALITY AS t(v, n)`

const sqlByRequest = `SELECT ` + backfillColumns + ` FROM backfill WHERE workflow_id = $1 AND request_id = $2`

const sqlGet = `SELECT ` + backfillColumns + ` FROM backfill WHERE backfill_id = $1`

const sqlLock = `SELECT ` + backfillColumns + ` FROM backfill WHERE backfill_id = $1 FOR UPDATE`

// sqlClaim locks a live backfill for one driver pass, skipping one another
// engine holds.
const sqlClaim = `SELECT ` + backfillColumns + ` FROM backfill
WHERE backfill_id = $1 AND status IN ('RUNNING', 'PAUSED') FOR UPDATE SKIP LOCKED`

const sqlList = `SELECT ` + backfillColumns + ` FROM backfill WHERE workflow_id = $1
ORDER BY create_time DESC, backfill_id LIMIT $2`

// sqlLive lists the backfills the driver has work in.
const sqlLive = `SELECT backfill_id FROM backfill WHERE status IN ('RUNNING', 'PAUSED') ORDER BY modify_time, backfill_id`

// sqlPartitions reads a backfill's partitions with the latest run of each
// linked one.
const sqlPartitions = `
SELECT p.seq, p.value, p.state, p.instance_id, p.attempt, w.run_id, w.status
FROM backfill_partition p
LEFT JOIN LATERAL (
    SELECT run_id, status FROM workflow_instance w
    WHERE w.workflow_id = $2 AND w.instance_id = p.instance_id
    ORDER BY run_id DESC LIMIT 1) w ON p.instance_id IS NOT NULL
WHERE p.backfill_id = $1
ORDER BY p.seq`

// sqlDownstream reads the runs of other workflows the backfill caused.
const sqlDownstream = `
SELECT workflow_id, instance_id, run_id, status FROM workflow_instance
WHERE initiator ? 'backfill_id' AND initiator->>'backfill_id' = $1 AND workflow_id <> $2
ORDER BY workflow_id, instance_id, run_id`

const sqlSetStatus = `
UPDATE backfill SET status = $2, modify_time = now(),
    end_time = CASE WHEN $2 IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN now() END
WHERE backfill_id = $1`

// sqlCancelPartitions ends the partitions that have not ended.
const sqlCancelPartitions = `
UPDATE backfill_partition SET state = 'CANCELLED', modify_time = now()
WHERE backfill_id = $1 AND state IN ('PENDING', 'RUNNING')`

// sqlRetryPartitions makes FAILED and STOPPED partitions pending again,
// with a new attempt (a new request id for their next run).
const sqlRetryPartitions = `
UPDATE backfill_partition SET state = 'PENDING', instance_id = NULL, attempt = attempt + 1, modify_time = now()
WHERE backfill_id = $1 AND state IN ('FAILED', 'STOPPED')`

// sqlLiveRuns lists the live runs a backfill caused: the latest runs of
// its partitions and, with $3, those of downstream workflows.
const sqlLiveRuns = `
SELECT w.workflow_id, w.instance_id, w.run_id, w.group_id FROM backfill_partition p
JOIN workflow_instance w ON w.workflow_id = $2 AND w.instance_id = p.instance_id
WHERE p.backfill_id = $1 AND p.state = 'RUNNING' AND w.status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')
UNION
SELECT workflow_id, instance_id, run_id, group_id FROM workflow_instance
WHERE $3 AND initiator ? 'backfill_id' AND initiator->>'backfill_id' = $1
  AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')`

// sqlSync moves RUNNING partitions whose latest run ended to the run's
// outcome: SUCCEEDED, FAILED (FAILED, TIMED_OUT) or STOPPED.
const sqlSync = `
UPDATE backfill_partition p SET state = CASE r.status WHEN 'SUCCEEDED' THEN 'SUCCEEDED'
        WHEN 'STOPPED' THEN 'STOPPED' ELSE 'FAILED' END, modify_time = now()
FROM (
    SELECT q.seq, (SELECT status FROM workflow_instance w
            WHERE w.workflow_id = $2 AND w.instance_id = q.instance_id
            ORDER BY run_id DESC LIMIT 1) AS status
    FROM backfill_partition q WHERE q.backfill_id = $1 AND q.state = 'RUNNING') r
WHERE p.backfill_id = $1 AND p.seq = r.seq
  AND r.status IN ('SUCCEEDED', 'FAILED', 'TIMED_OUT', 'STOPPED')`

// sqlInFlight counts the partitions whose run has not ended.
const sqlInFlight = `SELECT count(*) FROM backfill_partition WHERE backfill_id = $1 AND state = 'RUNNING'`

// sqlYield is true while a run of the workflow that no backfill started
// waits for admission: a backfill starts nothing then (docs/backfill.md).
const sqlYield = `
SELECT EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = $1 AND queued
    AND coalesce(initiator->>'type', '') <> 'BACKFILL')`

// sqlPending reads the next pending partitions in order.
const sqlPending = `
SELECT seq, value, attempt FROM backfill_partition
WHERE backfill_id = $1 AND state = 'PENDING' ORDER BY seq LIMIT $2`

// sqlSucceeded finds, among values $3, those a SUCCEEDED run of the
// version had (run params or evaluated params), with the newest such run.
const sqlSucceeded = `
SELECT v, max(w.instance_id) FROM unnest($3::text[]) AS t(v)
JOIN workflow_instance w ON w.workflow_id = $1 AND w.workflow_version = $2 AND w.status = 'SUCCEEDED'
  AND coalesce(w.params->$4->>'value', w.run_params->$4->>'value') = t.v
GROUP BY v`

// sqlLink sets partitions' states and runs.
const sqlLink = `
UPDATE backfill_partition p SET state = t.state, instance_id = t.iid, modify_time = now()
FROM unnest($2::integer[], $3::text[], $4::bigint[]) AS t(seq, state, iid)
WHERE p.backfill_id = $1 AND p.seq = t.seq`

// sqlRemaining counts partitions not ended and those that ended badly;
// with downstream ($3) it counts too the downstream runs not ended (and
// the backfill's output signals not matched yet, which may start more)
// and those that ended badly (the latest run of each instance).
const sqlRemaining = `
SELECT (SELECT count(*) FROM backfill_partition WHERE backfill_id = $1 AND state IN ('PENDING', 'RUNNING'))
     + CASE WHEN $3 THEN
         (SELECT count(*) FROM workflow_instance w
          WHERE w.initiator ? 'backfill_id' AND w.initiator->>'backfill_id' = $1 AND w.workflow_id <> $2
            AND w.status IN ('CREATED', 'IN_PROGRESS', 'PAUSED'))
       + (SELECT count(*) FROM signal_pending sp
          JOIN signal_lineage l ON l.seq = sp.seq AND l.kind = 'PRODUCED'
          JOIN workflow_instance w ON w.workflow_id = l.workflow_id AND w.instance_id = l.instance_id AND w.run_id = l.run_id
          WHERE w.initiator ? 'backfill_id' AND w.initiator->>'backfill_id' = $1)
       ELSE 0 END,
       (SELECT count(*) FROM backfill_partition WHERE backfill_id = $1 AND state IN ('FAILED', 'STOPPED'))
     + CASE WHEN $3 THEN
         (SELECT count(*) FROM workflow_instance w
          WHERE w.initiator ? 'backfill_id' AND w.initiator->>'backfill_id' = $1 AND w.workflow_id <> $2
            AND w.status IN ('FAILED', 'TIMED_OUT', 'STOPPED')
            AND NOT EXISTS (SELECT 1 FROM workflow_instance n WHERE n.workflow_id = w.workflow_id
                AND n.instance_id = w.instance_id AND n.run_id > w.run_id))
       ELSE 0 END`
