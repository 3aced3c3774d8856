package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The outbox's SQL, named and kept together. The table is
// migrations/00030_events.sql.

// InsertSQL is the head of an insert of event rows. A writer that records
// an event in the statement that makes its change (engine/flow: a
// data-modifying CTE) builds on it, so that the columns are named here.
const InsertSQL = `INSERT INTO maestro_event (kind, workflow_id, seq, payload)`

const insertBatchSQL = InsertSQL + `
SELECT k, w, NULLIF(s, 0), p FROM unnest($1::smallint[], $2::text[], $3::bigint[], $4::json[]) AS e(k, w, s, p)`

// eventColumns are what a read of events returns (scanEvent).
const eventColumns = `tx, event_id, kind, workflow_id, created_at, COALESCE(seq, 0), payload`

// readSQL reads the events after a position, below the oldest transaction
// still running: a transaction that commits later has a larger id than any
// row read here, so it can never add a row behind the reader.
// Each event comes with its run's trace_context (docs/tracing.md): the
// row the run was created with holds it, so the writers of events, in the
// engine's hot path, need not carry it.
const readSQL = `
SELECT e.tx, e.event_id, e.kind, e.workflow_id, e.created_at, COALESCE(e.seq, 0), e.payload, COALESCE(i.trace_context, '')
FROM maestro_event e
LEFT JOIN workflow_instance i ON i.workflow_id = e.workflow_id
    AND i.instance_id = COALESCE(e.payload->>'i', e.payload->>'workflow_instance_id')::bigint
    AND i.run_id = COALESCE(e.payload->>'r', e.payload->>'workflow_run_id')::bigint
WHERE (e.tx, e.event_id) > ($1::xid8, $2::bigint) AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY e.tx, e.event_id LIMIT $3`

// readFilteredSQL reads up to $4 events matching the filters among the
// next $3 after a position, then the last of those $3 with how many there
// were (scanned > 0), so that a selective filter costs a bounded scan.
// $5: kinds (NULL: all); $6: a workflow id, matching its inline runs too;
// $7: an instance id; $8: written at or after (NULL: any time).
const readFilteredSQL = `
WITH scanned AS MATERIALIZED (
    SELECT tx, event_id, kind, workflow_id, created_at, seq, payload FROM maestro_event
    WHERE (tx, event_id) > ($1::xid8, $2::bigint) AND tx < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY tx, event_id LIMIT $3)
(SELECT tx, event_id, kind, workflow_id, created_at, COALESCE(seq, 0), payload, 0::bigint AS scanned FROM scanned
 WHERE ($5::smallint[] IS NULL OR kind = ANY ($5::smallint[]))
   AND ($6::text IS NULL OR workflow_id = $6::text OR (workflow_id > $6::text || ':' AND workflow_id < $6::text || ';'))
   AND ($7::bigint IS NULL OR COALESCE(payload->>'i', payload->>'workflow_instance_id')::bigint = $7::bigint)
   AND ($8::timestamptz IS NULL OR created_at >= $8::timestamptz)
 ORDER BY tx, event_id LIMIT $4)
UNION ALL
(SELECT tx, event_id, 0, '', now(), 0, NULL, (SELECT count(*) FROM scanned) FROM scanned
 ORDER BY tx DESC, event_id DESC LIMIT 1)`

// endSQL is the position of the last event a reader may see now (below the
// oldest transaction still running, as every read): a private forwarder
// starts there.
const endSQL = `SELECT tx, event_id FROM maestro_event WHERE tx < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY tx DESC, event_id DESC LIMIT 1`

const ensureCursorSQL = `INSERT INTO maestro_event_cursor (name) VALUES ($1) ON CONFLICT DO NOTHING`

const readCursorSQL = `SELECT tx, event_id FROM maestro_event_cursor WHERE name = $1`

// moveCursorSQL only moves a cursor forward: a reader that lost its lead
// without knowing can never move it back.
const moveCursorSQL = `
UPDATE maestro_event_cursor SET tx = $2::xid8, event_id = $3::bigint, updated_at = now()
WHERE name = $1 AND (tx, event_id) < ($2::xid8, $3::bigint)`

const touchCursorSQL = `UPDATE maestro_event_cursor SET updated_at = now() WHERE name = $1`

// lockCursorSQL is a session advisory lock on a reader's name: one reader
// of a name at a time, across processes; it goes with the session, so a
// killed process frees it at once.
const lockCursorSQL = `SELECT pg_try_advisory_lock(727001, hashtext($1))`

const unlockCursorSQL = `SELECT pg_advisory_unlock(727001, hashtext($1))`

