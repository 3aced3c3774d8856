package definition

// The store's SQL, named and kept together. Tables are defined in
// migrations/00001_workflow.sql (workflow_instance and step_instance in
// 00002_engine.sql).

import "github.com/maestro-aws/maestro/engine/instance"

// Create: lock (or create) the workflow row and return its state in one
// round trip. The no-op update takes the row lock even when the row exists,
// so concurrent pushes of one workflow serialise here and number their
// versions without gaps. xmax = 0 tells a fresh insert from an existing row.
const sqlUpsertWorkflow = `
INSERT INTO workflow (workflow_id, owner, created_by) VALUES ($1, $2, $3)
ON CONFLICT (workflow_id) DO UPDATE SET workflow_id = EXCLUDED.workflow_id
RETURNING xmax = 0, latest_version, active_version, properties, properties_version, owner, created_by`

// Create: the fingerprint of the latest version (NULL for a new workflow),
// and whether a deletion of an earlier workflow of this id is still being
// processed. Read after the lock so a deletion committed meanwhile is seen.
const sqlLatestFingerprint = `
SELECT (SELECT fingerprint FROM workflow_version WHERE workflow_id = $1 AND version = $2),
       EXISTS (SELECT 1 FROM workflow_deletion WHERE workflow_id = $1)`

const sqlInsertVersion = `
INSERT INTO workflow_version (workflow_id, version, definition, fingerprint, created_by, metadata)
VALUES ($1, $2, $3, $4, $5, coalesce($6::jsonb, '{}'::jsonb)) RETURNING created_at`

// SetVersions: $4 (the author) activated version $3 when $5 is true, which
// the version records (Maestro's activate_time and activated_by).
const sqlSetVersions = `
WITH w AS (UPDATE workflow SET latest_version = $2, active_version = $3, modified_at = now() WHERE workflow_id = $1)
UPDATE workflow_version SET activate_time = now(), activated_by = $4
WHERE workflow_id = $1 AND version = $3 AND $5::bool`

// SetActive: version $2 (NULL to deactivate) becomes active, activated by
// $3.
const sqlSetActive = `
WITH w AS (UPDATE workflow SET active_version = $2, modified_at = now() WHERE workflow_id = $1)
UPDATE workflow_version SET activate_time = now(), activated_by = $3 WHERE workflow_id = $1 AND version = $2`

const sqlInsertSnapshot = `
INSERT INTO workflow_properties_snapshot (workflow_id, snapshot_version, properties, author)
VALUES ($1, $2, $3, $4) RETURNING created_at`

const sqlSetProperties = `
UPDATE workflow SET properties = $2, properties_version = $3, owner = $4, modified_at = now() WHERE workflow_id = $1`

const sqlInsertTimeline = `
INSERT INTO workflow_timeline (workflow_id, event) VALUES ($1, $2)`

// List: a page of versions, newest first, below the cursor ($2 = 0: from
// the newest).
const sqlListVersions = `
SELECT v.version, v.created_by, v.created_at, v.version = w.active_version,
       coalesce(v.definition->>'name', ''), coalesce(v.definition->>'description', ''),
       coalesce(jsonb_array_length(v.definition->'steps'), 0)
FROM workflow w JOIN workflow_version v USING (workflow_id)
WHERE w.workflow_id = $1 AND ($2::bigint = 0 OR v.version < $2::bigint)
ORDER BY v.version DESC LIMIT $3`

const sqlWorkflowExists = `SELECT EXISTS (SELECT 1 FROM workflow WHERE workflow_id = $1)`

// Owner: who may change the workflow (the API's authorization).
const sqlOwner = `SELECT owner FROM workflow WHERE workflow_id = $1`

const sqlInternalID = `SELECT internal_id FROM workflow WHERE workflow_id = $1`

const sqlExists = `SELECT EXISTS (SELECT 1 FROM workflow WHERE workflow_id = $1)`

