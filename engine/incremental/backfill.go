package incremental

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backfills over an incremental workflow (docs/incremental.md, "Backfill"):
// they walk ranges of the snapshots the watermark received instead of
// dates. The rule that keeps their ranges apart from the live runs' is
// that a backfill covers only snapshots at or below the watermark — what
// live runs already processed, or, with ResetWatermark, what the backfill
// takes over: its creation moves the watermark to the backfill's end, so
// live runs go on after it.

// Span is the part of the table a backfill covers: from a snapshot
// (exclusive) to a snapshot (inclusive), or the changes committed from
// one UTC day to another (both included), in runs of PerRun snapshots.
type Span struct {
	FromSnapshotID, ToSnapshotID *int64
	// FromDate and ToDate, when set (instead of the snapshot ids), are UTC
	// days.
	FromDate, ToDate time.Time
	// PerRun is how many snapshots one run covers; 0: one run for all.
	PerRun int
	// ResetWatermark moves the watermark to the span's end, handing the
	// snapshots up to it to the backfill.
	ResetWatermark bool
}

// BackfillRanges resolves s against the changes received for k, inside tx
// (the transaction that creates the backfill), checks the rule above and
// applies the reset, and returns the ranges of the backfill's runs in
// commit order. max bounds how many ranges may result.
func BackfillRanges(ctx context.Context, tx pgx.Tx, k Key, s Span, max int) ([]Planned, error) {
	var (
		wmSnap, wmTime int64
		inflight       *int64
	)
	err := tx.QueryRow(ctx, sqlBackfillLock, k.WorkflowID, k.Table).Scan(&wmSnap, &wmTime, &inflight)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s received no change of table %s", ErrInvalid, k.WorkflowID, k.Table)
	}
	if err != nil {
		return nil, fmt.Errorf("lock the watermark of %s %s: %w", k.WorkflowID, k.Table, err)
	}
	from, fromTime, err := resolveEnd(ctx, tx, k, s.FromSnapshotID, s.FromDate, true)
	if err != nil {
		return nil, err
	}
	to, toTime, err := resolveEnd(ctx, tx, k, s.ToSnapshotID, s.ToDate, false)
	if err != nil {
		return nil, err
	}
	if !after(toTime, to, fromTime, from) {
		return nil, fmt.Errorf("%w: the range (%d, %d] of %s holds no snapshot", ErrInvalid, from, to, k.Table)
	}
	if !s.ResetWatermark && after(toTime, to, wmTime, wmSnap) {
		return nil, fmt.Errorf("%w: the range ends at snapshot %d, after the watermark of %s (snapshot %d): a backfill replays "+
			"snapshots live runs processed; give reset_watermark to hand it the snapshots up to its end", ErrInvalid, to, k.Table, wmSnap)
	}
	rows, err := tx.Query(ctx, sqlBackfillChanges, k.WorkflowID, k.Table, fromTime, from, toTime, to)
	if err != nil {
		return nil, fmt.Errorf("read the changes of %s in (%d, %d]: %w", k.Table, from, to, err)
	}
	type ch struct {
		snap, ct int64
		op       string
	}
	changes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ch, error) {
		var c ch
		err := r.Scan(&c.snap, &c.ct, &c.op)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the changes of %s in (%d, %d]: %w", k.Table, from, to, err)
	}
	per := s.PerRun
	if per <= 0 {
		per = len(changes)
	}
	var out []Planned
	p := Planned{Key: k, FromSnapshotID: from, FromCommitTime: fromTime}
	for i, c := range changes {
		p.ToSnapshotID, p.ToCommitTime = c.snap, c.ct
		p.SnapshotCount++
		p.HasOverwrite = p.HasOverwrite || c.op == "overwrite"
		p.HasDelete = p.HasDelete || c.op == "delete"
		if p.SnapshotCount == int64(per) || i == len(changes)-1 {
			out = append(out, p)
			if len(out) > max {
				return nil, fmt.Errorf("%w: more than %d runs; give a larger snapshots_per_run", ErrInvalid, max)
			}
			p = Planned{Key: k, FromSnapshotID: c.snap, FromCommitTime: c.ct}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no change of %s was received in (%d, %d]", ErrInvalid, k.Table, from, to)
	}
	if s.ResetWatermark {
		if inflight != nil {
			return nil, fmt.Errorf("%w: run %d covers %s; start the backfill once it has ended", ErrInFlight, *inflight, k.Table)
		}
		if _, err := tx.Exec(ctx, sqlReset, k.WorkflowID, k.Table, to, toTime); err != nil {
			return nil, fmt.Errorf("reset the watermark of %s %s: %w", k.WorkflowID, k.Table, err)
		}
	}
	return out, nil
}

