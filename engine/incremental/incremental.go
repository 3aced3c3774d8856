// Package incremental keeps the watermark of incremental processing: per
// (workflow, table), the last snapshot a SUCCEEDED run covered, the
// changes received since, and the range of the one run in flight
// (docs/incremental.md). A signal trigger with "incremental": true records
// each table change here (Record), starts a run for the range since the
// watermark when none is in flight (Plan, Started), and the engine ends
// the range in the transaction that writes the run's terminal state
// (Ended): the watermark moves to the range's end only when the run
// SUCCEEDED. Changes that arrive while a run is in flight wait, and the
// next sweep (Due) starts ONE run for all of them once it ends.
//
// Exactly once: a range is planned and its run created under the row lock
// of its watermark, in one transaction that also marks the run in flight;
// at most one run is in flight per (workflow, table), and the next range
// starts where the watermark is, so ranges never overlap and leave no gap.
package incremental

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maestro-aws/maestro/engine/tablechange"
)

// Querier is what the reads need: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ErrNotFound: no watermark for the workflow and table.
var ErrNotFound = errors.New("incremental: watermark not found")

// ErrInFlight: a run of the table is in flight, so its watermark cannot be
// changed by hand.
var ErrInFlight = errors.New("incremental: a run of the table is in flight")

// Key names one watermark.
type Key struct {
	WorkflowID string
	Table      string
}

// Watermark is one (workflow, table)'s state.
type Watermark struct {
	WorkflowID  string `json:"workflow_id"`
	Table       string `json:"table"`
	TriggerUUID string `json:"trigger_uuid,omitempty"`
	// SnapshotID and CommitTime (epoch ms) are the last snapshot a
	// SUCCEEDED run covered; 0 when none has.
	SnapshotID int64 `json:"snapshot_id"`
	CommitTime int64 `json:"commit_time"`
	// LatestSnapshotID and LatestCommitTime are the newest change
	// received.
	LatestSnapshotID int64 `json:"latest_snapshot_id"`
	LatestCommitTime int64 `json:"latest_commit_time"`
	// AttemptedSnapshotID is the end of the last range a run was started
	// for.
	AttemptedSnapshotID int64 `json:"attempted_snapshot_id"`
	AttemptedCommitTime int64 `json:"attempted_commit_time"`
	// InFlight is the run covering the range after the watermark, if any.
	InFlight *int64 `json:"inflight_instance_id,omitempty"`
	// Pending counts the changes received after the watermark.
	Pending     int64     `json:"pending_changes"`
	RunsStarted int64     `json:"runs_started"`
	ModifyTime  time.Time `json:"modify_time"`
}

// RunRange is the range one run covers.
type RunRange struct {
	WorkflowID     string `json:"workflow_id"`
	InstanceID     int64  `json:"workflow_instance_id"`
	Table          string `json:"table"`
	FromSnapshotID int64  `json:"from_snapshot_id"`
	ToSnapshotID   int64  `json:"to_snapshot_id"`
	FromCommitTime int64  `json:"from_commit_time"`
	ToCommitTime   int64  `json:"to_commit_time"`
	SnapshotCount  int64  `json:"snapshot_count"`
	HasOverwrite   bool   `json:"has_overwrite"`
	HasDelete      bool   `json:"has_delete"`
	BackfillID     string `json:"backfill_id,omitempty"`
	// State is RUNNING until the run ends, then its terminal status.
	State      string     `json:"state"`
	CreateTime time.Time  `json:"create_time"`
	EndTime    *time.Time `json:"end_time,omitempty"`
}

// Range is the tablechange.Range the run covers.
func (r RunRange) Range() tablechange.Range {
	ref, _ := tablechange.ParseTableRef(r.Table)
	out := tablechange.Range{Table: ref, FromSnapshotID: r.FromSnapshotID, ToSnapshotID: r.ToSnapshotID,
		ToCommitTime: time.UnixMilli(r.ToCommitTime).UTC()}
	if r.FromSnapshotID != 0 {
		out.FromCommitTime = time.UnixMilli(r.FromCommitTime).UTC()
	}
	return out
}

// Received is a table change a trigger received.
type Received struct {
	Change tablechange.Change
	// SignalSeq is the signal instance that announced it (0 for none).
	SignalSeq int64
}

