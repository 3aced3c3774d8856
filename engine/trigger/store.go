package trigger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what the reads need: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Tx is what claiming and advancing need: a transaction.
type Tx interface {
	Querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func scanTrigger(r pgx.CollectableRow) (Trigger, error) {
	var t Trigger
	err := r.Scan(&t.WorkflowID, &t.Index, &t.Version, &t.Key, &t.UUID, &t.Definition, &t.Timezone, &t.State, &t.Error,
		&t.DelaySeconds, &t.NextSchedule, &t.NextFire, &t.LastFire, &t.LastInstanceID, &t.LastFiredAt, &t.Missed)
	return t, err
}

// Listed is a trigger as the API reads it: with the status of the latest
// run of the instance it started last.
type Listed struct {
	Trigger
	LastRunStatus *string `json:"last_run_status,omitempty"`
}

// List returns a workflow's time triggers in definition order (none when
// it has no active version).
func List(ctx context.Context, q Querier, workflowID string) ([]Listed, error) {
	rows, err := q.Query(ctx, sqlListTriggers, workflowID)
	if err != nil {
		return nil, fmt.Errorf("list time triggers of %s: %w", workflowID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
		var l Listed
		t := &l.Trigger
		err := r.Scan(&t.WorkflowID, &t.Index, &t.Version, &t.Key, &t.UUID, &t.Definition, &t.Timezone, &t.State, &t.Error,
			&t.DelaySeconds, &t.NextSchedule, &t.NextFire, &t.LastFire, &t.LastInstanceID, &t.LastFiredAt, &t.Missed, &l.LastRunStatus)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list time triggers of %s: %w", workflowID, err)
	}
	return out, nil
}

// Claim locks up to limit triggers due at now, earliest first, with their
// workflows, for the rest of tx. A trigger another transaction holds (or
// whose workflow it holds) is skipped.
func Claim(ctx context.Context, tx Tx, now time.Time, limit int) ([]Trigger, error) {
	rows, err := tx.Query(ctx, sqlClaim, now, limit)
	if err != nil {
		return nil, fmt.Errorf("claim due time triggers: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanTrigger)
	if err != nil {
		return nil, fmt.Errorf("claim due time triggers: %w", err)
	}
	return out, nil
}

// Advance is what firing did to one claimed trigger.
type Advance struct {
	WorkflowID string
	Index      int
	// Next is the next scheduled time, nil when there is none (the trigger
	// becomes EXHAUSTED).
	Next *time.Time
	// Fire is the last fire time that started a run (nil: none did), and
	// InstanceID that run.
	Fire       *time.Time
	InstanceID int64
	// Missed counts the fire times skipped by the missed-fire policy.
	Missed int64
	// Error is why a start was refused (it does not stop the trigger), or
	// with Invalid why the trigger cannot be scheduled (it stops).
	Error   string
	Invalid bool
}

// AdvanceAll records what firing did, in the transaction that claimed the
// triggers, at now.
func AdvanceAll(ctx context.Context, tx Tx, now time.Time, adv []Advance) error {
	if len(adv) == 0 {
		return nil
	}
	n := len(adv)
	ids, idx, next, fire := make([]string, n), make([]int32, n), make([]*time.Time, n), make([]*time.Time, n)
	iids, missed, errs, invalid := make([]int64, n), make([]int64, n), make([]string, n), make([]bool, n)
	for i, a := range adv {
		to := StateActive
		switch {
		case a.Invalid:
			to = StateInvalid
		case a.Next == nil:
			to = StateExhausted
		}
		if err := Transition(StateActive, to); err != nil {
			return err
		}
		ids[i], idx[i], next[i], fire[i] = a.WorkflowID, int32(a.Index), a.Next, a.Fire
		iids[i], missed[i], errs[i], invalid[i] = a.InstanceID, a.Missed, a.Error, a.Invalid
	}
	tag, err := tx.Exec(ctx, sqlAdvance, ids, idx, next, fire, iids, missed, errs, invalid, now)
	if err != nil {
		return fmt.Errorf("advance %d time triggers: %w", n, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("advance %d time triggers: %d were claimed and active", n, tag.RowsAffected())
	}
	return nil
}

// CountDue returns how many triggers are due at now.
func CountDue(ctx context.Context, q Querier, now time.Time) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, sqlCountDue, now).Scan(&n); err != nil {
		return 0, fmt.Errorf("count due time triggers: %w", err)
	}
	return n, nil
}

// Beginner starts transactions: a pool in practice.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// SyncPending builds the time and signal trigger rows of up to limit
// workflows listed in time_trigger_pending (workflows that had triggers
// before their tables existed), in one transaction, and returns how many
// it built.
func SyncPending(ctx context.Context, db Beginner, now time.Time, limit int) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlClaimPending, limit)
		if err != nil {
			return fmt.Errorf("claim pending time triggers: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("claim pending time triggers: %w", err)
		}
		for _, id := range ids {
			if err := Sync(ctx, tx, id, now); err != nil {
				return err
			}
			if err := SyncSignals(ctx, tx, id); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, sqlDeletePending, ids); err != nil {
			return fmt.Errorf("clear pending time triggers: %w", err)
		}
		n = len(ids)
		return nil
	})
	return n, err
}
