package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/instance"
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
    RETURNING properties, latest_instance_id, latest_version, CASE
        WHEN $2::bigint > 0 THEN $2::bigint
        WHEN $3::text = 'latest' THEN latest_version
        WHEN $3::text = 'active' THEN active_version
        ELSE coalesce(active_version, latest_version) END AS version)
SELECT w.properties, w.latest_instance_id, coalesce(w.version, 0), w.latest_version, v.version IS NOT NULL,
    v.fingerprint, CASE WHEN v.fingerprint = $4::bytea THEN NULL ELSE v.definition END,
    d.instance_id, d.uuid::text, d.group_id, d.status, d.queued
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
		&l.Version, &l.LatestVersion, &l.Found, &l.Fingerprint, &l.Definition, &dupID, &dupUID, &dupGrp, &dupSt, &dupQ)
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
