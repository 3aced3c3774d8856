package definition

// Reading one version: what a start, a read and a push's answer need. The
// selector, its one statement and the scan live together here because the
// hottest caller, a start (docs/architecture.md, "A start"), reads nothing
// else of this package.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// Version is one stored version of a workflow, with the workflow's current
// state.
type Version struct {
	WorkflowID string
	Version    int64
	Workflow   workflow.Workflow
	// Raw is the JSON of Workflow.
	Raw       json.RawMessage
	Active    bool
	CreatedBy string
	CreatedAt time.Time
	// Properties are the workflow's current properties (Snapshot's).
	Properties json.RawMessage
	// ActiveVersion is the workflow's active version, nil when none is.
	ActiveVersion *int64
	// LatestVersion is the workflow's newest version.
	LatestVersion int64
	// Snapshot is the workflow's current properties snapshot.
	Snapshot *Snapshot
	// Metadata is what the push carried besides the workflow:
	// {"git_info": {...}, "extra": {...}} (see VersionMetadata); empty
	// when it carried nothing.
	Metadata json.RawMessage
	// ActivateTime and ActivatedBy say when and by whom the version was
	// last made active; nil and "" when it never was.
	ActivateTime *time.Time
	ActivatedBy  string
	// ModifyTime is when the workflow last changed (a version pushed or
	// activated, its properties changed).
	ModifyTime time.Time
}

// Get returns a version named by selector: "active", "latest", "default"
// (the active version, else the latest; also "") or a number. It fails with
// ErrInvalidSelector for any other selector and ErrNotFound when the
// workflow or version does not exist.
func (s *Store) Get(ctx context.Context, workflowID, selector string) (*Version, error) {
	sel, err := workflow.ParseVersionSelector(selector)
	if err != nil {
		return nil, err
	}
	return getVersion(ctx, s.db, workflowID, sel.N, sel.Name)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// VersionNotFound is Get's error for a version named by n or name that
// does not exist, of a workflow that does (workflowExists) or not.
func VersionNotFound(workflowID string, n int64, name string, workflowExists bool) error {
	sel := workflow.VersionSelector{N: n, Name: name}
	switch {
	case !workflowExists:
		return fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	case sel.Name == "active":
		return fmt.Errorf("workflow %s has no active version: %w", workflowID, ErrNotFound)
	default:
		return fmt.Errorf("workflow %s has no version %s: %w", workflowID, sel, ErrNotFound)
	}
}

// getVersion reads a version named by a number (n > 0) or by name.
func getVersion(ctx context.Context, q querier, workflowID string, n int64, name string) (*Version, error) {
	sel := workflow.VersionSelector{N: n, Name: name}
	v, err := scanVersion(q.QueryRow(ctx, sqlGetVersion, workflowID, n, name), workflowID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, VersionNotFound(workflowID, n, name, false)
	case errors.Is(err, errNoVersion):
		return nil, VersionNotFound(workflowID, n, name, true)
	case err != nil:
		return nil, fmt.Errorf("read workflow %s version %s: %w", workflowID, sel, err)
	}
	return v, nil
}

// errNoVersion: the workflow exists, the version read does not.
var errNoVersion = errors.New("no such version")

// scanVersion reads a row of sqlGetVersion or sqlVersionRange.
func scanVersion(row pgx.Row, workflowID string) (*Version, error) {
	var (
		version           *int64
		raw               []byte
		createdBy         *string
		createdAt         *time.Time
		activatedBy       *string
		owner             string
		snapProps         []byte
		snapAuthor        *string
		snapTime          *time.Time
		v                 = &Version{WorkflowID: workflowID}
		propertiesVersion int64
	)
	err := row.Scan(&version, &raw, &createdBy, &createdAt, &v.Metadata, &v.ActivateTime, &activatedBy,
		&v.ActiveVersion, &v.LatestVersion, &v.ModifyTime, &owner, &propertiesVersion, &snapProps, &snapAuthor, &snapTime)
	if err != nil {
		return nil, err
	}
	if version == nil {
		return nil, errNoVersion
	}
	v.Version, v.Raw, v.CreatedBy, v.CreatedAt = *version, raw, *createdBy, *createdAt
	if activatedBy != nil {
		v.ActivatedBy = *activatedBy
	}
	if err := json.Unmarshal(v.Raw, &v.Workflow); err != nil {
		return nil, fmt.Errorf("decode workflow %s version %d: %w", workflowID, v.Version, err)
	}
	v.Active = v.ActiveVersion != nil && *v.ActiveVersion == v.Version
	if snapProps != nil {
		v.Properties = snapProps
		v.Snapshot = &Snapshot{WorkflowID: workflowID, Version: propertiesVersion, Properties: snapProps,
			Author: *snapAuthor, CreateTime: *snapTime, Owner: owner}
	}
	return v, nil
}

// Get: one round trip resolves the selector ($2 > 0 a number, else $3 names
// active, latest or default) and reads the version with the workflow's
// current state and properties snapshot. A NULL version means the workflow
// exists but the version does not.
const sqlGetVersion = `
SELECT v.version, v.definition, v.created_by, v.created_at, v.metadata, v.activate_time, v.activated_by,
       w.active_version, w.latest_version, w.modified_at, w.owner,
       w.properties_version, s.properties, s.author, s.created_at
FROM workflow w
LEFT JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version = CASE
        WHEN $2::bigint > 0 THEN $2::bigint
        WHEN $3::text = 'latest' THEN w.latest_version
        WHEN $3::text = 'active' THEN w.active_version
        ELSE coalesce(w.active_version, w.latest_version) END
LEFT JOIN workflow_properties_snapshot s
       ON s.workflow_id = w.workflow_id AND s.snapshot_version = w.properties_version
WHERE w.workflow_id = $1`