// Record stores changes received by the trigger triggerUUID of workflowID,
// inside tx: each table gets its watermark row when it has none, each
// change its row (a redelivered one is the row it already has), and the
// watermark's latest change moves forward. It returns the keys touched,
// in order, for Plan.
func Record(ctx context.Context, tx pgx.Tx, workflowID, triggerUUID string, changes []Received) ([]Key, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	var (
		tables, ops             []string
		snaps, parents, commits []int64
		seqs                    []int64
		keys                    []Key
		seen                    = map[string]bool{}
	)
	for _, c := range changes {
		t := c.Change.Table.String()
		tables = append(tables, t)
		snaps = append(snaps, c.Change.SnapshotID)
		parents = append(parents, c.Change.ParentSnapshotID)
		commits = append(commits, c.Change.CommitTime.UnixMilli())
		ops = append(ops, string(c.Change.Operation))
		seqs = append(seqs, c.SignalSeq)
		if !seen[t] {
			seen[t] = true
			keys = append(keys, Key{WorkflowID: workflowID, Table: t})
		}
	}
	b := &pgx.Batch{}
	b.Queue(sqlRecordWatermarks, workflowID, triggerUUID, tables)
	b.Queue(sqlRecordChanges, workflowID, tables, snaps, parents, commits, ops, seqs)
	b.Queue(sqlRecordLatest, workflowID, triggerUUID, tables, snaps, commits)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("record %d table changes of %s: %w", len(changes), workflowID, err)
	}
	return keys, nil
}

// Planned is the range a run is about to be started for, planned under
// its watermark's row lock.
type Planned struct {
	Key
	TriggerUUID string
	// Seq numbers the run among the table's runs (from 1): its request
	// id derives from it.
	Seq            int64
	FromSnapshotID int64
	ToSnapshotID   int64
	FromCommitTime int64
	ToCommitTime   int64
	SnapshotCount  int64
	HasOverwrite   bool
	HasDelete      bool
	// ToSignalSeq is the signal that announced the range's last change
	// (0 for none).
	ToSignalSeq int64
}

// Range is the tablechange.Range of the plan.
func (p Planned) Range() tablechange.Range {
	return RunRange{Table: p.Table, FromSnapshotID: p.FromSnapshotID, ToSnapshotID: p.ToSnapshotID,
		FromCommitTime: p.FromCommitTime, ToCommitTime: p.ToCommitTime}.Range()
}

