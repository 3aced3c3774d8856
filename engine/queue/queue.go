// Package queue is the transactional outbox that carries work to the engine.
//
// A producer inserts a message in the same transaction as the change it
// announces (Enqueue) and wakes the engine with pg_notify in that
// transaction. The engine node that owns the message's flow group claims it,
// processes it and deletes it. Claims time out, so a message whose worker
// died is re-offered by the sweeper: delivery is at least once, and
// processors are idempotent so the effect is exactly once.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maestro-aws/maestro/engine/tracing"
)

// ID partitions messages by kind, as Maestro's queue ids do.
type ID int16

// Queue ids.
const (
	StartWorkflow  ID = 1
	InstanceAction ID = 2
	StepUpdate     ID = 3
	Notification   ID = 4
	DeleteWorkflow ID = 5
)

func (q ID) String() string {
	switch q {
	case StartWorkflow:
		return "start_workflow"
	case InstanceAction:
		return "instance_action"
	case StepUpdate:
		return "step_update"
	case Notification:
		return "notification"
	case DeleteWorkflow:
		return "delete_workflow"
	}
	return fmt.Sprintf("queue_%d", int16(q))
}

// Channel is the pg_notify channel producers wake the engine on.
const Channel = "maestro_queue"

// Message is one outbox row.
type Message struct {
	Queue ID    `json:"q"`
	ID    int64 `json:"id"`
	// Group is the flow group the message targets, or -1 for any node.
	Group   int32           `json:"g"`
	Payload json.RawMessage `json:"-"`
	// TraceContext is the W3C traceparent of the span that enqueued the
	// message, or "" (engine/tracing): the worker continues that trace.
	TraceContext string `json:"-"`
	// Read is what its queue's ClaimRead read with the claim (nil when the
	// message was claimed otherwise, or the read found nothing): the
	// handler uses it instead of reading it again.
	Read any `json:"-"`
	// Note is what the message's notification carried of it
	// (NotifyNotedSQL), nil for nothing: its queue's WorkerConfig.Noted
	// may hand the message to its handler from it, without a claim.
	Note json.RawMessage `json:"-"`
}

// AnyGroup marks a message that any engine node may process.
const AnyGroup int32 = -1

// Execer is what Enqueue needs: a transaction in practice.
type Execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// enqueueSQL inserts a message and queues its notification (sent when the
// transaction commits) in one statement: one round trip, which counts when
// the database is a network away. The note is Message's JSON.
const enqueueSQL = `
WITH m AS (
    INSERT INTO maestro_queue (queue_id, group_id, payload, trace_context)
    VALUES ($1, NULLIF($2::integer, -1), $3, NULLIF($4::text, ''))
    RETURNING message_id)
SELECT message_id, pg_notify($5, json_build_object('q', $1::smallint, 'id', message_id, 'g', $2::integer)::text) IS NULL
FROM m`

// Enqueue inserts a message and notifies the engine, inside tx. The message
// becomes visible, and the notification is delivered, only if tx commits.
func Enqueue(ctx context.Context, tx Execer, q ID, group int32, payload any) (Message, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return Message{}, fmt.Errorf("encode %s message: %w", q, err)
	}
	m := Message{Queue: q, Group: group, Payload: body, TraceContext: tracing.Traceparent(ctx)}
	var notified bool
	if err := tx.QueryRow(ctx, enqueueSQL, q, group, body, m.TraceContext, Channel).Scan(&m.ID, &notified); err != nil {
		return Message{}, fmt.Errorf("enqueue %s message: %w", q, err)
	}
	return m, nil
}

// InsertSQL is the head of an insert of messages, for a producer that
// enqueues its messages within a larger statement (run.Create's INSERT of
// runs): it selects queue_id, group_id, payload and trace_context, returns
// message_id and group_id from a CTE named msg, and notifies them with
// NotifyManySQL.
const InsertSQL = `INSERT INTO maestro_queue (queue_id, group_id, payload, trace_context)`

