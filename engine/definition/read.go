package definition

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// VersionSummary describes one version in a listing.
type VersionSummary struct {
	Version     int64     `json:"workflow_version_id"`
	Active      bool      `json:"is_active"`
	Name        string    `json:"name,omitempty"`
	Description string    `json:"description,omitempty"`
	StepCount   int       `json:"step_count"`
	CreatedBy   string    `json:"created_by"`
	CreateTime  time.Time `json:"create_time"`
}

// Versions returns a page of the workflow's versions, newest first, below
// cursor (0 for the first page).
func (s *Store) Versions(ctx context.Context, workflowID string, cursor int64, limit int) (*Page[VersionSummary], error) {
	limit = pageSize(limit)
	rows, err := s.db.Query(ctx, sqlListVersions, workflowID, cursor, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list workflow %s versions: %w", workflowID, err)
	}
	page := &Page[VersionSummary]{Items: []VersionSummary{}}
	for rows.Next() {
		var v VersionSummary
		var active *bool
		if err := rows.Scan(&v.Version, &v.CreatedBy, &v.CreateTime, &active, &v.Name, &v.Description, &v.StepCount); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list workflow %s versions: %w", workflowID, err)
		}
		v.Active = active != nil && *active
		page.Items = append(page.Items, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflow %s versions: %w", workflowID, err)
	}
	if len(page.Items) == 0 {
		var exists bool
		if err := s.db.QueryRow(ctx, sqlWorkflowExists, workflowID).Scan(&exists); err != nil {
			return nil, fmt.Errorf("read workflow %s: %w", workflowID, err)
		}
		if !exists {
			return nil, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
		}
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		next := page.Items[limit-1].Version
		page.Next = &next
	}
	return page, nil
}

// OverviewInstanceWindow is how many of the newest instances Overview
// counts by status, which keeps it a bounded read however many instances a
// workflow has.
const OverviewInstanceWindow = 10000

// Overview summarises a workflow: its versions, owner, current properties
// and its recent instances by status.
type Overview struct {
	WorkflowID         string        `json:"workflow_id"`
	ActiveVersion      *int64        `json:"active_version_id"`
	LatestVersion      int64         `json:"latest_version_id"`
	DefaultVersion     int64         `json:"default_version_id"`
	Owner              string        `json:"owner"`
	CreatedBy          string        `json:"created_by"`
	CreateTime         time.Time     `json:"create_time"`
	ModifyTime         time.Time     `json:"modify_time"`
	PropertiesSnapshot *Snapshot     `json:"properties_snapshot"`
	Instances          InstanceStats `json:"instances"`
}

// InstanceStats counts a workflow's instances by the status of their latest
// run, over the instance ids from CountedFrom to LatestInstanceID.
type InstanceStats struct {
	// LatestInstanceID is the newest instance id (0 when none was started);
	// instance ids are dense, so it is also how many were started.
	LatestInstanceID int64 `json:"latest_instance_id"`
	// CountedFrom is the first instance id the counts cover.
	CountedFrom int64 `json:"counted_from_instance_id"`
	// StatusCounts counts instances by status.
	StatusCounts map[string]int64 `json:"status_counts"`
	// LatestInstanceIDs is the newest instance id in each status.
	LatestInstanceIDs map[string]int64 `json:"latest_instance_ids"`
}