// sqlAccess reads who may act on a workflow: its owner and the operators
// its properties name (access_control.operators, docs/security.md).
const sqlAccess = `SELECT owner, properties->'access_control'->'operators' FROM workflow WHERE workflow_id = $1`

// sqlCreatedAt reads when the workflow (this incarnation of its id) was
// created.
const sqlCreatedAt = `SELECT created_at FROM workflow WHERE workflow_id = $1`

const sqlOverview = `
SELECT w.active_version, w.latest_version, w.owner, w.created_by, w.created_at, w.modified_at,
       w.latest_instance_id, w.properties_version, s.properties, s.author, s.created_at
FROM workflow w
LEFT JOIN workflow_properties_snapshot s
       ON s.workflow_id = w.workflow_id AND s.snapshot_version = w.properties_version
WHERE w.workflow_id = $1`

// Overview: instances counted by the status of their latest run, over the
// instance ids above $2 (a bounded range scan of the primary key).
const sqlInstanceStats = `
SELECT status, count(*), max(instance_id) FROM (
    SELECT DISTINCT ON (instance_id) instance_id, status FROM workflow_instance
    WHERE workflow_id = $1 AND instance_id > $2
    ORDER BY instance_id, run_id DESC) latest
GROUP BY status`

// Timeline: newest first, below the cursor ($2 = 0: from the newest).
const sqlTimeline = `
SELECT event_id, event, created_at FROM workflow_timeline
WHERE workflow_id = $1 AND ($2::bigint = 0 OR event_id < $2::bigint)
ORDER BY event_id DESC LIMIT $3`

// GetSnapshot: $2 = 0 names the latest snapshot, a number below
// snapshotTimeFloor a snapshot version, a larger one the snapshot created
// at that epoch millisecond (Maestro names snapshots by create time).
const sqlGetSnapshot = `
SELECT s.snapshot_version, s.properties, s.author, s.created_at, w.owner
FROM workflow w JOIN workflow_properties_snapshot s
  ON s.workflow_id = w.workflow_id
 AND s.snapshot_version = CASE
        WHEN $2::bigint = 0 THEN w.properties_version
        WHEN $2::bigint < 1000000000000 THEN $2::bigint
        ELSE (SELECT max(t.snapshot_version) FROM workflow_properties_snapshot t
              WHERE t.workflow_id = w.workflow_id
                AND floor(extract(epoch FROM t.created_at) * 1000)::bigint = $2::bigint) END
WHERE w.workflow_id = $1`

// VersionRange: the versions from $2 to $3, newest first, with the
// workflow's state and current properties snapshot.
const sqlVersionRange = `
SELECT v.version, v.definition, v.created_by, v.created_at, v.metadata, v.activate_time, v.activated_by,
       w.active_version, w.latest_version, w.modified_at, w.owner,
       w.properties_version, s.properties, s.author, s.created_at
FROM workflow w
JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version BETWEEN $2 AND $3
LEFT JOIN workflow_properties_snapshot s
       ON s.workflow_id = w.workflow_id AND s.snapshot_version = w.properties_version
WHERE w.workflow_id = $1
ORDER BY v.version DESC`

// ListWorkflows: a page of workflows in id order after the cursor $1,
// filtered by an id prefix ($2, ” for all), an owner ($3, ” for any) and
// a text ($4, ” for any) found in the id or the default version's name or
// description, case-insensitively. The prefix is a range on the primary
// key (ids compare byte-wise). Inline (iteration) workflows have no row.
const sqlListWorkflows = `
SELECT w.workflow_id, w.active_version, w.latest_version, w.owner, w.created_by, w.created_at, w.modified_at,
       w.properties, coalesce(v.definition->>'name', ''), coalesce(v.definition->>'description', ''),
       coalesce(v.definition->'tags', '[]'::jsonb), w.latest_instance_id
FROM workflow w
JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version = coalesce(w.active_version, w.latest_version)
WHERE w.workflow_id > $1
  AND ($2 = '' OR (w.workflow_id >= $2 AND w.workflow_id < $2 || chr(1114111)))
  AND ($3 = '' OR w.owner = $3)
  AND ($4 = '' OR strpos(lower(w.workflow_id), lower($4)) > 0
       OR strpos(lower(coalesce(v.definition->>'name', '')), lower($4)) > 0
       OR strpos(lower(coalesce(v.definition->>'description', '')), lower($4)) > 0)
ORDER BY w.workflow_id LIMIT $5`