// NotifyManySQL notifies the messages a CTE named msg inserted (its
// message_id and group_id) for the queue given as its one %s verb (a
// number or a parameter): one
// notification per flow group and up to notifyChunk messages,
// {"q": q, "g": group, "ids": [id, ...]} (ParseNotifications), rather than
// one per message (a notification costs at commit; 1,000 cost the commit
// of a batch of starts about 8 ms). It yields one row, the count of
// notifications, named notified.
const NotifyManySQL = `
    SELECT count(pg_notify('` + Channel + `', json_build_object('q', %s, 'g', g, 'ids', ids)::text)) AS notified
    FROM (` + chunkedIDs + `msg` + chunkedIDsEnd + `) AS notes`

// NotifyNotedSQL is NotifyManySQL whose messages may carry a note: a
// CTE named note (columns message_id, group_id and run, one json object
// per message it notes) names what the handler of a message needs, and
// each message noted gets a notification of its own carrying it as "run"
// (ParseNotifications sets Message.Note); the others are notified as
// NotifyManySQL does. A note longer than noteLimit is left out: its
// message is notified with the others (pg_notify's payload limit is
// 8,000 bytes). Each note's length is taken once and the rest found by a
// hashed NOT IN: a join of msg and note row by row cost a batch of 63
// starts 25 ms.
const NotifyNotedSQL = `
    WITH sent AS MATERIALIZED (SELECT message_id, group_id, run FROM note WHERE length(run::text) <= ` + noteLimit + `)
    SELECT count(pg_notify('` + Channel + `', json_build_object('q', %s, 'g', g, 'ids', ids, 'run', run)::text)) AS notified
    FROM (SELECT coalesce(group_id, -1) AS g, json_build_array(message_id) AS ids, run FROM sent
          UNION ALL
          ` + chunkedIDs + `msg WHERE message_id NOT IN (SELECT message_id FROM sent)` + chunkedIDsEnd + `) AS notes`

// notifyChunk is the most message ids one notification names.
const notifyChunk = "300"

// chunkedIDs, a FROM item of messages (message_id, group_id) and
// chunkedIDsEnd select the rows of the notifications that name them: per
// flow group and notifyChunk messages, g, ids and a NULL run.
const (
	chunkedIDs = `SELECT coalesce(group_id, -1) AS g, json_agg(message_id ORDER BY message_id) AS ids, NULL::json AS run
          FROM (SELECT message_id, group_id,
                    (row_number() OVER (PARTITION BY group_id ORDER BY message_id) - 1) / ` + notifyChunk + ` AS chunk
                FROM `
	chunkedIDsEnd = `) AS m
          GROUP BY group_id, chunk`
)

// noteLimit is the longest note NotifyNotedSQL sends: with the queue,
// group and ids of one message around it, the payload stays well under
// pg_notify's limit of 8,000 bytes. A longer one is left out (the
// handler claims and reads the message as it would without a note).
const noteLimit = "7000"

// enqueueBatchSQL inserts the messages and queues their notifications
// (NotifyManySQL: $1 is the queue) in one statement.
var enqueueBatchSQL = `
WITH msg AS (
    ` + InsertSQL + `
    SELECT $1, NULLIF(g, -1), p, NULLIF($4::text, '') FROM unnest($2::integer[], $3::jsonb[]) AS m(g, p)
    RETURNING message_id, group_id),
notes AS (` + fmt.Sprintf(NotifyManySQL, "$1::smallint") + `)
SELECT count(*), (SELECT notified FROM notes) FROM msg`

// EnqueueBatch inserts one message per payload, groups[i] targeting
// payloads[i], and notifies the engine of each, inside tx: one statement
// whatever the number of messages (a foreach launching a batch of
// iterations uses it).
func EnqueueBatch[P any](ctx context.Context, tx Execer, q ID, groups []int32, payloads []P) error {
	if len(groups) != len(payloads) {
		return fmt.Errorf("enqueue %s batch: %d groups for %d payloads", q, len(groups), len(payloads))
	}
	if len(payloads) == 0 {
		return nil
	}
	bodies := make([]string, len(payloads))
	for i, p := range payloads {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode %s message: %w", q, err)
		}
		bodies[i] = string(b)
	}
	var n, notes int64
	if err := tx.QueryRow(ctx, enqueueBatchSQL, q, groups, bodies, tracing.Traceparent(ctx)).Scan(&n, &notes); err != nil {
		return fmt.Errorf("enqueue %s batch: %w", q, err)
	}
	if n != int64(len(payloads)) {
		return fmt.Errorf("enqueue %s batch: %d of %d messages", q, n, len(payloads))
	}
	return nil
}

