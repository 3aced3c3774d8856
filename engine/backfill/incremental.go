package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/incremental"
)

// FormatSnapshotRange is the format of an incremental backfill's
// partition values: "<from>..<to>", a range of table snapshots
// (incremental.RangeValue).
const FormatSnapshotRange = "SNAPSHOT_RANGE"

// IncrementalSpec makes a backfill walk ranges of an incremental
// workflow's table instead of partition values (docs/incremental.md,
// "Backfill"): from a snapshot (exclusive; 0 the table's beginning) to a
// snapshot (inclusive), or the changes committed from one UTC day to
// another, in runs of SnapshotsPerRun snapshots (0: one run). Without
// ResetWatermark it replays only what live runs processed (it must end at
// or before the watermark); with it, its creation moves the watermark to
// its end, so live runs go on after the backfill's snapshots.
type IncrementalSpec struct {
	Table           string `json:"table"`
	FromSnapshotID  *int64 `json:"from_snapshot_id,omitempty"`
	ToSnapshotID    *int64 `json:"to_snapshot_id,omitempty"`
	FromDate        string `json:"from_date,omitempty"`
	ToDate          string `json:"to_date,omitempty"`
	SnapshotsPerRun int    `json:"snapshots_per_run,omitempty"`
	ResetWatermark  bool   `json:"reset_watermark,omitempty"`
}

// span checks the spec and reads it as an incremental.Span.
func (s *IncrementalSpec) span() (incremental.Span, error) {
	out := incremental.Span{FromSnapshotID: s.FromSnapshotID, ToSnapshotID: s.ToSnapshotID, PerRun: s.SnapshotsPerRun,
		ResetWatermark: s.ResetWatermark}
	switch {
	case s.Table == "":
		return out, invalid("incremental.table is required")
	case s.SnapshotsPerRun < 0:
		return out, invalid("incremental.snapshots_per_run must not be negative")
	case (s.FromSnapshotID != nil) == (s.FromDate != ""):
		return out, invalid("give incremental.from_snapshot_id or incremental.from_date")
	case (s.ToSnapshotID != nil) == (s.ToDate != ""):
		return out, invalid("give incremental.to_snapshot_id or incremental.to_date")
	case s.FromSnapshotID != nil && *s.FromSnapshotID < 0, s.ToSnapshotID != nil && *s.ToSnapshotID <= 0:
		return out, invalid("incremental snapshot ids must be positive (from may be 0: the table's beginning)")
	}
	var err error
	if out.FromDate, err = day(s.FromDate, "from_date"); err != nil {
		return out, err
	}
	if out.ToDate, err = day(s.ToDate, "to_date"); err != nil {
		return out, err
	}
	return out, nil
}

func day(v, field string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"20060102", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, invalid("incremental.%s must be a day, YYYYMMDD or YYYY-MM-DD, not %q", field, v)
}

// createIncremental stores a backfill over snapshot ranges: the ranges are
// computed, checked against the watermark (and the watermark reset when
// asked) in the transaction that stores the backfill.
func (s *Store) createIncremental(ctx context.Context, req CreateRequest) (b *Backfill, duplicate bool, err error) {
	inc := req.Spec.Incremental
	if req.Param != "" || req.Spec.From != "" || req.Spec.To != "" || req.Spec.Interval != "" || len(req.Spec.Values) > 0 || req.Rerun {
		return nil, false, invalid("an incremental backfill takes its range in incremental (no param, from, to, interval, values or rerun)")
	}
	span, err := inc.span()
	if err != nil {
		return nil, false, err
	}
	v, err := s.defs.Get(ctx, req.WorkflowID, req.Version)
	if err != nil {
		return nil, false, fmt.Errorf("backfill of workflow %s: %w", req.WorkflowID, err)
	}
	spec := Spec{Format: FormatSnapshotRange, Order: OrderOldest, Incremental: inc}
	rawSpec, err := json.Marshal(spec)
	if err != nil {
		return nil, false, fmt.Errorf("encode backfill spec: %w", err)
	}
	id := uuid.NewString()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		ranges, err := incremental.BackfillRanges(ctx, tx, incremental.Key{WorkflowID: v.WorkflowID, Table: inc.Table}, span, MaxPartitions)
		if err != nil {
			return err
		}
		values := make([]string, len(ranges))
		for i, r := range ranges {
			values[i] = incremental.RangeValue(r.FromSnapshotID, r.ToSnapshotID)
		}
		tag, err := tx.Exec(ctx, sqlInsert, id, v.WorkflowID, v.Version, "", "", FormatSnapshotRange, rawSpec,
			req.Concurrency, req.Downstream, false, req.RequestID, req.Caller, len(values))
		if err != nil {
			return fmt.Errorf("insert backfill of %s: %w", v.WorkflowID, err)
		}
		if tag.RowsAffected() == 0 {
			duplicate = true
			return errDuplicate // roll back the reset the ranges made
		}
		if _, err := tx.Exec(ctx, sqlInsertPartitions, id, values); err != nil {
			return fmt.Errorf("insert %d partitions of backfill %s: %w", len(values), id, err)
		}
		if b, err = scanBackfill(tx.QueryRow(ctx, sqlGet, id)); err != nil {
			return err
		}
		return writeEvent(ctx, tx, b, "", req.Caller)
	})
	if duplicate {
		b, err = s.byRequest(ctx, req.WorkflowID, req.RequestID)
		return b, true, err
	}
	if err != nil {
		return nil, false, err
	}
	return b, false, nil
}

// topUpIncremental starts pending ranges until Concurrency are in flight;
// each run gets its range's params and records the range it covers.
func (s *Store) topUpIncremental(ctx context.Context, tx pgx.Tx, b *Backfill, room int, ps []pending, st *DriveStats) ([]execution.BatchResult, error) {
	key := incremental.Key{WorkflowID: b.WorkflowID, Table: b.Spec.Incremental.Table}
	var (
		link      linkRows
		starts    []execution.BatchStart
		startSeqs []int
		plans     []incremental.Planned
	)
	for _, p := range ps {
		if len(starts) == room {
			break
		}
		from, to, err := incremental.ParseRangeValue(p.value)
		var plan incremental.Planned
		if err == nil {
			plan, err = incremental.RangeAt(ctx, tx, key, from, to)
		}
		if err != nil {
			link.add(p.seq, StateFailed, nil)
			continue
		}
		starts = append(starts, execution.BatchStart{WorkflowID: b.WorkflowID, Version: b.Version,
			RequestID: RequestID(b.ID, p.seq, p.attempt),
			Initiator: map[string]any{"type": Initiator, "backfill_id": b.ID, "incremental": incremental.Initiator(plan)},
			RunParams: incremental.RunParams(plan, nil)})
		startSeqs = append(startSeqs, p.seq)
		plans = append(plans, plan)
	}
	results, err := s.runs.StartBatchTx(ctx, tx, starts)
	if err != nil {
		return nil, fmt.Errorf("start %d ranges: %w", len(starts), err)
	}
	err = s.linkStarted(ctx, tx, b.ID, &link, startSeqs, results, st, func(i int, iid int64) error {
		return incremental.StartedBackfill(ctx, tx, plans[i], iid, b.ID)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}
