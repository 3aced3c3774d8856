package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Run strategies (docs/run-control.md).
//
// A run that is created waits as a queued CREATED row (workflow_instance.
// queued) until its workflow's run strategy admits it. Admission clears the
// flag and enqueues the run's start message in one transaction, under a
// lock on the workflow row that every admitting transaction takes before
// any instance row: starts, restarts, unblocks and the admission that
// follows the end of a run. Starts therefore get instance ids in lock
// order (FIFO) and admissions cannot overrun a limit. A run's end commits
// without the lock (runs of a workflow do not wait for each other to end)
// and then admits; a start that queued behind a run ending at that moment
// admits again after its commit, so one of the two sees the other. A crash
// between an end and its admission, and properties changes, are caught by
// the periodic admission sweep.

// Strategy is a workflow's effective run strategy.
type Strategy struct {
	Rule workflow.RunStrategyRule
	// Concurrency is how many runs may be admitted at once: 1 for every
	// rule but PARALLEL; 0 pauses the workflow.
	Concurrency int64
}

// ParseStrategy reads the effective run strategy from a workflow's current
// properties (workflow.properties). Unset or unreadable means SEQUENTIAL.
func ParseStrategy(props []byte) Strategy {
	if len(props) == 0 {
		return Strategy{Rule: workflow.RunStrategySequential, Concurrency: 1}
	}
	return parsedStrategies.get(props)
}

// parsedStrategies keeps the strategies ParseStrategy read, by the
// properties' bytes: a batch of starts of 1,000 workflows parsed each
// workflow's properties twice (three JSON passes each), a fifth of the
// batch path's own CPU. Properties are small and change rarely; past
// maxParsedStrategies entries the cache starts over.
var parsedStrategies = strategyCache{m: map[string]Strategy{}}

const maxParsedStrategies = 4096

type strategyCache struct {
	mu sync.Mutex
	m  map[string]Strategy
}

func (c *strategyCache) get(props []byte) Strategy {
	c.mu.Lock()
	st, ok := c.m[string(props)]
	c.mu.Unlock()
	if ok {
		return st
	}
	st = parseStrategy(props)
	c.mu.Lock()
	if len(c.m) >= maxParsedStrategies {
		clear(c.m)
	}
	c.m[string(props)] = st
	c.mu.Unlock()
	return st
}

// parseStrategy is ParseStrategy without the cache.
func parseStrategy(props []byte) Strategy {
	out := Strategy{Rule: workflow.RunStrategySequential, Concurrency: 1}
	var raw struct {
		RunStrategy json.RawMessage `json:"run_strategy"`
	}
	if err := json.Unmarshal(props, &raw); err != nil || len(raw.RunStrategy) == 0 || string(raw.RunStrategy) == "null" {
		return out
	}
	// Decode through Properties: it accepts every form (name, number,
	// object) the definition API stores.
	only, _ := json.Marshal(map[string]json.RawMessage{"run_strategy": raw.RunStrategy})
	var p workflow.Properties
	if err := json.Unmarshal(only, &p); err != nil || p.RunStrategy == nil {
		return out
	}
	rule := workflow.RunStrategyRule(strings.ToUpper(string(p.RunStrategy.Rule)))
	if !rule.Valid() {
		return out
	}
	out.Rule = rule
	if rule == workflow.RunStrategyParallel {
		out.Concurrency = min(max(p.RunStrategy.Concurrency(), 0), workflow.MaxWorkflowConcurrency)
	}
	return out
}

// Tx is what the run-control SQL needs: a transaction in practice.
type Tx interface {
	queue.Execer
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ErrWorkflowGone reports a workflow row that no longer exists.
var ErrWorkflowGone = errors.New("workflow does not exist")

const lockWorkflowSQL = `SELECT properties FROM workflow WHERE workflow_id = $1 FOR NO KEY UPDATE`

// LockWorkflow takes the admission lock of a workflow and returns its
// current properties. It returns ErrWorkflowGone when the row is gone.
func LockWorkflow(ctx context.Context, tx Tx, workflowID string) ([]byte, error) {
	var props []byte
	err := tx.QueryRow(ctx, lockWorkflowSQL, workflowID).Scan(&props)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrWorkflowGone
	}
	if err != nil {
		return nil, fmt.Errorf("lock workflow %s: %w", workflowID, err)
	}
	return props, nil
}

