package definition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/maestro-aws/maestro/engine/wire"
)

// Workflow timeline event types.
const (
	EventCreateVersion    = "CREATE_VERSION"
	EventActivate         = "ACTIVATE_VERSION"
	EventDeactivate       = "DEACTIVATE"
	EventUpdateProperties = "UPDATE_PROPERTIES"
	EventDelete           = "DELETE_WORKFLOW"
	EventDeleteCompleted  = "DELETE_COMPLETED"
)

// timelineEntry is one workflow-level change as the event column holds
// it (the row adds its id and time): a version created or activated, the
// workflow deactivated, properties changed, the workflow deleted. The
// timeline outlives the workflow, so a deletion stays visible. Read back,
// an entry is Maestro's wire.WorkflowTimelineEvent.
type timelineEntry struct {
	Type            string         `json:"type"`
	Author          string         `json:"author"`
	Message         string         `json:"message"`
	Version         int64          `json:"workflow_version_id,omitempty"`
	SnapshotVersion int64          `json:"snapshot_version,omitempty"`
	Details         map[string]any `json:"details,omitempty"`
}

func queueTimeline(b *pgx.Batch, workflowID string, e timelineEntry) {
	b.Queue(sqlInsertTimeline, workflowID, e)
}

func addTimeline(ctx context.Context, tx pgx.Tx, workflowID string, e timelineEntry) error {
	if _, err := tx.Exec(ctx, sqlInsertTimeline, workflowID, e); err != nil {
		return fmt.Errorf("append workflow %s timeline: %w", workflowID, err)
	}
	return nil
}

// Page is one page of a listing, newest first; Next is the cursor of the
// following page, absent on the last.
type Page[T any] struct {
	Items []T    `json:"items"`
	Next  *int64 `json:"next_cursor,omitempty"`
}

// Page sizes. A timeline page may hold up to MaxTimelinePage events (the
// most Maestro's timeline returns).
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
	MaxTimelinePage = 300
)

func pageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return min(limit, MaxPageSize)
}

// Timeline returns a page of the workflow's timeline, newest first, below
// cursor (0 for the first page). It is readable after the workflow was
// deleted; ErrNotFound means the workflow never existed.
func (s *Store) Timeline(ctx context.Context, workflowID string, cursor int64, limit int) (*Page[wire.WorkflowTimelineEvent], error) {
	if limit <= 0 || limit > MaxTimelinePage {
		limit = MaxTimelinePage
	}
	rows, err := s.db.Query(ctx, sqlTimeline, workflowID, cursor, limit+1)
	if err != nil {
		return nil, fmt.Errorf("read workflow %s timeline: %w", workflowID, err)
	}
	page := &Page[wire.WorkflowTimelineEvent]{Items: []wire.WorkflowTimelineEvent{}}
	for rows.Next() {
		var e wire.WorkflowTimelineEvent
		var raw []byte
		var created time.Time
		if err := rows.Scan(&e.EventID, &raw, &created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read workflow %s timeline: %w", workflowID, err)
		}
		var te timelineEntry
		if err := json.Unmarshal(raw, &te); err != nil {
			rows.Close()
			return nil, fmt.Errorf("decode workflow %s timeline event %d: %w", workflowID, e.EventID, err)
		}
		e.Timestamp = wire.Millis(created)
		e.Type, e.Author, e.Log, e.VersionID, e.SnapshotVersion, e.Details =
			te.Type, te.Author, te.Message, te.Version, te.SnapshotVersion, te.Details
		page.Items = append(page.Items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read workflow %s timeline: %w", workflowID, err)
	}
	if len(page.Items) == 0 && cursor == 0 {
		return nil, fmt.Errorf("workflow %s does not exist: %w", workflowID, ErrNotFound)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		next := page.Items[limit-1].EventID
		page.Next = &next
	}
	return page, nil
}

// errNoRows reports whether err is pgx.ErrNoRows.
func errNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
