// Package event is Maestro's event publishing: the event types and their
// JSON shapes (Maestro's models/events), the transactional outbox they are
// written to with the change they report (the maestro_event table), the
// forwarders that hand them to a sink (SQS in AWS, the in-process hub and a
// webhook in maestro dev), the conversion to the external events consumers
// receive, and the live feed (GET /api/v3/events). See docs/events.md.
//
// Delivery is at least once and publishing exactly once: an event row
// commits with its change, a forwarder moves a cursor past it only after
// its sink accepted it, and every event carries a stable event_id that
// consumers deduplicate on.
package event

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/maestro-aws/maestro/engine/instance"
)

// Type is a Maestro event type (MaestroEvent.Type), or Alert, our own.
type Type string

// Event types.
const (
	StepInstanceStatusChange     Type = "STEP_INSTANCE_STATUS_CHANGE_EVENT"
	WorkflowInstanceStatusChange Type = "WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"
	WorkflowDefinitionChange     Type = "WORKFLOW_DEFINITION_CHANGE_EVENT"
	WorkflowVersionChange        Type = "WORKFLOW_VERSION_CHANGE_EVENT"
	WorkflowPropertiesChange     Type = "WORKFLOW_PROPERTIES_CHANGE_EVENT"
	WorkflowActivationChange     Type = "WORKFLOW_ACTIVATION_CHANGE_EVENT"
	WorkflowDeactivationChange   Type = "WORKFLOW_DEACTIVATION_CHANGE_EVENT"
	WorkflowDeletionChange       Type = "WORKFLOW_DELETION_CHANGE_EVENT"
	// Alert is an alert raised from a workflow's alerting properties
	// (engine/alert); it goes to the alert topic.
	Alert Type = "ALERT"
	// BackfillStatusChange is a managed backfill's status change (ours;
	// docs/backfill.md).
	BackfillStatusChange Type = "BACKFILL_STATUS_CHANGE_EVENT"
)

// Kind is the maestro_event.kind column: a type as a small number.
type Kind int16

// kinds maps each type to its kind; the numbers are stored, never reuse one.
var kinds = map[Type]Kind{
	StepInstanceStatusChange:     1,
	WorkflowInstanceStatusChange: 2,
	WorkflowDefinitionChange:     3,
	WorkflowVersionChange:        4,
	WorkflowPropertiesChange:     5,
	WorkflowActivationChange:     6,
	WorkflowDeactivationChange:   7,
	WorkflowDeletionChange:       8,
	Alert:                        9,
	BackfillStatusChange:         10,
}

// Types lists every event type in kind order.
func Types() []Type {
	out := make([]Type, len(kinds))
	for t, k := range kinds {
		out[k-1] = t
	}
	return out
}

// KindOf returns the kind of an event type; ok is false for an unknown type.
func KindOf(t Type) (Kind, bool) {
	k, ok := kinds[t]
	return k, ok
}

// ParseType reads an event type; the name is case-insensitive.
func ParseType(s string) (Type, error) {
	t := Type(strings.ToUpper(strings.TrimSpace(s)))
	if _, ok := kinds[t]; !ok {
		return "", fmt.Errorf("unknown event type %q", s)
	}
	return t, nil
}

// IsStatusChange reports whether the type reports a run's or a step's
// status change.
func (t Type) IsStatusChange() bool {
	return t == StepInstanceStatusChange || t == WorkflowInstanceStatusChange
}

// Tag is a tag as events carry it: always an object.
type Tag struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// UnmarshalJSON reads a tag written as a bare name or as an object (the
// definition's two forms).
func (t *Tag) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*t = Tag{Name: name}
		return nil
	}
	type plain Tag
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = Tag(p)
	return nil
}

// StatusChangeRecord is one status change of a step attempt.
type StatusChangeRecord struct {
	OldStatus instance.StepStatus `json:"old_status"`
	NewStatus instance.StepStatus `json:"new_status"`
	// EventTime is when the change happened, epoch milliseconds.
	EventTime int64 `json:"event_time"`
}