// ParseNotification decodes a pg_notify payload written by Enqueue.
func ParseNotification(payload string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		return Message{}, fmt.Errorf("decode queue notification: %w", err)
	}
	if m.Queue == 0 || m.ID == 0 {
		return Message{}, errors.New("decode queue notification: missing queue or id")
	}
	return m, nil
}

// ParseNotifications decodes a pg_notify payload written by Enqueue (one
// message) or by NotifyManySQL (the messages of one group: "ids").
func ParseNotifications(payload string) ([]Message, error) {
	var n struct {
		Message
		IDs  []int64         `json:"ids"`
		Note json.RawMessage `json:"run"`
	}
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		return nil, fmt.Errorf("decode queue notification: %w", err)
	}
	if n.IDs == nil {
		m, err := ParseNotification(payload)
		if err != nil {
			return nil, err
		}
		return []Message{m}, nil
	}
	if n.Queue == 0 || len(n.IDs) == 0 || n.ID != 0 {
		return nil, errors.New("decode queue notification: missing queue or ids")
	}
	out := make([]Message, len(n.IDs))
	for i, id := range n.IDs {
		if id == 0 {
			return nil, errors.New("decode queue notification: message id 0")
		}
		out[i] = Message{Queue: n.Queue, ID: id, Group: n.Group}
	}
	if len(out) == 1 && len(n.Note) > 0 && string(n.Note) != "null" {
		out[0].Note = n.Note
	}
	return out, nil
}

// Querier is what the store needs: a pool in practice.
type Querier interface {
	Execer
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Store claims and deletes messages.
type Store struct {
	db Querier
}

// NewStore wraps db.
func NewStore(db Querier) *Store { return &Store{db: db} }

const claimSQL = `
UPDATE maestro_queue SET owned_by = $3, owned_until = now() + $4::interval
WHERE queue_id = $1 AND message_id = $2 AND (owned_until IS NULL OR owned_until < now())
RETURNING COALESCE(group_id, -1), payload, COALESCE(trace_context, '')`

// Claim takes ownership of one message for ttl. ok is false when the message
// is gone or another worker holds a live claim.
func (s *Store) Claim(ctx context.Context, q ID, id int64, node string, ttl time.Duration) (Message, bool, error) {
	m := Message{Queue: q, ID: id}
	err := s.db.QueryRow(ctx, claimSQL, q, id, node, ttl).Scan(&m.Group, &m.Payload, &m.TraceContext)
	if errors.Is(err, pgx.ErrNoRows) {
		return Message{}, false, nil
	}
	if err != nil {
		return Message{}, false, fmt.Errorf("claim %s message %d: %w", q, id, err)
	}
	return m, true, nil
}

// ClaimRead is a read a handler needs, sent with its message's claim in
// one round trip (a pipelined batch, one implicit transaction): the claim
// and the handler's first read cost one round trip where they cost two.
type ClaimRead struct {
	// SQL reads by the claimed message: $1 is its queue id, $2 its message
	// id, $3 the claiming node; it runs after the claim, in its
	// transaction, so it sees the claim (owned_by = $3). It lives with the
	// store that owns what it reads.
	SQL string
	// Scan scans its row; ok false for none.
	Scan func(row pgx.Row) (v any, ok bool, err error)
}

// batchSender is what ClaimWith needs of the store's db to send the
// claim and its read together: a pool.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ClaimWith is Claim with read sent in the same round trip; the message's
// Read is what read found (nil for nothing). Where the db cannot send a
// batch, it is Claim and the handler reads for itself.
func (s *Store) ClaimWith(ctx context.Context, q ID, id int64, node string, ttl time.Duration, read *ClaimRead) (Message, bool, error) {
	bs, ok := s.db.(batchSender)
	if read == nil || !ok {
		return s.Claim(ctx, q, id, node, ttl)
	}
	b := &pgx.Batch{}
	b.Queue(claimSQL, q, id, node, ttl)
	b.Queue(read.SQL, q, id, node)
	br := bs.SendBatch(ctx, b)
	defer br.Close()
	m := Message{Queue: q, ID: id}
	err := br.QueryRow().Scan(&m.Group, &m.Payload, &m.TraceContext)
	claimed := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Message{}, false, fmt.Errorf("claim %s message %d: %w", q, id, err)
	}
	v, found, err := read.Scan(br.QueryRow())
	if err != nil {
		return Message{}, false, fmt.Errorf("read with the claim of %s message %d: %w", q, id, err)
	}
	if err := br.Close(); err != nil {
		return Message{}, false, fmt.Errorf("claim %s message %d: %w", q, id, err)
	}
	if !claimed {
		return Message{}, false, nil // what read found belongs to another claim
	}
	if found {
		m.Read = v
	}
	return m, true, nil
}

