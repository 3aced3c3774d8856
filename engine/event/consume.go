package event

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockReaderSQL takes a reader's cursor for the rest of the transaction
// (another process holding it is skipped) and reads where it is and the
// oldest transaction still running, below which events may be read.
const lockReaderSQL = `
SELECT tx, event_id, pg_snapshot_xmin(pg_current_snapshot()) FROM maestro_event_cursor
WHERE name = $1 FOR UPDATE SKIP LOCKED`

// readBelowSQL is readSQL with the horizon given ($4), without the
// payloads (Payloads reads those a consumer wants).
const readBelowSQL = `
SELECT tx, event_id, kind, workflow_id, created_at, COALESCE(seq, 0), NULL::json FROM maestro_event
WHERE (tx, event_id) > ($1::xid8, $2::bigint) AND tx < $4::xid8
ORDER BY tx, event_id LIMIT $3`

// payloadsSQL reads the payloads of events by position.
const payloadsSQL = `
SELECT e.tx, e.event_id, e.payload FROM maestro_event e
JOIN unnest($1::xid8[], $2::bigint[]) AS p(tx, event_id) ON e.tx = p.tx AND e.event_id = p.event_id`

// Payloads fills in the payloads of the given events (Consume hands events
// to its handler without them: a consumer usually wants few).
func Payloads(ctx context.Context, tx pgx.Tx, evs []*Event) error {
	if len(evs) == 0 {
		return nil
	}
	txs := make([]uint64, len(evs))
	ids := make([]int64, len(evs))
	byPos := make(map[Position]*Event, len(evs))
	for i, e := range evs {
		txs[i], ids[i] = e.TX, e.ID
		byPos[e.Position] = e
	}
	rows, err := tx.Query(ctx, payloadsSQL, txs, ids)
	if err != nil {
		return fmt.Errorf("read event payloads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p Position
		var payload []byte
		if err := rows.Scan(&p.TX, &p.ID, &payload); err != nil {
			return fmt.Errorf("read event payloads: %w", err)
		}
		if e := byPos[p]; e != nil {
			e.Payload = payload
		}
	}
	return rows.Err()
}

// consumeTxOptions commit a consumer's batch without waiting for the WAL
// flush: a batch lost in a crash, its cursor move with it, is handled
// again. A handler that writes what must not be handled twice calls
// Durable.
var consumeTxOptions = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}

// Durable makes a Consume transaction commit synchronously: its writes are
// seen by others as soon as it commits (a forwarder may publish them at
// once), so a crash must not lose them after that.
func Durable(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
		return fmt.Errorf("make the transaction durable: %w", err)
	}
	return nil
}

// EnsureReader creates a reader's cursor at the start of the outbox unless
// it exists.
func EnsureReader(ctx context.Context, db *pgxpool.Pool, name string) error {
	if _, err := db.Exec(ctx, ensureCursorSQL, name); err != nil {
		return fmt.Errorf("create event cursor %s: %w", name, err)
	}
	return nil
}

// Consume hands the next events after a reader's cursor (EnsureReader),
// without their payloads (see Payloads), to handle, in one transaction with the cursor's move past them: what handle
// writes in tx commits exactly once per event, whatever crashes. It returns
// how many events were handled: 0 when none were due, or when another
// process holds the reader.
func Consume(ctx context.Context, db *pgxpool.Pool, name string, limit int,
	handle func(ctx context.Context, tx pgx.Tx, evs []Event) error) (int, error) {
	n := 0
	err := pgx.BeginTxFunc(ctx, db, consumeTxOptions, func(tx pgx.Tx) error {
		var pos Position
		var horizon uint64
		err := tx.QueryRow(ctx, lockReaderSQL, name).Scan(&pos.TX, &pos.ID, &horizon)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock event cursor %s: %w", name, err)
		}
		rows, err := tx.Query(ctx, readBelowSQL, pos.TX, pos.ID, limit, horizon)
		if err != nil {
			return fmt.Errorf("read events after %s: %w", pos, err)
		}
		evs, err := pgx.CollectRows(rows, scanEvent)
		if err != nil {
			return fmt.Errorf("read events after %s: %w", pos, err)
		}
		if len(evs) == 0 {
			return nil
		}
		if err := handle(ctx, tx, evs); err != nil {
			return err
		}
		n = len(evs)
		return moveCursor(ctx, tx, name, evs[len(evs)-1].Position)
	})
	return n, err
}