// StepInstanceStatusChangeEvent reports the status changes of one step
// attempt written at once (a step moves CREATED → … → STARTING in one
// write): each status change is in exactly one such event, in order.
type StepInstanceStatusChangeEvent struct {
	// EventID identifies the event for deduplication (our addition).
	EventID            string `json:"event_id,omitempty"`
	WorkflowID         string `json:"workflow_id"`
	WorkflowInstanceID int64  `json:"workflow_instance_id"`
	WorkflowRunID      int64  `json:"workflow_run_id"`
	StepID             string `json:"step_id"`
	StepAttemptID      int64  `json:"step_attempt_id"`
	WorkflowUUID       string `json:"workflow_uuid"`
	StepUUID           string `json:"step_uuid"`
	CorrelationID      string `json:"correlation_id"`
	// StepInstanceID is the step's position in its workflow (1-based).
	StepInstanceID      int64                `json:"step_instance_id"`
	ClusterName         string               `json:"cluster_name,omitempty"`
	StatusChangeRecords []StatusChangeRecord `json:"status_change_records"`
	// Seq is the step attempt's write sequence after this write (our
	// addition): it orders the attempt's events.
	Seq int64 `json:"seq"`
	// BackfillID is the backfill the run belongs to (our addition;
	// docs/backfill.md), absent for none.
	BackfillID string `json:"backfill_id,omitempty"`
	SyncTime   int64  `json:"sync_time"`
	SendTime   int64  `json:"send_time,omitempty"`
	Type       Type   `json:"type"`
}

// WorkflowInstanceStatusChangeEvent reports one status change of a run.
type WorkflowInstanceStatusChangeEvent struct {
	EventID            string                  `json:"event_id,omitempty"`
	WorkflowID         string                  `json:"workflow_id"`
	WorkflowInstanceID int64                   `json:"workflow_instance_id"`
	WorkflowRunID      int64                   `json:"workflow_run_id"`
	WorkflowUUID       string                  `json:"workflow_uuid"`
	CorrelationID      string                  `json:"correlation_id"`
	Depth              int                     `json:"depth"`
	WorkflowName       string                  `json:"workflow_name"`
	ClusterName        string                  `json:"cluster_name,omitempty"`
	Tags               []Tag                   `json:"tags,omitempty"`
	OldStatus          instance.WorkflowStatus `json:"old_status"`
	NewStatus          instance.WorkflowStatus `json:"new_status"`
	EventTime          int64                   `json:"event_time"`
	// Seq is the run's write sequence after this write (our addition): it
	// orders the run's events.
	Seq int64 `json:"seq"`
	// BackfillID is the backfill the run belongs to (our addition;
	// docs/backfill.md), absent for none.
	BackfillID string `json:"backfill_id,omitempty"`
	// Incremental is the range of table snapshots the run covers, for a
	// run of an incremental trigger (our addition; docs/incremental.md),
	// absent for another run.
	Incremental *IncrementalRange `json:"incremental,omitempty"`
	SyncTime    int64             `json:"sync_time"`
	SendTime    int64             `json:"send_time,omitempty"`
	Type        Type              `json:"type"`
}

// IncrementalRange is the range of snapshots of a table an incremental run
// covers: after FromSnapshotID (0: the table's beginning) up to and
// including ToSnapshotID; commit times in epoch ms.
type IncrementalRange struct {
	Table          string `json:"table"`
	FromSnapshotID int64  `json:"from_snapshot_id"`
	ToSnapshotID   int64  `json:"to_snapshot_id"`
	FromCommitTime int64  `json:"from_commit_time"`
	ToCommitTime   int64  `json:"to_commit_time"`
}

