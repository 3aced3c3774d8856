package backfill

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// DriveStats is what one driver pass did.
type DriveStats struct {
	// Backfills is how many live backfills the pass worked on (those
	// another process held were passed over).
	Backfills int
	Started   int
	Skipped   int
	// Ended is how many backfills reached SUCCEEDED or FAILED.
	Ended int
}

// RequestID is the request id of the run of a partition's attempt: a
// start repeated after a crash is a duplicate of the first.
func RequestID(backfillID string, seq, attempt int) string {
	return "backfill:" + backfillID + ":" + strconv.Itoa(seq) + ":" + strconv.Itoa(attempt)
}

// Drive is one pass of the driver over every live backfill, each in a
// transaction of its own that holds its row (FOR UPDATE SKIP LOCKED: two
// engines never drive one backfill at once). For a backfill it
//
//   - moves partitions whose run ended to the run's outcome,
//   - when RUNNING and no run of the workflow that a trigger or a person
//     started is waiting for admission (the backfill yields to them),
//     starts pending partitions until Concurrency are in flight: a value
//     a SUCCEEDED run of the version had is SKIPPED unless Rerun; the
//     others are started through execution's batch path (run.Create) with
//     a BACKFILL initiator and a request id per partition attempt, and
//     linked to their runs in the same transaction,
//   - ends it SUCCEEDED, or FAILED when a partition (or, with
//     downstream, a downstream run) failed or stopped, once no partition
//     is pending or in flight (and, with downstream, no downstream run is
//     live and no output signal of its runs waits to be matched).
func (s *Store) Drive(ctx context.Context) (DriveStats, error) {
	var st DriveStats
	rows, err := s.db.Query(ctx, sqlLive)
	if err != nil {
		return st, fmt.Errorf("list live backfills: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return st, fmt.Errorf("list live backfills: %w", err)
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		var results []execution.BatchResult
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			var err error
			results, err = s.driveOne(ctx, tx, id, &st)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("drive backfill %s: %w", id, err)
		}
		s.runs.AfterBatch(ctx, results)
	}
	return st, nil
}

// pendingScan is how many pending partitions one pass reads at most, to
// find those to start among skipped ones.
const pendingScan = 1000

func (s *Store) driveOne(ctx context.Context, tx pgx.Tx, id string, st *DriveStats) ([]execution.BatchResult, error) {
	b, err := scanBackfill(tx.QueryRow(ctx, sqlClaim, id))
	if errors.Is(err, ErrNotFound) {
		return nil, nil // ended meanwhile, or another engine drives it now
	}
	if err != nil {
		return nil, err
	}
	st.Backfills++
	if _, err := tx.Exec(ctx, sqlSync, b.ID, b.WorkflowID); err != nil {
		return nil, fmt.Errorf("mark ended partitions: %w", err)
	}
	if b.Status != Running {
		return nil, nil
	}
	results, err := s.topUp(ctx, tx, b, st)
	if err != nil {
		return nil, err
	}
	var open, bad int
	if err := tx.QueryRow(ctx, sqlRemaining, b.ID, b.WorkflowID, b.Downstream).Scan(&open, &bad); err != nil {
		return nil, fmt.Errorf("count open partitions: %w", err)
	}
	if open == 0 {
		to := Succeeded
		if bad > 0 {
			to = Failed
		}
		if _, err := tx.Exec(ctx, sqlSetStatus, b.ID, string(to)); err != nil {
			return nil, fmt.Errorf("end backfill %s: %w", to, err)
		}
		old := b.Status
		b.Status = to
		if err := writeEvent(ctx, tx, b, old, ""); err != nil {
			return nil, err
		}
		st.Ended++
	}
	return results, nil
}

type pending struct {
	seq     int
	value   string
	attempt int
}