// blockingRun finds a FAILED run that blocks a STRICT_SEQUENTIAL workflow:
// the latest run of its instance, not unblocked.
const blockingRun = `
    SELECT 1 FROM workflow_instance f
    WHERE f.workflow_id = $1 AND f.status = 'FAILED' AND NOT f.unblocked
      AND NOT EXISTS (SELECT 1 FROM workflow_instance n
          WHERE n.workflow_id = f.workflow_id AND n.instance_id = f.instance_id AND n.run_id > f.run_id)`

// admitSQL admits, oldest trigger first (a backfill's runs after every
// other: a backfill yields, docs/backfill.md), as many queued runs as the
// concurrency ($2) leaves room for next to the admitted live runs; none
// when $3 (STRICT_SEQUENTIAL) and a failed run blocks. One statement, so
// one snapshot: a run that ends meanwhile (ends do not take the workflow
// lock) is either still active or already blocking, never neither. The
// caller holds the workflow lock.
const admitSQL = `
WITH active AS (
    SELECT count(*) AS n FROM (SELECT 1 FROM workflow_instance
        WHERE workflow_id = $1 AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued
        LIMIT $2::bigint) AS live),
blocked AS (
    SELECT $3::boolean AND EXISTS (` + blockingRun + `) AS b),
pick AS (
    SELECT instance_id, run_id FROM workflow_instance
    WHERE workflow_id = $1 AND queued
    ORDER BY coalesce(initiator->>'type', '') = 'BACKFILL', instance_id, run_id
    LIMIT CASE WHEN (SELECT b FROM blocked) THEN 0 ELSE GREATEST($2 - (SELECT n FROM active), 0) END)
UPDATE workflow_instance w SET queued = false, modify_time = now()
FROM pick
WHERE w.workflow_id = $1 AND w.instance_id = pick.instance_id AND w.run_id = pick.run_id
RETURNING w.instance_id, w.run_id, w.group_id`

// supersedeQueuedSQL stops every queued run but the newest (LAST_ONLY).
const supersedeQueuedSQL = `
UPDATE workflow_instance SET status = 'STOPPED', queued = false, seq = seq + 1, end_time = now(), modify_time = now(),
    timeline = timeline || $2::jsonb
WHERE workflow_id = $1 AND queued
  AND (instance_id, run_id) <> (SELECT instance_id, run_id FROM workflow_instance
      WHERE workflow_id = $1 AND queued ORDER BY instance_id DESC, run_id DESC LIMIT 1)
RETURNING ` + stoppedColumns

// supersede stops queued runs of a workflow (LAST_ONLY) with sql, and
// records their CREATED -> STOPPED events in tx.
func supersede(ctx context.Context, tx Tx, sql, workflowID string) error {
	tl, _ := json.Marshal(instance.StatusChange(string(instance.WorkflowStopped),
		"superseded by a newer run under the LAST_ONLY run strategy"))
	rows, err := tx.Query(ctx, sql, workflowID, tl)
	if err != nil {
		return fmt.Errorf("supersede queued runs of %s: %w", workflowID, err)
	}
	evs, err := stoppedEvents(rows, workflowID, instance.WorkflowCreated, instance.WorkflowStopped)
	if err != nil {
		return fmt.Errorf("supersede queued runs of %s: %w", workflowID, err)
	}
	return event.Insert(ctx, tx, evs...)
}