// WorkflowChangeEvent is every workflow-level change event: a new version
// with new properties (WorkflowDefinitionChange), a new version
// (WorkflowVersionChange), new properties (WorkflowPropertiesChange),
// activation, deactivation and deletion. Each type carries the fields
// Maestro's class of that type has; the others are left out.
type WorkflowChangeEvent struct {
	EventID      string `json:"event_id,omitempty"`
	WorkflowID   string `json:"workflow_id"`
	WorkflowName string `json:"workflow_name,omitempty"`
	InternalID   *int64 `json:"internal_id,omitempty"`
	// Author is who made the change.
	Author string `json:"author"`
	// VersionID is the version a push created.
	VersionID *int64 `json:"version_id,omitempty"`
	// CurrentActiveVersionID and PreviousActiveVersionID: 0 means no
	// version was active.
	CurrentActiveVersionID  *int64 `json:"current_active_version_id,omitempty"`
	PreviousActiveVersionID *int64 `json:"previous_active_version_id,omitempty"`
	// SnapshotID is the properties snapshot's number (the {snapshot} of
	// GET /workflows/{id}/properties-snapshot/{snapshot}).
	SnapshotID  *int64 `json:"snapshot_id,omitempty"`
	ClusterName string `json:"cluster_name,omitempty"`
	EventTime   int64  `json:"event_time"`
	SyncTime    int64  `json:"sync_time"`
	SendTime    int64  `json:"send_time,omitempty"`
	Type        Type   `json:"type"`
}

// Recipients are who an alert is for, from the alerting properties.
type Recipients struct {
	Emails      []string `json:"emails,omitempty"`
	Pagerduties []string `json:"pagerduties,omitempty"`
	Slack       *Slack   `json:"slack,omitempty"`
}

// Slack is the Slack part of the recipients.
type Slack struct {
	Users        []string `json:"users,omitempty"`
	Channels     []string `json:"channels,omitempty"`
	MentionUsers []string `json:"mention_users,omitempty"`
}

// AlertEvent is an alert (engine/alert): at most one per run and alert
// type.
type AlertEvent struct {
	EventID            string     `json:"event_id,omitempty"`
	AlertType          string     `json:"alert_type"`
	WorkflowID         string     `json:"workflow_id"`
	WorkflowInstanceID int64      `json:"workflow_instance_id,omitempty"`
	WorkflowRunID      int64      `json:"workflow_run_id,omitempty"`
	WorkflowUUID       string     `json:"workflow_uuid,omitempty"`
	StepID             string     `json:"step_id,omitempty"`
	StepAttemptID      int64      `json:"step_attempt_id,omitempty"`
	Status             string     `json:"status,omitempty"`
	Reason             string     `json:"reason"`
	Link               string     `json:"link,omitempty"`
	Recipients         Recipients `json:"recipients"`
	Actions            []string   `json:"actions,omitempty"`
	PagerdutySeverity  string     `json:"pagerduty_severity,omitempty"`
	ClusterName        string     `json:"cluster_name,omitempty"`
	EventTime          int64      `json:"event_time"`
	SyncTime           int64      `json:"sync_time"`
	SendTime           int64      `json:"send_time,omitempty"`
	Type               Type       `json:"type"`
}

// BackfillStatusChangeEvent reports one status change of a managed
// backfill (docs/backfill.md): created RUNNING (old_status empty), paused,
// resumed, cancelled, retried, ended.
type BackfillStatusChangeEvent struct {
	EventID         string `json:"event_id,omitempty"`
	BackfillID      string `json:"backfill_id"`
	WorkflowID      string `json:"workflow_id"`
	WorkflowVersion int64  `json:"workflow_version"`
	OldStatus       string `json:"old_status,omitempty"`
	NewStatus       string `json:"new_status"`
	// Author is who acted ("" for the driver's own moves).
	Author string `json:"author,omitempty"`
	// Counts are the backfill's partitions by state at the change.
	Counts      map[string]int `json:"counts,omitempty"`
	ClusterName string         `json:"cluster_name,omitempty"`
	EventTime   int64          `json:"event_time"`
	SyncTime    int64          `json:"sync_time"`
	SendTime    int64          `json:"send_time,omitempty"`
	Type        Type           `json:"type"`
}
