package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/instance"
)

// runKey names a run.
type runKey struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
}

// batch archives and deletes one batch; it returns how many candidates
// it found and how many of them it tried (those not skipped earlier in the
// pass). A run skipped because someone held it is added to skipped and not
// tried again in this pass.
func (a *Archiver) batch(ctx context.Context, now time.Time, retention int64, earliest time.Time, res *Result,
	skipped map[runKey]bool) (found, tried int, err error) {
	all, err := a.candidates(ctx, now, retention, earliest)
	if err != nil || len(all) == 0 {
		return 0, 0, err
	}
	keys := make([]runKey, 0, len(all))
	for _, k := range all {
		if !skipped[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return len(all), 0, nil
	}
	tried, err = a.archiveBatch(ctx, now, retention, keys, res, skipped)
	return len(all), tried, err
}

// archiveBatch writes keys' runs to the archive and deletes them; it
// returns how many runs it tried.
func (a *Archiver) archiveBatch(ctx context.Context, now time.Time, retention int64, keys []runKey, res *Result,
	skipped map[runKey]bool) (int, error) {
	records, err := a.load(ctx, keys)
	if err != nil {
		return 0, err
	}
	// One object per root workflow and end date (UTC) of the batch.
	type part struct {
		key     string
		records []*Record
	}
	parts := map[string]*part{}
	objectOf := make(map[runKey]string, len(records))
	batchID := uuid.NewString()
	archivedAt := now.UTC()
	for _, k := range keys {
		r := records[k]
		if r == nil {
			continue // gone since the candidates were read
		}
		r.ArchivedAt = archivedAt
		ended, err := r.EndTime()
		if err != nil {
			return 0, err
		}
		key := archive.Key(instance.RootWorkflowID(k.WorkflowID), ended, batchID)
		p := parts[key]
		if p == nil {
			p = &part{key: key}
			parts[key] = p
		}
		p.records = append(p.records, r)
		objectOf[k] = key
	}
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := archive.Encode(parts[name].records)
		if err != nil {
			return 0, fmt.Errorf("retention: encode the runs of %s: %w", name, err)
		}
		if err := a.store.Put(ctx, name, body); err != nil {
			return 0, fmt.Errorf("retention: write the archive: %w", err)
		}
		res.Objects++
		res.Bytes += int64(len(body))
	}
	deleted, steps, err := a.delete(ctx, now, retention, keys, objectOf, records)
	if err != nil {
		return 0, err
	}
	res.Batches++
	res.Runs += int64(len(deleted))
	res.Steps += steps
	for k := range objectOf {
		if !deleted[k] {
			skipped[k] = true
			res.Skipped++
		}
	}
	return len(keys), nil
}

// candidates reads the next batch's runs, oldest first.
func (a *Archiver) candidates(ctx context.Context, now time.Time, retention int64, earliest time.Time) ([]runKey, error) {
	rows, err := a.db.Query(ctx, sqlCandidates, now, retention, earliest, a.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("retention: read archivable runs: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (runKey, error) {
		var k runKey
		err := r.Scan(&k.WorkflowID, &k.InstanceID, &k.RunID)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("retention: read archivable runs: %w", err)
	}
	return keys, nil
}

// arrays are the batch as parallel arrays (batchRuns).
func arrays(keys []runKey) ([]string, []int64, []int64) {
	w, i, r := make([]string, len(keys)), make([]int64, len(keys)), make([]int64, len(keys))
	for n, k := range keys {
		w[n], i[n], r[n] = k.WorkflowID, k.InstanceID, k.RunID
	}
	return w, i, r
}

// load reads the batch's records in one repeatable-read snapshot, so a
// run and its rows agree.
func (a *Archiver) load(ctx context.Context, keys []runKey) (map[runKey]*Record, error) {
	w, i, r := arrays(keys)
	out := make(map[runKey]*Record, len(keys))
	err := pgx.BeginTxFunc(ctx, a.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := eachRow(ctx, tx, sqlRunRows, w, i, r, func(k runKey, row json.RawMessage) {
			out[k] = &Record{Format: FormatV1, WorkflowID: k.WorkflowID, InstanceID: k.InstanceID, RunID: k.RunID, Run: row}
		}); err != nil {
			return fmt.Errorf("retention: read runs: %w", err)
		}
		parts := []struct {
			what string
			sql  string
			add  func(*Record, json.RawMessage)
		}{
			{"steps", sqlStepRows, func(rec *Record, row json.RawMessage) { rec.Steps = append(rec.Steps, row) }},
			{"output data", sqlOutputRows, func(rec *Record, row json.RawMessage) { rec.OutputData = append(rec.OutputData, row) }},
			{"completions", sqlCompletionRows, func(rec *Record, row json.RawMessage) { rec.Completions = append(rec.Completions, row) }},
			{"signal waits", sqlWaitRows, func(rec *Record, row json.RawMessage) { rec.SignalWaits = append(rec.SignalWaits, row) }},
			{"paused steps", sqlPausedRows, func(rec *Record, row json.RawMessage) { rec.Paused = append(rec.Paused, row) }},
			{"lineage", sqlLineageRows, func(rec *Record, row json.RawMessage) { rec.Lineage = append(rec.Lineage, row) }},
			{"signals", sqlSignalRows, func(rec *Record, row json.RawMessage) { rec.Signals = append(rec.Signals, row) }},
		}
		for _, p := range parts {
			if err := eachRow(ctx, tx, p.sql, w, i, r, func(k runKey, row json.RawMessage) {
				if rec := out[k]; rec != nil {
					p.add(rec, row)
				}
			}); err != nil {
				return fmt.Errorf("retention: read %s: %w", p.what, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow runs a record query over the batch and calls fn with each row.
func eachRow(ctx context.Context, tx pgx.Tx, sql string, w []string, i, r []int64, fn func(runKey, json.RawMessage)) error {
	rows, err := tx.Query(ctx, sql, w, i, r)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k runKey
		var row []byte
		if err := rows.Scan(&k.WorkflowID, &k.InstanceID, &k.RunID, &row); err != nil {
			return err
		}
		fn(k, json.RawMessage(row))
	}
	return rows.Err()
}

// delete removes the archived runs in one short transaction; it returns
// the runs it deleted and how many step attempts went with them.
func (a *Archiver) delete(ctx context.Context, now time.Time, retention int64, keys []runKey,
	objectOf map[runKey]string, records map[runKey]*Record) (deleted map[runKey]bool, steps int64, err error) {
	var w []string
	var i, r []int64
	var objects []string
	var counts []int32
	for _, k := range keys {
		obj, ok := objectOf[k]
		if !ok {
			continue
		}
		w, i, r = append(w, k.WorkflowID), append(i, k.InstanceID), append(r, k.RunID)
		objects = append(objects, obj)
		counts = append(counts, int32(len(records[k].Steps)))
	}
	if len(w) == 0 {
		return nil, 0, nil
	}
	var dw []string
	var di, dr []int64
	err = pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockTimeout, fmt.Sprintf("%dms", a.cfg.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		return tx.QueryRow(ctx, sqlDeleteBatch, w, i, r, objects, counts, now, retention).Scan(&steps, &dw, &di, &dr)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("retention: delete %d archived runs: %w", len(w), err)
	}
	deleted = make(map[runKey]bool, len(dw))
	for n := range dw {
		deleted[runKey{dw[n], di[n], dr[n]}] = true
	}
	return deleted, steps, nil
}
