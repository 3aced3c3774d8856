// Package wire holds the JSON bodies of Maestro's REST API as Go types:
// Maestro's model classes (WorkflowDefinition, WorkflowInstance,
// StepInstance, the action responses, PaginationResult, ...) with their
// snake_case field names, field order and epoch-millisecond times, so that
// a client written for Maestro reads this API's answers unchanged.
// engine/api fills them; fields of this implementation's own are added
// only where Maestro has none of that name (docs/maestro-compatibility.md).
package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// Millis returns t as Maestro writes times: epoch milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// MillisPtr returns *t in epoch milliseconds, nil when t is nil.
func MillisPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// Timeline event types and levels, as Maestro's TimelineEvent.
const (
	EventLog     = "LOG"
	EventStatus  = "STATUS"
	EventAction  = "ACTION"
	EventDetails = "DETAILS"
	LevelInfo    = "INFO"
	LevelWarn    = "WARN"
	LevelError   = "ERROR"
)

// TimelineEvent is Maestro's TimelineEvent in any of its types: LOG
// (level, message), STATUS (status), ACTION (action, author, message,
// reason, info) and DETAILS (status, message, errors, retryable).
type TimelineEvent struct {
	Timestamp int64    `json:"timestamp"`
	Type      string   `json:"type"`
	Level     string   `json:"level,omitempty"`
	Status    string   `json:"status,omitempty"`
	Action    string   `json:"action,omitempty"`
	Author    string   `json:"author,omitempty"`
	Message   string   `json:"message,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Info      *int64   `json:"info,omitempty"`
	Errors    []string `json:"errors,omitempty"`
}

// LogEvent is an INFO log event now, its message formatted as fmt.Sprintf.
func LogEvent(format string, args ...any) *TimelineEvent {
	return &TimelineEvent{Timestamp: Millis(time.Now()), Type: EventLog, Level: LevelInfo, Message: fmt.Sprintf(format, args...)}
}

// ActionEvent is an action event now: what author did.
func ActionEvent(action, author, format string, args ...any) *TimelineEvent {
	return &TimelineEvent{Timestamp: Millis(time.Now()), Type: EventAction, Action: action, Author: author,
		Message: fmt.Sprintf(format, args...)}
}

// WorkflowDefinition is Maestro's WorkflowDefinition: a version with the
// workflow's current properties and state.
type WorkflowDefinition struct {
	PropertiesSnapshot *PropertiesSnapshot `json:"properties_snapshot"`
	Metadata           *Metadata           `json:"metadata"`
	Workflow           json.RawMessage     `json:"workflow"`
	IsActive           bool                `json:"is_active"`
	ActivateTime       *int64              `json:"activate_time,omitempty"`
	ActivatedBy        string              `json:"activated_by,omitempty"`
	IsLatest           bool                `json:"is_latest"`
	IsDefault          bool                `json:"is_default"`
	EnrichedExtras     *DefinitionExtras   `json:"enriched_extras,omitempty"`
	ModifyTime         int64               `json:"modify_time"`
}

// DefinitionExtras is Maestro's WorkflowDefinitionExtras: what
// ?enriched=true adds to a version.
type DefinitionExtras struct {
	WorkflowParams     json.RawMessage `json:"workflow_params"`
	StepParams         json.RawMessage `json:"step_params"`
	NextExecutionTime  *int64          `json:"next_execution_time,omitempty"`
	NextExecutionTimes []int64         `json:"next_execution_times,omitempty"`
}

// Metadata is Maestro's version Metadata. Extra holds the push's other
// top-level fields (source, manifest, api_version, dsl_*, ...), written
// inline after the named fields as Maestro writes its extra info.
type Metadata struct {
	WorkflowID    string                     `json:"workflow_id"`
	VersionID     int64                      `json:"workflow_version_id"`
	CreateTime    int64                      `json:"create_time"`
	VersionAuthor string                     `json:"version_author"`
	GitInfo       json.RawMessage            `json:"git_info,omitempty"`
	Extra         map[string]json.RawMessage `json:"-"`
}

// MarshalJSON writes the named fields, then the extra ones.
func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	return withExtra(plain(m), m.Extra)
}

// PropertiesSnapshot is Maestro's PropertiesSnapshot: the properties
// fields (owner, run_strategy, ...) inline beside who set them when.
// Properties holds the snapshot's properties object as Maestro writes it
// (run_strategy always an object); SnapshotVersion is this
// implementation's own number for the snapshot.
type PropertiesSnapshot struct {
	WorkflowID      string
	CreateTime      int64
	Author          string
	SnapshotVersion int64
	Properties      map[string]json.RawMessage
}

// propertiesOrder is Maestro's field order of a properties snapshot.
var propertiesOrder = []string{"owner", "access_control", "run_strategy", "step_concurrency", "alerting",
	"alerting_disabled", "signal_trigger_disabled", "time_trigger_disabled", "description", "tags"}

// MarshalJSON writes Maestro's fields in Maestro's order, then the rest.
func (p PropertiesSnapshot) MarshalJSON() ([]byte, error) {
	head := struct {
		WorkflowID string `json:"workflow_id"`
		CreateTime int64  `json:"create_time"`
		Author     string `json:"author"`
	}{p.WorkflowID, p.CreateTime, p.Author}
	out, err := withOrdered(head, p.Properties, propertiesOrder)
	if err != nil {
		return nil, err
	}
	return withExtra(json.RawMessage(out), map[string]json.RawMessage{"snapshot_version": json.RawMessage(fmt.Sprint(p.SnapshotVersion))})
}

// WorkflowCreateResponse is Maestro's answer to a push. Created,
// ActiveVersionID and LatestVersionID are this implementation's own:
// created is false when the push was identical to the latest version,
// which is returned.
type WorkflowCreateResponse struct {
	WorkflowDefinition *WorkflowDefinition `json:"workflow_definition"`
	Created            bool                `json:"created"`
	// ActiveVersionID (nil when none is) and LatestVersionID are the
	// workflow's after the push.
	ActiveVersionID *int64 `json:"active_version_id"`
	LatestVersionID int64  `json:"latest_version_id"`
	// Warnings tell the caller what it may not expect, such as a push that
	// handed the workflow to another owner (this API's own).
	Warnings []string `json:"warnings,omitempty"`
}

// WorkflowActionResponse is Maestro's answer to activate and deactivate.
type WorkflowActionResponse struct {
	WorkflowID      string         `json:"workflow_id"`
	VersionID       int64          `json:"workflow_version_id"`
	TimelineEvent   *TimelineEvent `json:"timeline_event"`
	ActiveVersionID *int64         `json:"active_version_id"`
	PreviousActive  *int64         `json:"previous_active_version_id"`
	Changed         bool           `json:"changed"`
}

// WorkflowOverviewResponse is Maestro's workflow overview. Owner,
// CreatedBy, CreateTime, ModifyTime and Instances are this
// implementation's own.
type WorkflowOverviewResponse struct {
	WorkflowID           string              `json:"workflow_id"`
	ActiveVersionID      *int64              `json:"active_version_id,omitempty"`
	LatestVersionID      int64               `json:"latest_version_id"`
	DefaultVersionID     int64               `json:"default_version_id"`
	PropertiesSnapshot   *PropertiesSnapshot `json:"properties_snapshot,omitempty"`
	StepConcurrency      int64               `json:"step_concurrency"`
	NonterminalInstances map[string]int64    `json:"nonterminal_instances"`
	FailedInstances      int64               `json:"failed_instances"`
	LatestInstanceID     int64               `json:"latest_instance_id"`
	Owner                string              `json:"owner"`
	CreatedBy            string              `json:"created_by"`
	CreateTime           int64               `json:"create_time"`
	ModifyTime           int64               `json:"modify_time"`
	Instances            *InstanceStats      `json:"instances"`
}

// InstanceStats is this implementation's own count of a workflow's recent
// instances in its overview: by status, over the instances from
// CountedFrom on, and the newest instance of each status.
type InstanceStats struct {
	LatestInstanceID  int64            `json:"latest_instance_id"`
	CountedFrom       int64            `json:"counted_from_instance_id"`
	StatusCounts      map[string]int64 `json:"status_counts"`
	LatestInstanceIDs map[string]int64 `json:"latest_instance_ids"`
}

// WorkflowTimeline is Maestro's workflow timeline. NextCursor (this
// implementation's own) pages further back.
type WorkflowTimeline struct {
	WorkflowID     string                  `json:"workflow_id"`
	TimelineEvents []WorkflowTimelineEvent `json:"timeline_events"`
	NextCursor     *int64                  `json:"next_cursor,omitempty"`
}

// WorkflowTimelineEvent is one event of a workflow timeline: author, log
// and timestamp as Maestro's; the rest are this implementation's own.
type WorkflowTimelineEvent struct {
	Author          string         `json:"author"`
	Log             string         `json:"log"`
	Timestamp       int64          `json:"timestamp"`
	EventID         int64          `json:"event_id"`
	Type            string         `json:"type"`
	VersionID       int64          `json:"workflow_version_id,omitempty"`
	SnapshotVersion int64          `json:"snapshot_version,omitempty"`
	Details         map[string]any `json:"details,omitempty"`
}

// PaginationResult is Maestro's PaginationResult: a page of elements with
// the cursors to page forward (end_cursor) and back (start_cursor).
type PaginationResult[T any] struct {
	PageInfo   PageInfo `json:"page_info"`
	TotalCount int64    `json:"total_count"`
	Elements   []T      `json:"elements"`
}

// PageInfo is Maestro's PaginationResult.PageInfo.
type PageInfo struct {
	StartCursor     *string `json:"start_cursor"`
	EndCursor       *string `json:"end_cursor"`
	HasPreviousPage bool    `json:"has_previous_page"`
	HasNextPage     bool    `json:"has_next_page"`
	StartIndex      *int64  `json:"start_index"`
}

// withExtra appends extra fields, sorted by key, to the JSON object v
// encodes to.
func withExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	return withOrdered(v, extra, nil)
}

// WorkflowSummary is one workflow in GET /workflows, this implementation's
// own endpoint (Maestro has no listing of workflows): its versions, owner,
// current properties and latest instance.
type WorkflowSummary struct {
	WorkflowID       string          `json:"workflow_id"`
	Name             string          `json:"name,omitempty"`
	Description      string          `json:"description,omitempty"`
	Owner            string          `json:"owner"`
	IsActive         bool            `json:"is_active"`
	ActiveVersionID  *int64          `json:"active_version_id,omitempty"`
	LatestVersionID  int64           `json:"latest_version_id"`
	DefaultVersionID int64           `json:"default_version_id"`
	Tags             json.RawMessage `json:"tags,omitempty"`
	Properties       json.RawMessage `json:"properties,omitempty"`
	LatestInstanceID int64           `json:"latest_instance_id"`
	CreatedBy        string          `json:"created_by"`
	CreateTime       int64           `json:"create_time"`
	ModifyTime       int64           `json:"modify_time"`
}

// WorkflowList is a page of GET /workflows in workflow id order; Next,
// absent on the last page, is the cursor of the next one.
type WorkflowList struct {
	Items []WorkflowSummary `json:"items"`
	Next  *string           `json:"next_cursor,omitempty"`
}
