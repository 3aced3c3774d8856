package retention

// The archiver's SQL, kept together. $-parameters are named at each
// statement. A run is archivable when it is terminal, ended before its
// workflow's cutoff (run_retention_days of the root workflow's properties,
// else the deployment's retention), and is not a run a restart may need:
// the latest run of an instance of an active workflow (active_version set),
// or a child run (foreach, while, subworkflow) whose root run is still
// live.

// terminalStatuses is the predicate of workflow_instance_ended_idx
// (migration 00160), so the planner may use the index.
const terminalStatuses = `('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT')`

// archivable is the condition on a run i (with its root workflow w) that
// both the candidates query and the delete check: the delete checks again,
// since a workflow may have been activated between the two.
const archivable = `i.status IN ` + terminalStatuses + `
  AND i.end_time < $1::timestamptz - make_interval(secs =>
        coalesce((w.properties->>'` + PropertyRetentionDays + `')::bigint * 86400, $2::bigint))
  AND (w.active_version IS NULL OR EXISTS (SELECT 1 FROM workflow_instance l
        WHERE l.workflow_id = i.workflow_id AND l.instance_id = i.instance_id AND l.run_id > i.run_id))
  AND (i.correlation_id IS NULL OR NOT EXISTS (SELECT 1 FROM workflow_instance r
        WHERE r.workflow_id = split_part(i.correlation_id, ':', 1)
          AND r.instance_id = split_part(i.correlation_id, ':', 2)::bigint
          AND r.run_id = split_part(i.correlation_id, ':', 3)::bigint
          AND r.status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')))`

// sqlShortestRetention is the shortest retention any workflow sets, in
// seconds (NULL when none sets one): the candidates' index range starts at
// the earliest cutoff.
const sqlShortestRetention = `
SELECT min((properties->>'` + PropertyRetentionDays + `')::bigint) * 86400 FROM workflow
WHERE properties ? '` + PropertyRetentionDays + `'`

// sqlCandidates: up to $4 archivable runs, oldest first. $1 now, $2 the
// deployment's retention (seconds), $3 the earliest cutoff any workflow
// has (the index range).
const sqlCandidates = `
SELECT i.workflow_id, i.instance_id, i.run_id
FROM workflow_instance i
JOIN workflow w ON w.workflow_id = split_part(i.workflow_id, ':', 1)
WHERE i.status IN ` + terminalStatuses + ` AND i.end_time < $3::timestamptz
  AND ` + archivable + `
ORDER BY i.end_time, i.workflow_id, i.instance_id, i.run_id
LIMIT $4`

// batchRuns is the batch's runs from parallel arrays $1 (workflow ids),
// $2 (instance ids), $3 (run ids).
const batchRuns = `unnest($1::text[], $2::bigint[], $3::bigint[]) AS b(workflow_id, instance_id, run_id)`

// The records of a batch, each a JSON row (row_to_json) keyed by its run.
const (
	sqlRunRows = `
SELECT i.workflow_id, i.instance_id, i.run_id, row_to_json(i)
FROM workflow_instance i JOIN ` + batchRuns + `
  ON i.workflow_id = b.workflow_id AND i.instance_id = b.instance_id AND i.run_id = b.run_id`
	sqlStepRows = `
SELECT s.workflow_id, s.instance_id, s.run_id, row_to_json(s)
FROM step_instance s JOIN ` + batchRuns + `
  ON s.workflow_id = b.workflow_id AND s.instance_id = b.instance_id AND s.run_id = b.run_id
ORDER BY s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id`
	sqlOutputRows = `
SELECT o.workflow_id, o.instance_id, o.run_id, row_to_json(o)
FROM step_output_data o JOIN ` + batchRuns + `
  ON o.workflow_id = b.workflow_id AND o.instance_id = b.instance_id AND o.run_id = b.run_id`
	sqlCompletionRows = `
SELECT c.workflow_id, c.instance_id, c.run_id, row_to_json(c)
FROM step_completion c JOIN ` + batchRuns + `
  ON c.workflow_id = b.workflow_id AND c.instance_id = b.instance_id AND c.run_id = b.run_id`
	sqlWaitRows = `
SELECT s.workflow_id, s.instance_id, s.run_id, row_to_json(s)
FROM step_signal_wait s JOIN ` + batchRuns + `
  ON s.workflow_id = b.workflow_id AND s.instance_id = b.instance_id AND s.run_id = b.run_id`
	sqlPausedRows = `
SELECT p.workflow_id, p.instance_id, p.run_id, row_to_json(p)
FROM step_paused p JOIN ` + batchRuns + `
  ON p.workflow_id = b.workflow_id AND p.instance_id = b.instance_id AND p.run_id = b.run_id`
	sqlLineageRows = `
SELECT l.workflow_id, l.instance_id, l.run_id, row_to_json(l)
FROM signal_lineage l JOIN ` + batchRuns + `
  ON l.workflow_id = b.workflow_id AND l.instance_id = b.instance_id AND l.run_id = b.run_id`
	// The signals whose lineage names a run of the batch: copied into the
	// archive, not deleted (a signal may concern many runs; signals have
	// their own lifetime).
	sqlSignalRows = `
SELECT DISTINCT l.workflow_id, l.instance_id, l.run_id, row_to_json(s)::text
FROM signal_lineage l JOIN ` + batchRuns + `
  ON l.workflow_id = b.workflow_id AND l.instance_id = b.instance_id AND l.run_id = b.run_id
JOIN signal_instance s ON s.seq = l.seq`
)