const takeOverSQL = `
UPDATE maestro_queue SET owned_by = NULL, owned_until = NULL
WHERE group_id = ANY ($1::integer[]) AND owned_by IS DISTINCT FROM $2 AND owned_until >= now()`

// TakeOver ends the claims other nodes hold on messages of groups this node
// has just claimed, so that a sweep offers them at once instead of after
// the claims' time-to-live: the node that held them lost the groups, and
// every write it could still make for them is fenced (the handlers are
// idempotent). It returns how many claims it ended.
func (s *Store) TakeOver(ctx context.Context, groups []int32, node string) (int64, error) {
	tag, err := s.db.Exec(ctx, takeOverSQL, groups, node)
	if err != nil {
		return 0, fmt.Errorf("take over messages of groups %v: %w", groups, err)
	}
	return tag.RowsAffected(), nil
}

const releaseNodeSQL = `
UPDATE maestro_queue SET owned_by = NULL, owned_until = NULL WHERE owned_by = $1`

// ReleaseNode ends every claim held under node's name. A process calls it
// as it starts under a name an earlier process used (an engine restarted
// with the same node id): the earlier one is gone and its claims would
// otherwise keep their messages waiting out the claim time-to-live. It
// returns how many claims it ended. Node names must be unique among live
// processes; a message released from a live holder is only delivered
// twice, which handlers tolerate.
func (s *Store) ReleaseNode(ctx context.Context, node string) (int64, error) {
	tag, err := s.db.Exec(ctx, releaseNodeSQL, node)
	if err != nil {
		return 0, fmt.Errorf("release the claims of node %s: %w", node, err)
	}
	return tag.RowsAffected(), nil
}

const claimDueSQL = `
UPDATE maestro_queue SET owned_by = $2, owned_until = now() + $3::interval
WHERE (queue_id, message_id) IN (
    SELECT queue_id, message_id FROM maestro_queue
    WHERE queue_id = ANY ($5::smallint[])
      AND (group_id = ANY ($1::integer[]) OR group_id IS NULL)
      AND (owned_until < now() OR owned_until IS NULL AND created_at <= now() - $6::interval)
      AND message_id <> ALL ($7::bigint[])
    ORDER BY message_id
    LIMIT $4
    FOR UPDATE SKIP LOCKED)
RETURNING queue_id, message_id, COALESCE(group_id, -1), payload, COALESCE(trace_context, '')`

// ClaimDue claims up to limit messages of the given queues that nobody
// holds, for the given groups and for any-node messages: those whose claim
// ran out, and those never claimed that are at least grace old. The
// sweeper uses it to pick up messages whose notification was missed or
// whose worker died; the grace leaves a fresh message to the worker its
// notification reached, so that it is not claimed twice (a second claim
// is a wasted UPDATE, and under load a message would be handed out twice).
func (s *Store) ClaimDue(ctx context.Context, queues []ID, groups []int32, node string, ttl, grace time.Duration, limit int) ([]Message, error) {
	return s.ClaimDueExcept(ctx, queues, groups, nil, node, ttl, grace, limit)
}