// findSQL reads one event.
const findSQL = `
SELECT ` + eventColumns + ` FROM maestro_event
WHERE tx = $1::xid8 AND event_id = $2::bigint`

// dueSQL reports whether the oldest event is past the retention ($1).
const dueSQL = `SELECT created_at < now() - $1::interval FROM maestro_event ORDER BY tx, event_id LIMIT 1`

// cleanSQL deletes, from the oldest, up to $2 events older than the
// retention ($1) that every live cursor (moved or touched within $3) has
// passed. It looks at the first $2 rows only, so that a table with nothing
// to delete costs a short index scan.
const cleanSQL = `
WITH bound AS (
    SELECT tx, event_id FROM maestro_event_cursor WHERE updated_at > now() - $3::interval
    ORDER BY tx, event_id LIMIT 1),
head AS (
    SELECT tx, event_id, created_at FROM maestro_event ORDER BY tx, event_id LIMIT $2),
doomed AS (
    SELECT h.tx, h.event_id FROM head h
    WHERE h.created_at < now() - $1::interval
      AND NOT EXISTS (SELECT 1 FROM bound b WHERE (h.tx, h.event_id) > (b.tx, b.event_id)))
DELETE FROM maestro_event e USING doomed d WHERE e.tx = d.tx AND e.event_id = d.event_id`

// Position is where an event is in the outbox: its transaction and row id.
// Readers walk events in position order.
type Position struct {
	TX uint64
	ID int64
}

// String is the position as an event id: "tx-id".
func (p Position) String() string {
	return strconv.FormatUint(p.TX, 10) + "-" + strconv.FormatInt(p.ID, 10)
}

// IsZero reports the position before every event.
func (p Position) IsZero() bool { return p.TX == 0 && p.ID == 0 }

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.TX < q.TX || (p.TX == q.TX && p.ID < q.ID)
}

// ErrBadPosition reports an event id that is not one.
var ErrBadPosition = errors.New("not an event id")

// ParsePosition reads an event id ("tx-id").
func ParsePosition(s string) (Position, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Position{}, fmt.Errorf("%w: %q", ErrBadPosition, s)
	}
	tx, err1 := strconv.ParseUint(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || id < 0 || tx > 1<<63-1 {
		return Position{}, fmt.Errorf("%w: %q", ErrBadPosition, s)
	}
	return Position{TX: tx, ID: id}, nil
}

// Event is one stored event.
type Event struct {
	Position
	Kind       Kind
	WorkflowID string
	CreatedAt  time.Time
	// Seq is the run's or attempt's seq of a status change, else 0.
	Seq int64
	// Payload is the event as stored: compact for status changes, else the
	// external event without event_id, cluster_name and send_time (Expand
	// gives the external shape).
	Payload json.RawMessage
	// TraceContext is the W3C traceparent of the event's run (ReadAfter
	// fills it), or "": the SQS sink passes it on.
	TraceContext string
}

// EventID is the event's id, which consumers deduplicate on.
func (e Event) EventID() string { return e.Position.String() }

// Type is the event's type.
func (e Event) Type() Type {
	if e.Kind < 1 || int(e.Kind) > len(typesByKind) {
		return ""
	}
	return typesByKind[e.Kind-1]
}

// typesByKind is kinds inverted.
var typesByKind = Types()

// Record is an event to write: what the outbox row holds besides its
// position.
type Record struct {
	Kind       Kind
	WorkflowID string
	// Seq is a status change's seq (0: none).
	Seq     int64
	Payload []byte
}

// Payload is an event value that can be written.
type Payload interface {
	header() (Type, string)
}

func (e *StepInstanceStatusChangeEvent) header() (Type, string) {
	e.Type = StepInstanceStatusChange
	return e.Type, e.WorkflowID
}

func (e *WorkflowInstanceStatusChangeEvent) header() (Type, string) {
	e.Type = WorkflowInstanceStatusChange
	return e.Type, e.WorkflowID
}

func (e *WorkflowChangeEvent) header() (Type, string) { return e.Type, e.WorkflowID }

func (e *BackfillStatusChangeEvent) header() (Type, string) {
	e.Type = BackfillStatusChange
	return e.Type, e.WorkflowID
}

func (e *AlertEvent) header() (Type, string) {
	e.Type = Alert
	return e.Type, e.WorkflowID
}