// sqlDeleteBatch deletes the batch's runs that are still archivable and
// not locked by anyone (SKIP LOCKED: a run the engine or the API holds is
// left for the next pass), their step rows (which cascade to output data,
// completions and held permits) and alert timers; the run's signal waits,
// pauses and lineage go with it (ON DELETE CASCADE). It records where each
// deleted run is archived ($4 object keys, $5 step counts, parallel to the
// batch) and returns the steps deleted and the runs deleted (parallel
// arrays). $6 now, $7 the
// deployment's retention (seconds).
var sqlDeleteBatch = `
WITH b AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::int[])
        AS b(workflow_id, instance_id, run_id, object_key, step_count)),
locked AS (
    SELECT i.workflow_id, i.instance_id, i.run_id, i.uuid, i.status, i.end_time, b.object_key, b.step_count
    FROM workflow_instance i
    JOIN b ON i.workflow_id = b.workflow_id AND i.instance_id = b.instance_id AND i.run_id = b.run_id
    JOIN workflow w ON w.workflow_id = split_part(i.workflow_id, ':', 1)
    WHERE ` + deleteArchivable + `
    FOR UPDATE OF i SKIP LOCKED),
runs AS (
    DELETE FROM workflow_instance i USING locked l
    WHERE i.workflow_id = l.workflow_id AND i.instance_id = l.instance_id AND i.run_id = l.run_id
    RETURNING i.workflow_id, i.instance_id, i.run_id),
steps AS (
    DELETE FROM step_instance s USING runs r
    WHERE s.workflow_id = r.workflow_id AND s.instance_id = r.instance_id AND s.run_id = r.run_id
    RETURNING 1),
timers AS (
    DELETE FROM maestro_alert_timer t USING runs r
    WHERE t.workflow_id = r.workflow_id AND t.instance_id = r.instance_id AND t.run_id = r.run_id),
located AS (
    INSERT INTO run_archive (workflow_id, instance_id, run_id, uuid, status, end_time, step_count, object_key)
    SELECT l.workflow_id, l.instance_id, l.run_id, l.uuid, l.status, l.end_time, l.step_count, l.object_key
    FROM locked l JOIN runs r ON r.workflow_id = l.workflow_id AND r.instance_id = l.instance_id AND r.run_id = l.run_id
    ON CONFLICT (workflow_id, instance_id, run_id) DO UPDATE
        SET object_key = EXCLUDED.object_key, step_count = EXCLUDED.step_count, archived_at = now())
SELECT (SELECT count(*) FROM steps), coalesce(array_agg(workflow_id), '{}'), coalesce(array_agg(instance_id), '{}'),
    coalesce(array_agg(run_id), '{}')
FROM runs`

// deleteArchivable is archivable with the delete's parameter numbers.
var deleteArchivable = renumber(archivable, map[string]string{"$1": "$6", "$2": "$7"})

// sqlLocate finds an archived run: run $3, or the latest archived run of
// the instance when $3 is 0.
const sqlLocate = `
SELECT run_id, object_key, archived_at FROM run_archive
WHERE workflow_id = $1 AND instance_id = $2::bigint AND ($3::bigint = 0 OR run_id = $3::bigint)
ORDER BY run_id DESC LIMIT 1`

// sqlOldestArchivable is the end time of the oldest archivable run (the
// archive's lag), NULL when none. Same parameters as sqlCandidates.
const sqlOldestArchivable = `
SELECT min(i.end_time)
FROM (SELECT i.* FROM workflow_instance i
      JOIN workflow w ON w.workflow_id = split_part(i.workflow_id, ':', 1)
      WHERE i.status IN ` + terminalStatuses + ` AND i.end_time < $3::timestamptz AND ` + archivable + `
      ORDER BY i.end_time LIMIT 1) i`

// sqlLockTimeout sets the transaction's lock_timeout to $1.
const sqlLockTimeout = `SELECT set_config('lock_timeout', $1, true)`