// ClaimDueExcept is ClaimDue leaving out the messages whose ids are in
// except: those a worker of this process has on their way to a handler
// already (their claim is coming, or they are being processed).
func (s *Store) ClaimDueExcept(ctx context.Context, queues []ID, groups []int32, except []int64, node string, ttl, grace time.Duration, limit int) ([]Message, error) {
	if except == nil {
		except = []int64{}
	}
	rows, err := s.db.Query(ctx, claimDueSQL, groups, node, ttl, limit, queues, grace, except)
	if err != nil {
		return nil, fmt.Errorf("claim due messages: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		err := r.Scan(&m.Queue, &m.ID, &m.Group, &m.Payload, &m.TraceContext)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due messages: %w", err)
	}
	return msgs, nil
}

// Delete removes a processed message.
func (s *Store) Delete(ctx context.Context, m Message) error {
	if _, err := s.db.Exec(ctx, "DELETE FROM maestro_queue WHERE queue_id = $1 AND message_id = $2", m.Queue, m.ID); err != nil {
		return fmt.Errorf("delete %s message %d: %w", m.Queue, m.ID, err)
	}
	return nil
}

// AckSQL deletes handled messages in the transaction of another store's
// write, so that a message and the write that handles it commit (or fail)
// together, in one round trip with it. $1 are the queue ids, $2 the
// message ids, $3 the handling nodes; a row is deleted only while its
// flow group ($4) is still at the generation ($5) the write was fenced
// with (a fenced-off node deletes nothing, and the message goes to the
// group's new owner) and no other node holds a live claim on it: the
// message is claimed by the node, or it is handled from its notification
// without a claim (WorkerConfig.Noted) and nobody has claimed it since.
// Its caller reads no rows.
const AckSQL = `
DELETE FROM maestro_queue q
USING unnest($1::smallint[], $2::bigint[], $3::text[], $4::integer[], $5::bigint[]) AS a(queue_id, message_id, node, group_id, gen)
WHERE q.queue_id = a.queue_id AND q.message_id = a.message_id
  AND (q.owned_by = a.node OR q.owned_by IS NULL AND (q.owned_until IS NULL OR q.owned_until < now()))
  AND EXISTS (SELECT 1 FROM flow_group g WHERE g.group_id = a.group_id AND g.generation = a.gen)`

// Release gives a claimed message back at once, for a worker that could not
// process it now (for example because it lost the message's group).
func (s *Store) Release(ctx context.Context, m Message) error {
	if _, err := s.db.Exec(ctx, "UPDATE maestro_queue SET owned_by = NULL, owned_until = NULL WHERE queue_id = $1 AND message_id = $2", m.Queue, m.ID); err != nil {
		return fmt.Errorf("release %s message %d: %w", m.Queue, m.ID, err)
	}
	return nil
}

// Defer keeps a claimed message out of reach for delay, after which the
// sweeper offers it again. Workers use it when processing failed.
func (s *Store) Defer(ctx context.Context, m Message, delay time.Duration) error {
	if _, err := s.db.Exec(ctx, "UPDATE maestro_queue SET owned_until = now() + $3::interval WHERE queue_id = $1 AND message_id = $2", m.Queue, m.ID, delay); err != nil {
		return fmt.Errorf("defer %s message %d: %w", m.Queue, m.ID, err)
	}
	return nil
}

// Stats describes the outbox as a whole, for metrics.
type Stats struct {
	// Depth is the number of messages.
	Depth int64
	// OldestDue is the age of the oldest message that is due and that no
	// worker holds a live claim on (zero when there is none): how long work
	// has been waiting for a worker.
	OldestDue time.Duration
}

const statsSQL = `
SELECT count(*),
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE owned_until IS NULL OR owned_until < now())), 0)
FROM maestro_queue`

// Stats reads the outbox's depth and the age of its oldest due message.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	var age float64
	if err := s.db.QueryRow(ctx, statsSQL).Scan(&st.Depth, &age); err != nil {
		return Stats{}, fmt.Errorf("read queue stats: %w", err)
	}
	st.OldestDue = time.Duration(age * float64(time.Second))
	return st, nil
}
