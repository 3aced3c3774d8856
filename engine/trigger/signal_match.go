package trigger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// What the signal broker reads and writes of the signal triggers while it
// matches new signals (engine/trigger/signalbroker), inside its transaction.

// Subscription is an ACTIVE signal trigger subscribed to a signal name.
type Subscription struct {
	SignalName string
	WorkflowID string
	UUID       string
	Definition json.RawMessage
	// Names are all the trigger's signal names, sorted.
	Names []string
}

// QueueSubscriptions queues, in b, reading the ACTIVE triggers subscribed
// to any of names, among workflows (all when nil).
func QueueSubscriptions(b *pgx.Batch, names, workflows []string, out *[]Subscription) {
	b.Queue(sqlSubscriptions, names, workflows).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var s Subscription
			if err := rows.Scan(&s.SignalName, &s.WorkflowID, &s.UUID, &s.Definition, &s.Names); err != nil {
				return err
			}
			*out = append(*out, s)
		}
		return rows.Err()
	})
}

// Subscriptions returns the ACTIVE triggers subscribed to any of names,
// among workflows (all when nil).
func Subscriptions(ctx context.Context, tx pgx.Tx, names, workflows []string) ([]Subscription, error) {
	var out []Subscription
	b := &pgx.Batch{}
	QueueSubscriptions(b, names, workflows, &out)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("read the signal triggers of %d signal names: %w", len(names), err)
	}
	return out, nil
}

// JoinKey names what a multi-signal trigger waits for: the signals whose
// join keys have one set of values (Key encodes them).
type JoinKey struct {
	WorkflowID string
	UUID       string
	Key        string
}

// PendingSignal is a signal instance a trigger holds until signals of its
// other names with the same join key values arrive.
type PendingSignal struct {
	JoinKey
	Name string
	Seq  int64
	// Params are the signal's params as stored (JSON).
	Params []byte
}

// Pending returns the signals held for keys, oldest first.
func Pending(ctx context.Context, tx pgx.Tx, keys []JoinKey) ([]PendingSignal, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ws, us, ks := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		ws[i], us[i], ks[i] = k.WorkflowID, k.UUID, k.Key
	}
	rows, err := tx.Query(ctx, sqlPendingFor, ws, us, ks)
	if err != nil {
		return nil, fmt.Errorf("read the signals %d triggers hold: %w", len(keys), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingSignal, error) {
		var p PendingSignal
		err := r.Scan(&p.WorkflowID, &p.UUID, &p.Key, &p.Name, &p.Seq, &p.Params)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the signals %d triggers hold: %w", len(keys), err)
	}
	return out, nil
}

// QueuePendingChanges queues, in b, holding add and releasing consume.
func QueuePendingChanges(b *pgx.Batch, add, consume []PendingSignal) {
	for _, c := range []struct {
		sql  string
		rows []PendingSignal
	}{{sqlPendingConsume, consume}, {sqlPendingAdd, add}} {
		if len(c.rows) == 0 {
			continue
		}
		n := len(c.rows)
		ws, us, ks, ns, ss := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
		for i, p := range c.rows {
			ws[i], us[i], ks[i], ns[i], ss[i] = p.WorkflowID, p.UUID, p.Key, p.Name, p.Seq
		}
		b.Queue(c.sql, ws, us, ks, ns, ss)
	}
}

// Matched is what matching did to one trigger in one transaction.
type Matched struct {
	WorkflowID string
	UUID       string
	// Matches counts the satisfying sets found, Starts the runs they
	// started.
	Matches, Starts int64
	// SignalIDs is the last set (signal name to seq id), InstanceID the
	// run it started (0: none).
	SignalIDs  map[string]int64
	InstanceID int64
	// Error is why the last set started no run.
	Error string
}

// QueueRecordMatched queues, in b, recording what matching did to each
// trigger.
func QueueRecordMatched(b *pgx.Batch, ms []Matched) {
	if len(ms) == 0 {
		return
	}
	n := len(ms)
	ws, us, ids, errs := make([]string, n), make([]string, n), make([][]byte, n), make([]string, n)
	matches, starts, iids := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, m := range ms {
		ws[i], us[i], matches[i], starts[i], iids[i], errs[i] = m.WorkflowID, m.UUID, m.Matches, m.Starts, m.InstanceID, m.Error
		ids[i], _ = json.Marshal(m.SignalIDs)
	}
	b.Queue(sqlSignalMatched, ws, us, matches, starts, ids, iids, errs)
}

// LockWorkflows locks workflows for the rest of tx, in id order, as a
// start does, and returns the active version of each that has one: the
// signal triggers of a workflow change only under its lock.
func LockWorkflows(ctx context.Context, tx pgx.Tx, ids []string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, sqlLockWorkflows, ids)
	if err != nil {
		return nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	out := make(map[string]int64, len(ids))
	for rows.Next() {
		var id string
		var v *int64
		if err := rows.Scan(&id, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
		}
		if v != nil {
			out[id] = *v
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock %d workflows: %w", len(ids), err)
	}
	return out, nil
}