// AdmitQueued admits the queued runs of a workflow that its run strategy
// allows now, oldest trigger first, and enqueues their start messages. The
// caller holds the workflow lock (LockWorkflow) in tx.
func AdmitQueued(ctx context.Context, tx Tx, workflowID string, props []byte) ([]Ref, error) {
	s := ParseStrategy(props)
	if s.Rule == workflow.RunStrategyLastOnly {
		if err := supersede(ctx, tx, supersedeQueuedSQL, workflowID); err != nil {
			return nil, err
		}
	}
	if s.Concurrency <= 0 {
		return nil, nil
	}
	strict := s.Rule == workflow.RunStrategyStrictSequential
	rows, err := tx.Query(ctx, admitSQL, workflowID, s.Concurrency, strict)
	if err != nil {
		return nil, fmt.Errorf("admit runs of %s: %w", workflowID, err)
	}
	type admitted struct {
		ref   Ref
		group int32
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (admitted, error) {
		a := admitted{ref: Ref{WorkflowID: workflowID}}
		err := r.Scan(&a.ref.InstanceID, &a.ref.RunID, &a.group)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("admit runs of %s: %w", workflowID, err)
	}
	slices.SortFunc(all, func(a, b admitted) int {
		if a.ref.InstanceID != b.ref.InstanceID {
			return int(a.ref.InstanceID - b.ref.InstanceID)
		}
		return int(a.ref.RunID - b.ref.RunID)
	})
	out := make([]Ref, 0, len(all))
	for _, a := range all {
		if _, err := queue.Enqueue(ctx, tx, queue.StartWorkflow, a.group, StartMessage{Ref: a.ref, Group: a.group}); err != nil {
			return nil, err
		}
		out = append(out, a.ref)
	}
	return out, nil
}

// Beginner starts transactions: a pool in practice.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// DB is what the functions that open their own transactions need: a pool
// in practice.
type DB interface {
	Beginner
	Begin(ctx context.Context) (pgx.Tx, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// admitTxOptions commit an admission without waiting for the WAL flush. An
// admission lost in a crash loses its start messages with it and leaves
// the runs queued, so the sweep admits them again; and once the engine has
// started an admitted run, that synchronous write has flushed the
// admission (the WAL is flushed in order). The hand-off thus pays one
// durable commit (the end's), not two.
var admitTxOptions = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}

// AdmitWorkflow locks a workflow and admits, in its own transaction, what
// its strategy allows now. With skipLocked a workflow someone else is
// admitting right now is left alone (they admit it).
func AdmitWorkflow(ctx context.Context, db Beginner, workflowID string, skipLocked bool) ([]Ref, error) {
	var out []Ref
	err := pgx.BeginTxFunc(ctx, db, admitTxOptions, func(tx pgx.Tx) error {
		q := lockWorkflowSQL
		if skipLocked {
			q += ` SKIP LOCKED`
		}
		var props []byte
		err := tx.QueryRow(ctx, q, workflowID).Scan(&props)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock workflow %s: %w", workflowID, err)
		}
		out, err = AdmitQueued(ctx, tx, workflowID, props)
		return err
	})
	return out, err
}

// AdmitIfQueued runs admission for a workflow after one of its runs ended
// (committed), when it has queued runs. It is not part of the transaction
// that ended the run: the end does not take the workflow lock, so runs of
// one workflow end without waiting for each other. A start that queued its
// run while the ended run still counted as active is caught either here
// (its queued row is visible by now) or by the start's own admission after
// its commit, which sees this run ended; a crash in between is caught by
// the admission sweep.
// Failures are logged to log: the sweep retries them.
func AdmitIfQueued(ctx context.Context, db DB, log *slog.Logger, workflowID string) {
	var queued bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = $1 AND queued)`,
		workflowID).Scan(&queued)
	if err == nil && queued {
		_, err = AdmitWorkflow(ctx, db, workflowID, false)
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("admit queued runs; the sweep will retry", "workflow_id", workflowID, "error", err.Error())
	}
}

// WorkflowsWithQueuedRuns lists workflows that have queued runs.
func WorkflowsWithQueuedRuns(ctx context.Context, db DB) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT workflow_id FROM workflow_instance WHERE queued`)
	if err != nil {
		return nil, fmt.Errorf("list workflows with queued runs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list workflows with queued runs: %w", err)
	}
	return ids, nil
}