// NewRecord encodes an event for the outbox (status changes in their
// compact form); it sets the event's type field (a WorkflowChangeEvent's
// must be set by the caller). SyncTime is set to now when zero.
func NewRecord(p Payload) Record {
	t, wf := p.header()
	now := time.Now().UnixMilli()
	switch e := p.(type) {
	case *StepInstanceStatusChangeEvent:
		if e.SyncTime == 0 {
			e.SyncTime = now
		}
	case *WorkflowInstanceStatusChangeEvent:
		if e.SyncTime == 0 {
			e.SyncTime = now
		}
	case *WorkflowChangeEvent:
		if e.SyncTime == 0 {
			e.SyncTime = now
		}
	case *AlertEvent:
		if e.SyncTime == 0 {
			e.SyncTime = now
		}
	case *BackfillStatusChangeEvent:
		if e.SyncTime == 0 {
			e.SyncTime = now
		}
	}
	var v any = p
	var seq int64
	switch e := p.(type) {
	case *StepInstanceStatusChangeEvent:
		c := compactStepOf(e)
		return Record{Kind: kinds[t], WorkflowID: wf, Seq: e.Seq, Payload: c.appendJSON(make([]byte, 0, 256))}
	case *WorkflowInstanceStatusChangeEvent:
		v, seq = compactRunOf(e), e.Seq
	}
	b, err := json.Marshal(v)
	if err != nil {
		// The event types hold strings, numbers and slices of them.
		panic(fmt.Sprintf("event: encode %s: %v", t, err))
	}
	return Record{Kind: kinds[t], WorkflowID: wf, Seq: seq, Payload: b}
}

// Execer is what writing events needs: a transaction in practice, so that
// the events commit with the change they report.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Insert writes events in q, in one statement.
func Insert(ctx context.Context, q Execer, recs ...Record) error {
	if len(recs) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, insertBatchSQL, batchArgs(recs)...); err != nil {
		return fmt.Errorf("write %d events: %w", len(recs), err)
	}
	return nil
}

// Queue adds the insert of events to a batch that runs in a transaction.
func Queue(b *pgx.Batch, recs ...Record) {
	if len(recs) == 0 {
		return
	}
	b.Queue(insertBatchSQL, batchArgs(recs)...)
}

func batchArgs(recs []Record) []any {
	kinds := make([]int16, len(recs))
	wfs := make([]string, len(recs))
	seqs := make([]int64, len(recs))
	payloads := make([]string, len(recs))
	for i, r := range recs {
		kinds[i], wfs[i], seqs[i], payloads[i] = int16(r.Kind), r.WorkflowID, r.Seq, string(r.Payload)
	}
	return []any{kinds, wfs, seqs, payloads}
}

// querier is what reading events needs.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// scanEvent reads an event row. The payload is scanned as bytes: into a
// json.RawMessage pgx would validate it with json.Unmarshal, which costs
// more than the rest of the read.
func scanEvent(r pgx.CollectableRow) (Event, error) {
	var e Event
	var payload []byte
	err := r.Scan(&e.TX, &e.ID, &e.Kind, &e.WorkflowID, &e.CreatedAt, &e.Seq, &payload)
	e.Payload = payload
	return e, err
}

// ReadAfter reads up to limit events after p, in position order.
func ReadAfter(ctx context.Context, q querier, p Position, limit int) ([]Event, error) {
	rows, err := q.Query(ctx, readSQL, p.TX, p.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("read events after %s: %w", p, err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var payload []byte
		err := r.Scan(&e.TX, &e.ID, &e.Kind, &e.WorkflowID, &e.CreatedAt, &e.Seq, &payload, &e.TraceContext)
		e.Payload = payload
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read events after %s: %w", p, err)
	}
	return evs, nil
}

// find reads the event at p; ok is false when it is not (or no longer)
// stored.
func find(ctx context.Context, q querier, p Position) (Event, bool, error) {
	rows, err := q.Query(ctx, findSQL, p.TX, p.ID)
	if err != nil {
		return Event{}, false, fmt.Errorf("read event %s: %w", p, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEvent)
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("read event %s: %w", p, err)
	}
	return e, true, nil
}

// readCursor returns a reader's position, creating its cursor at the start.
func readCursor(ctx context.Context, q querier, name string) (Position, error) {
	if _, err := q.Exec(ctx, ensureCursorSQL, name); err != nil {
		return Position{}, fmt.Errorf("create event cursor %s: %w", name, err)
	}
	var p Position
	if err := q.QueryRow(ctx, readCursorSQL, name).Scan(&p.TX, &p.ID); err != nil {
		return Position{}, fmt.Errorf("read event cursor %s: %w", name, err)
	}
	return p, nil
}

// moveCursor moves a reader's cursor forward to p.
func moveCursor(ctx context.Context, q querier, name string, p Position) error {
	if _, err := q.Exec(ctx, moveCursorSQL, name, p.TX, p.ID); err != nil {
		return fmt.Errorf("move event cursor %s to %s: %w", name, p, err)
	}
	return nil
}