// Properties, activation, delete: lock the workflow row.
const sqlLockWorkflow = `
SELECT latest_version, active_version, properties, properties_version, owner, created_by
FROM workflow WHERE workflow_id = $1 FOR UPDATE`

const sqlVersionExists = `SELECT EXISTS (SELECT 1 FROM workflow_version WHERE workflow_id = $1 AND version = $2)`

// Delete: a workflow's runs are its own and those of its foreach and while
// iterations (instance.OfWorkflowSQL).

// Delete: live runs block a delete. The status list matches the predicate
// of workflow_instance_live_idx so the planner may use it.
const sqlLiveInstances = `
SELECT count(*) FROM workflow_instance
WHERE ` + instance.OfWorkflowSQL + ` AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED')`

// Delete: how many instance runs there are, counting no further than $2.
const sqlCountInstancesUpTo = `
SELECT count(*) FROM (SELECT 1 FROM workflow_instance WHERE ` + instance.OfWorkflowSQL + ` LIMIT $2) n`

// Delete: step instances go with their runs, in the same statement (they
// have no foreign key to them: migration 00080); versions and snapshots
// with the workflow row (ON DELETE CASCADE). Both return the runs deleted.
const sqlDeleteInstances = `
WITH runs AS (DELETE FROM workflow_instance WHERE ` + instance.OfWorkflowSQL + `
    RETURNING workflow_id, instance_id, run_id),
steps AS (` + sqlDeleteStepsOfRuns + `)
SELECT count(*) FROM runs`

// sqlDeleteStepsOfRuns deletes the step instances of the runs of a CTE
// "runs" (workflow_id, instance_id, run_id).
const sqlDeleteStepsOfRuns = `
DELETE FROM step_instance s USING runs r
WHERE s.workflow_id = r.workflow_id AND s.instance_id = r.instance_id AND s.run_id = r.run_id`

const sqlDeleteWorkflow = `DELETE FROM workflow WHERE workflow_id = $1`

const sqlInsertDeletion = `
INSERT INTO workflow_deletion (workflow_id, author) VALUES ($1, $2) RETURNING deletion_id::text`

// ProcessDelete: the deletion the message is about, if still pending.
const sqlDeletionPending = `
SELECT EXISTS (SELECT 1 FROM workflow_deletion WHERE workflow_id = $1 AND deletion_id = $2::uuid)`

// ProcessDelete: one batch of instance runs, oldest first.
const sqlDeleteInstanceBatch = `
WITH runs AS (
    DELETE FROM workflow_instance i USING (
        SELECT workflow_id, instance_id, run_id FROM workflow_instance WHERE ` + instance.OfWorkflowSQL + `
        ORDER BY workflow_id, instance_id, run_id LIMIT $2) b
    WHERE i.workflow_id = b.workflow_id AND i.instance_id = b.instance_id AND i.run_id = b.run_id
    RETURNING i.workflow_id, i.instance_id, i.run_id),
steps AS (` + sqlDeleteStepsOfRuns + `)
SELECT count(*) FROM runs`

const sqlFinishDeletion = `
DELETE FROM workflow_deletion WHERE workflow_id = $1 AND deletion_id = $2::uuid`

const sqlSnapshotMeta = `
SELECT author, created_at FROM workflow_properties_snapshot WHERE workflow_id = $1 AND snapshot_version = $2`