// stopCreatedSQL ends a run that is still CREATED.
const stopCreatedSQL = `
UPDATE workflow_instance SET status = $4, queued = false, seq = seq + 1, end_time = now(),
    modify_time = now(), timeline = timeline || $5::jsonb
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND status = 'CREATED'
RETURNING ` + stoppedColumns

// StopCreated ends a run the engine has not started (queued or admitted),
// with its status change's event, and then admits the workflow's next
// runs.
// Admission failures are logged to log (AdmitIfQueued).
func StopCreated(ctx context.Context, db DB, log *slog.Logger, ref Ref, status instance.WorkflowStatus, reason string) (bool, error) {
	tl, _ := json.Marshal(instance.StatusChange(string(status), reason))
	stopped := false
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, stopCreatedSQL, ref.WorkflowID, ref.InstanceID, ref.RunID, status, tl)
		if err != nil {
			return err
		}
		evs, err := stoppedEvents(rows, ref.WorkflowID, instance.WorkflowCreated, status)
		if err != nil {
			return err
		}
		stopped = len(evs) > 0
		return event.Insert(ctx, tx, evs...)
	})
	if err != nil {
		return false, fmt.Errorf("stop created instance %s: %w", ref, err)
	}
	if !stopped {
		return false, nil
	}
	AdmitIfQueued(ctx, db, log, ref.WorkflowID)
	return true, nil
}

// Admission of new runs (Create): one statement per step for all the
// workflows of a round. The caller holds every workflow's lock; the
// workflows of one call are distinct (a second start of a workflow goes in
// a later round, so that it sees the first).

// Room is what admission reads of a workflow's runs: its admitted live
// runs (counted up to the limit the caller passed Rooms), whether runs are
// queued, and whether a failed run blocks it (STRICT_SEQUENTIAL).
type Room struct {
	Active  int64
	Queued  bool
	Blocked bool
}

// roomBatchSQL reads, in one snapshot, the Room of many workflows: $1 their
// ids, $2 whether each is STRICT_SEQUENTIAL, $3 up to how many live runs
// to count for each (admission asks only whether there are fewer than the
// concurrency, so a workflow with a million waiting runs costs no more
// than one with a few).
const roomBatchSQL = `
SELECT c.id,
    (SELECT count(*) FROM (SELECT 1 FROM workflow_instance
     WHERE workflow_id = c.id AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued
     LIMIT c.lim) AS live),
    EXISTS (SELECT 1 FROM workflow_instance WHERE workflow_id = c.id AND queued),
    c.strict AND EXISTS (
        SELECT 1 FROM workflow_instance f
        WHERE f.workflow_id = c.id AND f.status = 'FAILED' AND NOT f.unblocked
          AND NOT EXISTS (SELECT 1 FROM workflow_instance n
              WHERE n.workflow_id = f.workflow_id AND n.instance_id = f.instance_id AND n.run_id > f.run_id))
FROM unnest($1::text[], $2::boolean[], $3::bigint[]) AS c(id, strict, lim)`

