package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Node is a live engine node as an operator sees it.
type Node struct {
	NodeID    string    `json:"node_id"`
	StartedAt time.Time `json:"started_at"`
	Heartbeat time.Time `json:"heartbeat_at"`
	Draining  bool      `json:"draining"`
	Groups    int       `json:"groups"`
}

const nodesSQL = `
SELECT n.node_id, n.started_at, n.heartbeat_at, n.draining,
    (SELECT count(*) FROM flow_group g WHERE g.owner = n.node_id AND g.expires_at > now())
FROM engine_node n WHERE n.expires_at > now() ORDER BY n.node_id`

// Nodes lists the live engine nodes with the flow groups each holds.
func (s *Store) Nodes(ctx context.Context) ([]Node, error) {
	rows, err := s.db.Query(ctx, nodesSQL)
	if err != nil {
		return nil, fmt.Errorf("list engine nodes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) {
		var n Node
		err := r.Scan(&n.NodeID, &n.StartedAt, &n.Heartbeat, &n.Draining, &n.Groups)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("list engine nodes: %w", err)
	}
	return out, nil
}

const (
	lockNodesSQL = `SELECT node_id, draining FROM engine_node WHERE expires_at > now() ORDER BY node_id FOR UPDATE`
	drainSQL     = `UPDATE engine_node SET draining = $2 WHERE node_id = $1`
)

// Drain marks a live node draining (on) or not (off), audited. A draining
// node hands its flow groups over at its next heartbeat round, as on
// SIGTERM, and claims none; the others share them out without it. Draining
// the last node that is not draining is refused (ErrLastNode) unless force.
func (s *Store) Drain(ctx context.Context, node string, on, force bool, actor, reason string) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, lockNodesSQL)
		if err != nil {
			return fmt.Errorf("lock engine nodes: %w", err)
		}
		found, others := false, 0
		for rows.Next() {
			var id string
			var draining bool
			if err := rows.Scan(&id, &draining); err != nil {
				rows.Close()
				return fmt.Errorf("lock engine nodes: %w", err)
			}
			if id == node {
				found = true
			} else if !draining {
				others++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lock engine nodes: %w", err)
		}
		if !found {
			return fmt.Errorf("%w: %q", ErrUnknownNode, node)
		}
		if on && others == 0 && !force {
			return ErrLastNode
		}
		if _, err := tx.Exec(ctx, drainSQL, node, on); err != nil {
			return fmt.Errorf("mark node %s draining=%v: %w", node, on, err)
		}
		action := ActionDrain
		if !on {
			action = ActionUndrain
		}
		return audit(ctx, tx, action, actor, node, map[string]any{"reason": reason, "force": force})
	})
}

// Maintenance is the deployment's maintenance window.
type Maintenance struct {
	TriggersPaused bool       `json:"triggers_paused"`
	PausedBy       string     `json:"paused_by,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	PausedAt       *time.Time `json:"paused_at,omitempty"`
	// DeferredSignals are signals received while paused and not yet
	// matched against signal triggers.
	DeferredSignals int64 `json:"deferred_signals"`
}

const maintenanceSQL = `
SELECT m.triggers_paused, coalesce(m.paused_by, ''), coalesce(m.reason, ''), m.paused_at,
    (SELECT count(*) FROM signal_trigger_deferred)
FROM maintenance m WHERE m.id = 1`

// ErrNoMaintenanceRow: the database misses migration 00170's row.
var ErrNoMaintenanceRow = errors.New("the maintenance row is missing (migration 00170)")

// Maintenance reads the maintenance window.
func (s *Store) Maintenance(ctx context.Context) (Maintenance, error) {
	var m Maintenance
	err := s.db.QueryRow(ctx, maintenanceSQL).Scan(&m.TriggersPaused, &m.PausedBy, &m.Reason, &m.PausedAt, &m.DeferredSignals)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, ErrNoMaintenanceRow
	}
	if err != nil {
		return m, fmt.Errorf("read maintenance window: %w", err)
	}
	return m, nil
}

const setTriggersPausedSQL = `
UPDATE maintenance SET triggers_paused = $1,
    paused_by = CASE WHEN $1::boolean THEN $2::text END, reason = CASE WHEN $1::boolean THEN $3::text END,
    paused_at = CASE WHEN $1::boolean THEN now() END, updated_at = now()
WHERE id = 1 RETURNING (SELECT triggers_paused FROM maintenance WHERE id = 1)`

// SetTriggersPaused pauses (on) or resumes every trigger, audited, and
// reports whether they were paused before. While paused the time-trigger
// scheduler fires nothing and signals start no triggered runs (they are
// kept, and matched on resume).
func (s *Store) SetTriggersPaused(ctx context.Context, on bool, actor, reason string) (before bool, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// Waits for the batches under way; new ones wait for this commit.
		var ok bool
		if err := tx.QueryRow(ctx, triggersPauseLockExclusive).Scan(&ok); err != nil {
			return fmt.Errorf("lock the trigger pause: %w", err)
		}
		if err := tx.QueryRow(ctx, setTriggersPausedSQL, on, actor, reason).Scan(&before); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNoMaintenanceRow
			}
			return fmt.Errorf("set triggers paused=%v: %w", on, err)
		}
		action := ActionPauseTriggers
		if !on {
			action = ActionResumeTriggers
		}
		return audit(ctx, tx, action, actor, "triggers", map[string]any{"reason": reason, "was_paused": before})
	})
	return before, err
}

// TriggersPausedSQL is the statement the trigger services ask before they
// fire or match: true while an operator has paused every trigger.
const TriggersPausedSQL = `SELECT coalesce((SELECT triggers_paused FROM maintenance WHERE id = 1), false)`

// triggersPauseLockSQL takes the advisory lock that orders a pause
// against the batches that fire or match triggers: each batch holds it
// shared for its transaction, a pause takes it exclusively. An advisory
// lock lives in the lock manager, so the hot paths write nothing to the
// maintenance row to hold it (a share row lock on one row taken by every
// batch would rewrite that row's header and create multixacts).
const (
	triggersPauseLockShared    = `SELECT true FROM pg_advisory_xact_lock_shared(hashtextextended('maestro.ops.triggers_paused', 0))`
	triggersPauseLockExclusive = `SELECT true FROM pg_advisory_xact_lock(hashtextextended('maestro.ops.triggers_paused', 0))`
)

// TriggersPausedLocked reports, inside tx, whether every trigger is paused,
// holding the pause lock shared until tx ends: a pause waits for tx, and a
// batch that begins after the pause committed sees it (the row is read by
// a statement that starts after the lock is granted). So no trigger fires
// after the pause command returns. A database without the row (before
// migration 00170) is not paused.
func TriggersPausedLocked(ctx context.Context, tx Querier) (bool, error) {
	var ok, paused bool
	if err := tx.QueryRow(ctx, triggersPauseLockShared).Scan(&ok); err != nil {
		return false, fmt.Errorf("lock the trigger pause: %w", err)
	}
	err := tx.QueryRow(ctx, `SELECT triggers_paused FROM maintenance WHERE id = 1`).Scan(&paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read whether triggers are paused: %w", err)
	}
	return paused, nil
}

// Querier is what TriggersPaused needs: a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TriggersPaused reports whether every trigger is paused.
func TriggersPaused(ctx context.Context, q Querier) (bool, error) {
	var paused bool
	if err := q.QueryRow(ctx, TriggersPausedSQL).Scan(&paused); err != nil {
		return false, fmt.Errorf("read whether triggers are paused: %w", err)
	}
	return paused, nil
}
