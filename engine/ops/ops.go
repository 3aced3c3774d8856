// Package ops holds the SQL of operator commands (maestro ops,
// docs/operations-runbooks.md): stuck runs, draining an engine node, the
// maintenance window that pauses every trigger, and the audit log of what
// operators did (operator_action, migration 00170). Every change an
// operator makes is recorded in the same transaction as an operator_action
// row and an ALERT event of alert_type OPERATOR_ACTION, so that the event
// stream shows it too.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/event"
)

// AlertType is the alert_type of the ALERT events that audit operator
// actions.
const AlertType = "OPERATOR_ACTION"

// AuditWorkflowID is the workflow_id of those events: an operator action
// concerns the deployment, not a workflow, and event routing (SNS message
// attributes) needs a non-empty value.
const AuditWorkflowID = "maestro.ops"

// Actions recorded in operator_action.
const (
	ActionDrain          = "drain"
	ActionUndrain        = "undrain"
	ActionPauseTriggers  = "pause-triggers"
	ActionResumeTriggers = "resume-triggers"
	ActionRedriveDLQ     = "redrive-dlq"
)

// Store runs the operator commands' SQL.
type Store struct {
	db *pgxpool.Pool
}

// New returns a Store over db.
func New(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Errors an operator command reports.
var (
	// ErrUnknownNode: no live engine node has that id.
	ErrUnknownNode = errors.New("no live engine node with that id")
	// ErrLastNode: draining the node would leave no live node to run the
	// flow groups.
	ErrLastNode = errors.New("draining this node leaves no live engine node to hold the flow groups")
)

// Action is one audited operator action.
type Action struct {
	ID     int64          `json:"id"`
	Action string         `json:"action"`
	Actor  string         `json:"actor"`
	Target string         `json:"target"`
	Detail map[string]any `json:"detail"`
	Time   time.Time      `json:"time"`
}

const insertActionSQL = `INSERT INTO operator_action (action, actor, target, detail) VALUES ($1, $2, $3, $4) RETURNING id, create_time`

// audit records an action in tx: its operator_action row and its ALERT
// event.
func audit(ctx context.Context, tx pgx.Tx, action, actor, target string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode %s audit detail: %w", action, err)
	}
	var id int64
	var at time.Time
	if err := tx.QueryRow(ctx, insertActionSQL, action, actor, target, raw).Scan(&id, &at); err != nil {
		return fmt.Errorf("record %s in operator_action: %w", action, err)
	}
	reason := fmt.Sprintf("%s ran %s", actor, action)
	if target != "" {
		reason += " on " + target
	}
	if msg, ok := detail["reason"].(string); ok && msg != "" {
		reason += ": " + msg
	}
	ms := at.UnixMilli()
	rec := event.NewRecord(&event.AlertEvent{AlertType: AlertType, WorkflowID: AuditWorkflowID, Reason: reason, Status: action,
		Actions: []string{fmt.Sprintf("operator_action %d", id)}, EventTime: ms, SyncTime: ms, Type: event.Alert})
	if err := event.Insert(ctx, tx, rec); err != nil {
		return fmt.Errorf("record %s event: %w", action, err)
	}
	return nil
}

// Record audits an action done outside the database (a DLQ re-drive) in a
// transaction of its own.
func (s *Store) Record(ctx context.Context, action, actor, target string, detail map[string]any) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		return audit(ctx, tx, action, actor, target, detail)
	})
}

const listActionsSQL = `SELECT id, action, actor, target, detail, create_time FROM operator_action
WHERE create_time >= $1 ORDER BY id DESC LIMIT $2`

// Actions lists the audited actions since a time, newest first.
func (s *Store) Actions(ctx context.Context, since time.Time, limit int) ([]Action, error) {
	rows, err := s.db.Query(ctx, listActionsSQL, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list operator actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) {
		var a Action
		err := r.Scan(&a.ID, &a.Action, &a.Actor, &a.Target, &a.Detail, &a.Time)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list operator actions: %w", err)
	}
	return out, nil
}