// after reports whether (t1, s1) comes after (t2, s2) in commit order.
func after(t1, s1, t2, s2 int64) bool { return t1 > t2 || (t1 == t2 && s1 > s2) }

// resolveEnd is a span end as (snapshot, commit time): a snapshot a change
// announced (or 0, the table's beginning, for a start), or the last change
// committed before a UTC day (a start: the day; an end: the next day).
func resolveEnd(ctx context.Context, tx pgx.Tx, k Key, snap *int64, day time.Time, start bool) (int64, int64, error) {
	switch {
	case snap != nil && *snap == 0 && start:
		return 0, 0, nil
	case snap != nil:
		var ct int64
		err := tx.QueryRow(ctx, sqlChangeCommitTime, k.WorkflowID, k.Table, *snap).Scan(&ct)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, fmt.Errorf("%w: snapshot %d of %s was never announced", ErrInvalid, *snap, k.Table)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read snapshot %d of %s: %w", *snap, k.Table, err)
		}
		return *snap, ct, nil
	case !day.IsZero():
		if !start {
			day = day.AddDate(0, 0, 1)
		}
		var s, ct int64
		err := tx.QueryRow(ctx, sqlLastBefore, k.WorkflowID, k.Table, day.UnixMilli()).Scan(&s, &ct)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, nil // nothing before the day: the table's beginning
		}
		if err != nil {
			return 0, 0, fmt.Errorf("map %s to a snapshot of %s: %w", day.Format(time.DateOnly), k.Table, err)
		}
		return s, ct, nil
	}
	end := "to"
	if start {
		end = "from"
	}
	return 0, 0, fmt.Errorf("%w: give the %s snapshot id or date of the backfill", ErrInvalid, end)
}

// RangeValue is a backfill partition's value for the range (from, to].
func RangeValue(from, to int64) string {
	return strconv.FormatInt(from, 10) + ".." + strconv.FormatInt(to, 10)
}

// ParseRangeValue reads RangeValue.
func ParseRangeValue(v string) (from, to int64, err error) {
	a, b, ok := strings.Cut(v, "..")
	if ok {
		if from, err = strconv.ParseInt(a, 10, 64); err == nil {
			to, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%w: %q is not a snapshot range", ErrInvalid, v)
	}
	return from, to, nil
}

// RangeAt is the range (from, to] of k as a backfill's run starts it,
// inside tx: its commit times and what its changes say of it.
func RangeAt(ctx context.Context, tx pgx.Tx, k Key, from, to int64) (Planned, error) {
	p := Planned{Key: k, FromSnapshotID: from, ToSnapshotID: to}
	if from != 0 {
		if err := tx.QueryRow(ctx, sqlChangeCommitTime, k.WorkflowID, k.Table, from).Scan(&p.FromCommitTime); err != nil {
			return Planned{}, fmt.Errorf("read snapshot %d of %s: %w", from, k.Table, err)
		}
	}
	if err := tx.QueryRow(ctx, sqlChangeCommitTime, k.WorkflowID, k.Table, to).Scan(&p.ToCommitTime); err != nil {
		return Planned{}, fmt.Errorf("read snapshot %d of %s: %w", to, k.Table, err)
	}
	if err := tx.QueryRow(ctx, sqlRangeStats, k.WorkflowID, k.Table, p.FromCommitTime, from, p.ToCommitTime, to).
		Scan(&p.SnapshotCount, &p.HasOverwrite, &p.HasDelete, &p.ToSignalSeq); err != nil {
		return Planned{}, fmt.Errorf("count the changes of %s in (%d, %d]: %w", k.Table, from, to, err)
	}
	return p, nil
}

// StartedBackfill records the range a backfill's run covers. The run is
// not the watermark's run in flight: its end moves nothing.
func StartedBackfill(ctx context.Context, tx pgx.Tx, p Planned, instanceID int64, backfillID string) error {
	if _, err := tx.Exec(ctx, sqlStartedBackfill, p.WorkflowID, instanceID, p.Table, p.FromSnapshotID, p.ToSnapshotID,
		p.FromCommitTime, p.ToCommitTime, p.SnapshotCount, p.HasOverwrite, p.HasDelete, backfillID); err != nil {
		return fmt.Errorf("record the range of backfill run %d of %s: %w", instanceID, p.WorkflowID, err)
	}
	return nil
}