// topUp starts pending partitions until Concurrency are in flight.
func (s *Store) topUp(ctx context.Context, tx pgx.Tx, b *Backfill, st *DriveStats) ([]execution.BatchResult, error) {
	var yield bool
	if err := tx.QueryRow(ctx, sqlYield, b.WorkflowID).Scan(&yield); err != nil {
		return nil, fmt.Errorf("look for waiting trigger runs: %w", err)
	}
	if yield {
		return nil, nil
	}
	var inFlight int
	if err := tx.QueryRow(ctx, sqlInFlight, b.ID).Scan(&inFlight); err != nil {
		return nil, fmt.Errorf("count runs in flight: %w", err)
	}
	room := b.Concurrency - inFlight
	if room <= 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, sqlPending, b.ID, pendingScan)
	if err != nil {
		return nil, fmt.Errorf("read pending partitions: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pending, error) {
		var p pending
		err := r.Scan(&p.seq, &p.value, &p.attempt)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read pending partitions: %w", err)
	}
	if b.Spec.Incremental != nil {
		return s.topUpIncremental(ctx, tx, b, room, ps, st)
	}
	done := map[string]int64{}
	if !b.Rerun && len(ps) > 0 {
		values := make([]string, len(ps))
		for i, p := range ps {
			values[i] = p.value
		}
		rows, err := tx.Query(ctx, sqlSucceeded, b.WorkflowID, b.Version, values, b.Param)
		if err != nil {
			return nil, fmt.Errorf("look for succeeded runs: %w", err)
		}
		for rows.Next() {
			var v string
			var iid int64
			if err := rows.Scan(&v, &iid); err != nil {
				rows.Close()
				return nil, fmt.Errorf("look for succeeded runs: %w", err)
			}
			done[v] = iid
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("look for succeeded runs: %w", err)
		}
	}
	var link linkRows
	var starts []execution.BatchStart
	var startSeqs []int
	initiator := map[string]any{"type": Initiator, "backfill_id": b.ID}
	for _, p := range ps {
		if iid, ok := done[p.value]; ok {
			link.add(p.seq, StateSkipped, &iid)
			st.Skipped++
			continue
		}
		if len(starts) == room {
			break
		}
		value, err := ParamValue(b.ParamType, p.value)
		if err != nil {
			link.add(p.seq, StateFailed, nil)
			continue
		}
		starts = append(starts, execution.BatchStart{WorkflowID: b.WorkflowID, Version: b.Version,
			RequestID: RequestID(b.ID, p.seq, p.attempt), Initiator: initiator,
			RunParams: workflow.Params{b.Param: value}})
		startSeqs = append(startSeqs, p.seq)
	}
	results, err := s.runs.StartBatchTx(ctx, tx, starts)
	if err != nil {
		return nil, fmt.Errorf("start %d partitions: %w", len(starts), err)
	}
	if err := s.linkStarted(ctx, tx, b.ID, &link, startSeqs, results, st, nil); err != nil {
		return nil, err
	}
	return results, nil
}

// linkStarted links each partition started in this round, and those that
// failed before, to its run (sqlLink); started, when set, runs in the
// transaction for each run that was started.
func (s *Store) linkStarted(ctx context.Context, tx pgx.Tx, backfillID string, link *linkRows, startSeqs []int,
	results []execution.BatchResult, st *DriveStats, started func(i int, iid int64) error) error {
	for i, r := range results {
		iid := r.InstanceID
		switch {
		case r.Err != nil:
			// The version is gone or refuses the value: the partition
			// fails; retry starts it again.
			link.add(startSeqs[i], StateFailed, nil)
		case r.Status == instance.WorkflowStopped:
			link.add(startSeqs[i], StateStopped, &iid) // dropped by the run strategy
		default:
			if started != nil {
				if err := started(i, iid); err != nil {
					return err
				}
			}
			link.add(startSeqs[i], StateRunning, &iid)
			st.Started++
		}
	}
	if len(link.seqs) > 0 {
		if _, err := tx.Exec(ctx, sqlLink, backfillID, link.seqs, link.states, link.iids); err != nil {
			return fmt.Errorf("link %d partitions to their runs: %w", len(link.seqs), err)
		}
	}
	if len(results) > 0 && s.testPause != nil {
		s.testPause()
	}
	return nil
}

// linkRows are the columns of sqlLink's arrays.
type linkRows struct {
	seqs   []int32
	states []string
	iids   []*int64
}

func (l *linkRows) add(seq int, state string, iid *int64) {
	l.seqs, l.states, l.iids = append(l.seqs, int32(seq)), append(l.states, state), append(l.iids, iid)
}