// Plan locks the watermarks of keys (FOR UPDATE; SKIP LOCKED with skip)
// inside tx and returns the range of each that is due: no run in flight,
// and a change received beyond the last range started. The caller holds
// the workflows' locks (as a start takes them) and either starts a run
// for each plan and calls Started, or rolls back.
func Plan(ctx context.Context, tx pgx.Tx, keys []Key, skip bool) ([]Planned, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	wfs := make([]string, len(keys))
	tables := make([]string, len(keys))
	for i, k := range keys {
		wfs[i], tables[i] = k.WorkflowID, k.Table
	}
	q := sqlPlan
	if skip {
		q = sqlPlanSkipLocked
	}
	rows, err := tx.Query(ctx, q, wfs, tables)
	if err != nil {
		return nil, fmt.Errorf("plan %d incremental ranges: %w", len(keys), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Planned, error) {
		var p Planned
		err := r.Scan(&p.WorkflowID, &p.Table, &p.TriggerUUID, &p.Seq, &p.FromSnapshotID, &p.FromCommitTime,
			&p.ToSnapshotID, &p.ToCommitTime)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("plan %d incremental ranges: %w", len(keys), err)
	}
	for i := range out {
		p := &out[i]
		if err := tx.QueryRow(ctx, sqlRangeStats, p.WorkflowID, p.Table, p.FromCommitTime, p.FromSnapshotID,
			p.ToCommitTime, p.ToSnapshotID).Scan(&p.SnapshotCount, &p.HasOverwrite, &p.HasDelete, &p.ToSignalSeq); err != nil {
			return nil, fmt.Errorf("count the changes of %s in (%d, %d]: %w", p.Table, p.FromSnapshotID, p.ToSnapshotID, err)
		}
	}
	return out, nil
}

// Started records, inside the transaction that planned p and created its
// run, that instanceID covers p's range: the run is in flight, the range
// the last one started.
func Started(ctx context.Context, tx pgx.Tx, p Planned, instanceID int64, backfillID string) error {
	tag, err := tx.Exec(ctx, sqlStarted, p.WorkflowID, p.Table, instanceID, p.FromSnapshotID, p.ToSnapshotID,
		p.FromCommitTime, p.ToCommitTime, p.SnapshotCount, p.HasOverwrite, p.HasDelete, backfillID, p.Seq)
	if err != nil {
		return fmt.Errorf("record run %d of %s covering %s (%d, %d]: %w", instanceID, p.WorkflowID, p.Table,
			p.FromSnapshotID, p.ToSnapshotID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("record run %d of %s: the watermark of %s moved since it was planned", instanceID, p.WorkflowID, p.Table)
	}
	return nil
}

// Ended ends the range of an incremental run in tx, the transaction that
// writes the run's terminal status: the run is no longer in flight, and
// when it SUCCEEDED the watermark moves to the end of its range. due
// reports that changes arrived meanwhile (a sweep starts their run). It
// does nothing for a run that covers no range, or whose range was ended
// before.
func Ended(ctx context.Context, tx pgx.Tx, workflowID string, instanceID int64, status string) (due bool, err error) {
	err = tx.QueryRow(ctx, sqlEnded, workflowID, instanceID, status).Scan(&due)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("end the range of run %d of %s (%s): %w", instanceID, workflowID, status, err)
	}
	return due, nil
}

// Due lists up to limit watermarks that wait for a run: changes beyond
// the last range started and no run in flight (the sweep's work list).
func Due(ctx context.Context, q Querier, limit int) ([]Key, error) {
	rows, err := q.Query(ctx, sqlDue, limit)
	if err != nil {
		return nil, fmt.Errorf("list due watermarks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		var k Key
		err := r.Scan(&k.WorkflowID, &k.Table)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list due watermarks: %w", err)
	}
	return out, nil
}

// Orphan is a run in flight whose run ended without ending its range (it
// was stopped before the engine started it).
type Orphan struct {
	WorkflowID string
	InstanceID int64
	Status     string
}

// Orphans lists up to limit runs in flight whose first run has ended.
func Orphans(ctx context.Context, q Querier, limit int) ([]Orphan, error) {
	rows, err := q.Query(ctx, sqlOrphans, limit)
	if err != nil {
		return nil, fmt.Errorf("list ended runs in flight: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Orphan, error) {
		var o Orphan
		err := r.Scan(&o.WorkflowID, &o.InstanceID, &o.Status)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("list ended runs in flight: %w", err)
	}
	return out, nil
}

// Touch moves a due watermark to the back of the sweep's list (its run
// could not be started now).
func Touch(ctx context.Context, tx pgx.Tx, k Key) error {
	if _, err := tx.Exec(ctx, sqlTouch, k.WorkflowID, k.Table); err != nil {
		return fmt.Errorf("touch the watermark of %s %s: %w", k.WorkflowID, k.Table, err)
	}
	return nil
}

// ErrInvalid: a reset the watermark cannot take.
var ErrInvalid = errors.New("incremental: invalid watermark change")

// Reset moves the watermark of k to snapshotID (0: the table's
// beginning), whose commit time is that of the change that announced it,
// else commitTime (epoch ms; required then). The changes after it are due
// again: the sweep starts a run for them. It refuses while a run of the
// table is in flight (ErrInFlight) and returns the watermark as reset.
func Reset(ctx context.Context, db Beginner, k Key, snapshotID int64, commitTime *int64) (Watermark, error) {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var inflight *int64
		err := tx.QueryRow(ctx, sqlResetLock, k.WorkflowID, k.Table).Scan(&inflight)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s has no watermark for table %s", ErrNotFound, k.WorkflowID, k.Table)
		}
		if err != nil {
			return fmt.Errorf("lock the watermark of %s %s: %w", k.WorkflowID, k.Table, err)
		}
		if inflight != nil {
			return fmt.Errorf("%w: run %d covers %s; reset once it has ended", ErrInFlight, *inflight, k.Table)
		}
		var ct int64
		if snapshotID != 0 {
			err := tx.QueryRow(ctx, sqlChangeCommitTime, k.WorkflowID, k.Table, snapshotID).Scan(&ct)
			switch {
			case errors.Is(err, pgx.ErrNoRows) && commitTime == nil:
				return fmt.Errorf("%w: snapshot %d of %s was never announced: give its commit_time", ErrInvalid, snapshotID, k.Table)
			case errors.Is(err, pgx.ErrNoRows):
				ct = *commitTime
			case err != nil:
				return fmt.Errorf("read snapshot %d of %s: %w", snapshotID, k.Table, err)
			}
		}
		if _, err := tx.Exec(ctx, sqlReset, k.WorkflowID, k.Table, snapshotID, ct); err != nil {
			return fmt.Errorf("reset the watermark of %s %s: %w", k.WorkflowID, k.Table, err)
		}
		return nil
	})
	if err != nil {
		return Watermark{}, err
	}
	ws, err := List(ctx, db, k.WorkflowID)
	if err != nil {
		return Watermark{}, err
	}
	for _, w := range ws {
		if w.Table == k.Table {
			return w, nil
		}
	}
	return Watermark{}, fmt.Errorf("%w: %s %s", ErrNotFound, k.WorkflowID, k.Table)
}

// Beginner is a pool: what starts transactions and reads.
type Beginner interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Restarted gives the restart of an incremental run the range it covers
// back, inside the restart's transaction (which holds the workflow's
// lock): when the run's range ended without moving the watermark (FAILED,
// STOPPED, TIMED_OUT), still starts at the watermark, and no run of the
// table is in flight, the instance is in flight again and its range
// RUNNING, so the restarted run's success moves the watermark. It returns
// the range for the new run's initiator, or nil when the restart does not
// take it (it then re-processes without moving anything).
func Restarted(ctx context.Context, tx pgx.Tx, workflowID string, instanceID int64) (map[string]any, error) {
	var p Planned
	err := tx.QueryRow(ctx, sqlRestarted, workflowID, instanceID).Scan(&p.Table, &p.FromSnapshotID, &p.ToSnapshotID,
		&p.FromCommitTime, &p.ToCommitTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("give run %d of %s its range again: %w", instanceID, workflowID, err)
	}
	p.WorkflowID = workflowID
	return Initiator(p), nil
}