// Rooms reads the admission state of many workflows in one statement;
// strict[i] applies the STRICT_SEQUENTIAL block check to ids[i] and
// limits[i] bounds the count of its live runs (its concurrency).
func Rooms(ctx context.Context, tx Tx, ids []string, strict []bool, limits []int64) (map[string]Room, error) {
	out := make(map[string]Room, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, roomBatchSQL, ids, strict, limits)
	if err != nil {
		return nil, fmt.Errorf("read room of %d workflows: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var r Room
		if err := rows.Scan(&id, &r.Active, &r.Queued, &r.Blocked); err != nil {
			return nil, fmt.Errorf("read room of %d workflows: %w", len(ids), err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read room of %d workflows: %w", len(ids), err)
	}
	return out, nil
}

// HasRoom reports whether a new run may be admitted at once: nothing is
// queued ahead of it, the workflow is not blocked and the strategy's
// concurrency leaves room.
func (s Strategy) HasRoom(r Room) bool {
	return s.Concurrency > 0 && !r.Queued && !r.Blocked && r.Active < s.Concurrency
}

// supersedeBatchSQL stops the queued runs of the LAST_ONLY workflows $1.
const supersedeBatchSQL = `
UPDATE workflow_instance SET status = 'STOPPED', queued = false, seq = seq + 1, end_time = now(), modify_time = now(),
    timeline = timeline || $2::jsonb
WHERE workflow_id = ANY($1::text[]) AND queued
RETURNING workflow_id, ` + stoppedColumns

// liveBatchSQL lists the admitted live runs of the workflows $1.
const liveBatchSQL = `
SELECT workflow_id, instance_id, run_id, group_id FROM workflow_instance
WHERE workflow_id = ANY($1::text[]) AND status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued`

// PrepareStarts applies what a run strategy does to the runs already there
// when one new run of each of many workflows is triggered, given their
// strategies: it returns the drop reason of each FIRST_ONLY
// workflow whose new run must not run, and under LAST_ONLY stops the queued
// runs and asks the engine to stop the admitted live ones.
func PrepareStarts(ctx context.Context, tx Tx, strategies map[string]Strategy) (map[string]string, error) {
	var firstOnly, lastOnly []string
	for id, s := range strategies {
		switch s.Rule {
		case workflow.RunStrategyFirstOnly:
			firstOnly = append(firstOnly, id)
		case workflow.RunStrategyLastOnly:
			lastOnly = append(lastOnly, id)
		}
	}
	drops := map[string]string{}
	if len(firstOnly) > 0 {
		ones := make([]int64, len(firstOnly))
		for i := range ones {
			ones[i] = 1
		}
		rooms, err := Rooms(ctx, tx, firstOnly, make([]bool, len(firstOnly)), ones)
		if err != nil {
			return nil, err
		}
		for id, r := range rooms {
			if r.Active > 0 || r.Queued {
				drops[id] = "dropped by the FIRST_ONLY run strategy: another run of the workflow is in progress"
			}
		}
	}
	if len(lastOnly) == 0 {
		return drops, nil
	}
	ev, _ := json.Marshal(instance.StatusChange(string(instance.WorkflowStopped),
		"superseded by a newer run under the LAST_ONLY run strategy"))
	superseded, err := tx.Query(ctx, supersedeBatchSQL, lastOnly, ev)
	if err != nil {
		return nil, fmt.Errorf("supersede queued runs of %d workflows: %w", len(lastOnly), err)
	}
	// Their CREATED -> STOPPED events, as supersede records them.
	evs, err := stoppedEvents(superseded, "", instance.WorkflowCreated, instance.WorkflowStopped)
	if err != nil {
		return nil, fmt.Errorf("supersede queued runs of %d workflows: %w", len(lastOnly), err)
	}
	if err := event.Insert(ctx, tx, evs...); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, liveBatchSQL, lastOnly)
	if err != nil {
		return nil, fmt.Errorf("list live runs of %d workflows: %w", len(lastOnly), err)
	}
	live, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ActionMessage, error) {
		m := ActionMessage{Action: ActionStop, Reason: "superseded by a newer run under the LAST_ONLY run strategy"}
		err := r.Scan(&m.WorkflowID, &m.InstanceID, &m.RunID, &m.Group)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list live runs of %d workflows: %w", len(lastOnly), err)
	}
	groups := make([]int32, len(live))
	for i, m := range live {
		groups[i] = m.Group
	}
	if err := queue.EnqueueBatch(ctx, tx, queue.InstanceAction, groups, live); err != nil {
		return nil, err
	}
	return drops, nil
}
