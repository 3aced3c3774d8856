package definition

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
)

// The events of definition changes (docs/events.md), written in the
// transaction of the change. Each change calls one of these.

// pushed is what a push changed.
type pushed struct {
	workflowID, name, author string
	created                  *Created
	version, snapshot        int64
	active, previous         *int64
}

// queuePushEvents queues the event of a push in b: a new version with new
// properties, a new version, new properties, or (an unchanged definition
// pushed with is_active) an activation.
func queuePushEvents(b *pgx.Batch, p pushed) {
	name := p.name
	if name == "" {
		name = p.workflowID
	}
	c := p.created
	base := event.WorkflowChangeEvent{WorkflowID: p.workflowID, Author: p.author, EventTime: time.Now().UnixMilli()}
	var recs []event.Record
	switch {
	case c.New:
		e := base
		e.Type, e.WorkflowName, e.VersionID = event.WorkflowVersionChange, name, ptr(p.version)
		e.CurrentActiveVersionID, e.PreviousActiveVersionID = ptr(orZero(p.active)), ptr(orZero(p.previous))
		if c.PropertiesChanged {
			e.Type, e.SnapshotID = event.WorkflowDefinitionChange, ptr(p.snapshot)
		}
		recs = append(recs, event.NewRecord(&e))
	default:
		if c.PropertiesChanged {
			e := base
			e.Type, e.SnapshotID = event.WorkflowPropertiesChange, ptr(p.snapshot)
			recs = append(recs, event.NewRecord(&e))
		}
		if c.Activated {
			recs = append(recs, activationRecord(p.workflowID, p.author, p.active, p.previous))
		}
	}
	event.Queue(b, recs...)
}

// queuePropertiesEvent queues the event of a properties change in b.
func queuePropertiesEvent(b *pgx.Batch, workflowID, author string, snapshot int64) {
	event.Queue(b, event.NewRecord(&event.WorkflowChangeEvent{Type: event.WorkflowPropertiesChange,
		WorkflowID: workflowID, Author: author, SnapshotID: ptr(snapshot), EventTime: time.Now().UnixMilli()}))
}

// activationRecord is the event of an activation (active set) or a
// deactivation (active nil).
func activationRecord(workflowID, author string, active, previous *int64) event.Record {
	e := event.WorkflowChangeEvent{WorkflowID: workflowID, Author: author, EventTime: time.Now().UnixMilli(),
		PreviousActiveVersionID: ptr(orZero(previous))}
	if active == nil {
		e.Type = event.WorkflowDeactivationChange
	} else {
		e.Type, e.CurrentActiveVersionID = event.WorkflowActivationChange, ptr(*active)
	}
	return event.NewRecord(&e)
}

// addActivationEvent writes the event of an activation or deactivation in
// tx.
func addActivationEvent(ctx context.Context, tx pgx.Tx, workflowID, author string, active, previous *int64) error {
	return event.Insert(ctx, tx, activationRecord(workflowID, author, active, previous))
}

// sqlDeletionEvent writes the deletion event of workflow $1 with its
// internal id, read from its row before the row is deleted.
const sqlDeletionEvent = event.InsertSQL + `
SELECT $2::smallint, workflow_id, NULL, ($3::jsonb || jsonb_build_object('internal_id', internal_id))::json
FROM workflow WHERE workflow_id = $1`

// addDeletionEvent writes the event of a workflow's deletion in tx; it
// must run before the workflow row is deleted.
func addDeletionEvent(ctx context.Context, tx pgx.Tx, workflowID, author string) error {
	rec := event.NewRecord(&event.WorkflowChangeEvent{Type: event.WorkflowDeletionChange, WorkflowID: workflowID,
		Author: author, EventTime: time.Now().UnixMilli()})
	if _, err := tx.Exec(ctx, sqlDeletionEvent, workflowID, rec.Kind, rec.Payload); err != nil {
		return fmt.Errorf("record workflow %s deletion event: %w", workflowID, err)
	}
	return nil
}

func ptr(v int64) *int64 { return &v }

func orZero(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