// Overview returns the workflow's overview.
func (s *Store) Overview(ctx context.Context, workflowID string) (*Overview, error) {
	o := &Overview{WorkflowID: workflowID}
	var (
		pv         int64
		snapProps  []byte
		snapAuthor *string
		snapTime   *time.Time
	)
	err := s.db.QueryRow(ctx, sqlOverview, workflowID).Scan(&o.ActiveVersion, &o.LatestVersion, &o.Owner, &o.CreatedBy,
		&o.CreateTime, &o.ModifyTime, &o.Instances.LatestInstanceID, &pv, &snapProps, &snapAuthor, &snapTime)
	if errNoRows(err) {
		return nil, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read workflow %s: %w", workflowID, err)
	}
	o.DefaultVersion = o.LatestVersion
	if o.ActiveVersion != nil {
		o.DefaultVersion = *o.ActiveVersion
	}
	if snapProps != nil {
		o.PropertiesSnapshot = &Snapshot{WorkflowID: workflowID, Version: pv, Properties: snapProps,
			Author: *snapAuthor, CreateTime: *snapTime, Owner: o.Owner}
	}
	st := &o.Instances
	st.StatusCounts, st.LatestInstanceIDs = map[string]int64{}, map[string]int64{}
	after := max(st.LatestInstanceID-OverviewInstanceWindow, 0)
	st.CountedFrom = min(after+1, max(st.LatestInstanceID, 1))
	if st.LatestInstanceID == 0 {
		st.CountedFrom = 0
		return o, nil
	}
	rows, err := s.db.Query(ctx, sqlInstanceStats, workflowID, after)
	if err != nil {
		return nil, fmt.Errorf("count workflow %s instances: %w", workflowID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n, latest int64
		if err := rows.Scan(&status, &n, &latest); err != nil {
			return nil, fmt.Errorf("count workflow %s instances: %w", workflowID, err)
		}
		st.StatusCounts[status], st.LatestInstanceIDs[status] = n, latest
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count workflow %s instances: %w", workflowID, err)
	}
	return o, nil
}

// GetSnapshot returns a properties snapshot named by selector: "latest" or
// a number.
func (s *Store) GetSnapshot(ctx context.Context, workflowID, selector string) (*Snapshot, error) {
	var n int64
	if selector != "latest" {
		var err error
		if n, err = strconv.ParseInt(selector, 10, 64); err != nil || n <= 0 {
			return nil, fmt.Errorf("snapshot %q is not latest or a positive number: %w", selector, ErrInvalidSelector)
		}
	}
	snap := &Snapshot{WorkflowID: workflowID}
	var props []byte
	err := s.db.QueryRow(ctx, sqlGetSnapshot, workflowID, n).Scan(&snap.Version, &props, &snap.Author, &snap.CreateTime, &snap.Owner)
	if errNoRows(err) {
		return nil, fmt.Errorf("workflow %s has no properties snapshot %s: %w", workflowID, selector, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read workflow %s properties snapshot %s: %w", workflowID, selector, err)
	}
	snap.Properties = json.RawMessage(props)
	return snap, nil
}

// Owner returns the workflow's owner (properties.owner, else its creator);
// ErrNotFound when there is no such workflow.
func (s *Store) Owner(ctx context.Context, workflowID string) (string, error) {
	var owner string
	err := s.db.QueryRow(ctx, sqlOwner, workflowID).Scan(&owner)
	if errNoRows(err) {
		return "", fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read workflow %s owner: %w", workflowID, err)
	}
	return owner, nil
}

// InternalID returns the workflow's internal id, Maestro's internal_id: a
// number of its own given when the workflow is first pushed (a workflow
// pushed again after its deletion has a new one).
func (s *Store) InternalID(ctx context.Context, workflowID string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, sqlInternalID, workflowID).Scan(&id)
	if errNoRows(err) {
		return 0, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("read workflow %s internal id: %w", workflowID, err)
	}
	return id, nil
}

// Exists reports whether the workflow exists (any version, active or not).
func (s *Store) Exists(ctx context.Context, workflowID string) (bool, error) {
	var ok bool
	if err := s.db.QueryRow(ctx, sqlExists, workflowID).Scan(&ok); err != nil {
		return false, fmt.Errorf("read workflow %s: %w", workflowID, err)
	}
	return ok, nil
}

// Access is who may act on a workflow besides administrators.
type Access struct {
	// Owner may do everything to it.
	Owner string
	// Operators may act on its runs (access_control.operators).
	Operators []string
}

// Access returns who may act on the workflow; ErrNotFound when there is no
// such workflow.
func (s *Store) Access(ctx context.Context, workflowID string) (Access, error) {
	var a Access
	var operators []byte
	err := s.db.QueryRow(ctx, sqlAccess, workflowID).Scan(&a.Owner, &operators)
	if errNoRows(err) {
		return a, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("read who may act on workflow %s: %w", workflowID, err)
	}
	a.Operators = workflow.Operators(operators)
	return a, nil
}

// CreatedAt returns when the workflow was created: a workflow deleted and
// pushed again under the same id is created anew. ErrNotFound when there is
// no such workflow.
func (s *Store) CreatedAt(ctx context.Context, workflowID string) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, sqlCreatedAt, workflowID).Scan(&at)
	if errNoRows(err) {
		return at, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if err != nil {
		return at, fmt.Errorf("read workflow %s creation time: %w", workflowID, err)
	}
	return at, nil
}

// VersionRange returns the workflow's versions from low to high
// (inclusive), newest first, each with the workflow's current state as Get
// returns it. ErrNotFound when the workflow does not exist.
func (s *Store) VersionRange(ctx context.Context, workflowID string, low, high int64) ([]*Version, error) {
	rows, err := s.db.Query(ctx, sqlVersionRange, workflowID, low, high)
	if err != nil {
		return nil, fmt.Errorf("read workflow %s versions %d to %d: %w", workflowID, low, high, err)
	}
	defer rows.Close()
	out := []*Version{}
	for rows.Next() {
		v, err := scanVersion(rows, workflowID)
		if err != nil {
			return nil, fmt.Errorf("read workflow %s versions %d to %d: %w", workflowID, low, high, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read workflow %s versions %d to %d: %w", workflowID, low, high, err)
	}
	return out, nil
}

// WorkflowSummary describes one workflow in a listing: its default version
// (the active one, else the latest) and its current state.
type WorkflowSummary struct {
	WorkflowID       string
	ActiveVersion    *int64
	LatestVersion    int64
	Owner            string
	CreatedBy        string
	CreateTime       time.Time
	ModifyTime       time.Time
	Properties       json.RawMessage
	Name             string
	Description      string
	Tags             json.RawMessage
	LatestInstanceID int64
}

// DefaultVersion is the active version, else the latest.
func (w WorkflowSummary) DefaultVersion() int64 {
	if w.ActiveVersion != nil {
		return *w.ActiveVersion
	}
	return w.LatestVersion
}

// WorkflowFilter selects workflows in a listing; empty fields match all.
type WorkflowFilter struct {
	// Prefix matches workflow ids that start with it.
	Prefix string
	// Owner matches the workflow's owner exactly.
	Owner string
	// Text matches, case-insensitively, a part of the workflow id or of
	// its default version's name or description.
	Text string
}

// ListWorkflows returns up to limit workflows matching f, in workflow id
// order after the id after ("" for the first page), and whether more
// follow.
func (s *Store) ListWorkflows(ctx context.Context, f WorkflowFilter, after string, limit int) ([]WorkflowSummary, bool, error) {
	limit = pageSize(limit)
	rows, err := s.db.Query(ctx, sqlListWorkflows, after, f.Prefix, f.Owner, f.Text, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowSummary, error) {
		var w WorkflowSummary
		err := r.Scan(&w.WorkflowID, &w.ActiveVersion, &w.LatestVersion, &w.Owner, &w.CreatedBy, &w.CreateTime,
			&w.ModifyTime, &w.Properties, &w.Name, &w.Description, &w.Tags, &w.LatestInstanceID)
		return w, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list workflows: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}
