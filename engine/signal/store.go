package signal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The package's SQL, named and kept together. Tables are defined in
// migrations/00008_signals.sql.

// lockClass is the first key of the advisory locks on signal names.
// Announcing a signal takes the name's lock exclusively and a dependency
// check takes it shared, so a check either sees the signal or is
// registered as a waiter before the announcement looks for waiters: an
// arrival can never slip between a check and its registration.
const lockClass = 0x5349474e // "SIGN"

const sqlLockExclusive = `SELECT pg_advisory_xact_lock($1, hashtext($2))`

const sqlLockShared = `SELECT pg_advisory_xact_lock_shared($1, hashtext($2))`

const sqlInsertSignal = `
INSERT INTO signal_instance (name, params, payload, request_id, request_time) VALUES ($1, $2, $3, NULLIF($4, ''), NULLIF($5, 0))
ON CONFLICT (name, request_id) WHERE request_id IS NOT NULL DO NOTHING
RETURNING seq, create_time`

const signalColumns = `seq, name, params, payload, COALESCE(request_id, ''), create_time, COALESCE(request_time, 0)`

const sqlSignalByRequest = `SELECT ` + signalColumns + ` FROM signal_instance WHERE name = $1 AND request_id = $2`

const sqlSignalBySeq = `SELECT ` + signalColumns + ` FROM signal_instance WHERE name = $1 AND seq = $2`

// sqlSignalsBefore pages through the signals of a name, newest first.
const sqlSignalsBefore = `SELECT ` + signalColumns + ` FROM signal_instance
WHERE name = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`

// sqlWaiters finds the attempts still waiting for a signal name. Rows of
// attempts that ended while waiting (stopped, timed out) are closed on the
// way, so the index only ever holds live waiters.
const sqlWaiters = `
WITH candidate AS (
    SELECT w.workflow_id, w.instance_id, w.run_id, w.step_id, w.attempt_id, w.group_id, s.status
    FROM step_signal_wait w
    LEFT JOIN step_instance s USING (workflow_id, instance_id, run_id, step_id, attempt_id)
    WHERE w.signal_names @> ARRAY[$1]::text[] AND w.done_time IS NULL),
closed AS (
    UPDATE step_signal_wait w SET done_time = now() FROM candidate c
    WHERE (w.workflow_id, w.instance_id, w.run_id, w.step_id, w.attempt_id) =
          (c.workflow_id, c.instance_id, c.run_id, c.step_id, c.attempt_id)
      AND c.status = ANY ($2::text[]))
SELECT workflow_id, instance_id, run_id, step_id, group_id FROM candidate
WHERE status = 'WAITING_FOR_SIGNALS'`

// endedStatuses are the step statuses after which an attempt never waits
// again.
var endedStatuses = []string{
	"SUCCEEDED", "COMPLETED_WITH_ERROR", "UNSATISFIED", "SKIPPED", "DISABLED", "FATALLY_FAILED",
	"INTERNALLY_FAILED", "STOPPED", "TIMED_OUT", "USER_FAILED", "PLATFORM_FAILED", "TIMEOUT_FAILED",
}

// sqlRegister records an attempt as waiting (or finds it recorded) and
// returns when it began and whether its dependencies were bypassed.
const sqlRegister = `
INSERT INTO step_signal_wait (workflow_id, instance_id, run_id, step_id, attempt_id, group_id, signal_names)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (workflow_id, instance_id, run_id, step_id, attempt_id)
    DO UPDATE SET group_id = EXCLUDED.group_id, signal_names = EXCLUDED.signal_names
RETURNING create_time, COALESCE(bypassed_by, '')`

const sqlDone = `
UPDATE step_signal_wait SET done_time = now(), matched = $6
WHERE workflow_id = $1 AND instance_id = $2 AND run_id = $3 AND step_id = $4 AND attempt_id = $5`

// sqlBypass records a bypass, only while the attempt is waiting: its wait
// is open (its dependencies were not found met) and its row says so.
const sqlBypass = `
UPDATE step_signal_wait w SET bypassed_by = $6, bypass_time = now()
WHERE w.workflow_id = $1 AND w.instance_id = $2 AND w.run_id = $3 AND w.step_id = $4 AND w.attempt_id = $5
  AND w.bypassed_by IS NULL AND w.done_time IS NULL
  AND EXISTS (SELECT 1 FROM step_instance s
      WHERE (s.workflow_id, s.instance_id, s.run_id, s.step_id, s.attempt_id) =
            (w.workflow_id, w.instance_id, w.run_id, w.step_id, w.attempt_id)
        AND s.status = 'WAITING_FOR_SIGNALS')`

// matchPage is how many signals one query reads while looking for a match.
const matchPage = 200

// Store reads and writes signals and the waits of steps.
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Insert stores a checked signal inside tx. A request whose name and
// request id are already stored is a duplicate: the stored signal is
// returned with dup set and nothing is written.
func Insert(ctx context.Context, tx pgx.Tx, r Request) (s *Signal, dup bool, err error) {
	if _, err := tx.Exec(ctx, sqlLockExclusive, lockClass, r.Name); err != nil {
		return nil, false, fmt.Errorf("lock signal name %q: %w", r.Name, err)
	}
	params, payload := orEmpty(r.Params), orEmpty(r.Payload)
	s = &Signal{Name: r.Name, Params: params, Payload: payload, RequestID: r.RequestID, RequestTime: r.RequestTime}
	err = tx.QueryRow(ctx, sqlInsertSignal, r.Name, params, payload, r.RequestID, r.RequestTime).Scan(&s.Seq, &s.CreateTime)
	if errors.Is(err, pgx.ErrNoRows) {
		s, err = scanSignal(tx.QueryRow(ctx, sqlSignalByRequest, r.Name, r.RequestID))
		if err != nil {
			return nil, false, fmt.Errorf("read signal %q request %q: %w", r.Name, r.RequestID, err)
		}
		return s, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("insert signal %q: %w", r.Name, err)
	}
	return s, false, nil
}

// Waiters returns the step attempts waiting for signals of name, inside
// the announcing transaction (after Insert, which holds the name's lock).
func Waiters(ctx context.Context, tx pgx.Tx, name string) ([]Waiter, error) {
	rows, err := tx.Query(ctx, sqlWaiters, name, endedStatuses)
	if err != nil {
		return nil, fmt.Errorf("find steps waiting for signal %q: %w", name, err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Waiter, error) {
		var w Waiter
		err := r.Scan(&w.WorkflowID, &w.InstanceID, &w.RunID, &w.StepID, &w.Group)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("find steps waiting for signal %q: %w", name, err)
	}
	return ws, nil
}

// Bypass records, inside tx, that user bypassed the signal dependencies of
// a waiting attempt. It reports false when the attempt is not (or no
// longer) waiting, or was bypassed already.
func Bypass(ctx context.Context, tx pgx.Tx, k WaitKey, user string) (bool, error) {
	tag, err := tx.Exec(ctx, sqlBypass, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID, user)
	if err != nil {
		return false, fmt.Errorf("bypass signal dependencies of step %s attempt %d: %w", k.StepID, k.AttemptID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Latest returns the newest signal of name.
func (s *Store) Latest(ctx context.Context, name string) (*Signal, error) {
	sig, err := scanSignal(s.db.QueryRow(ctx, sqlSignalsBefore, name, int64(1<<63-1), 1))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("signal %q: %w", name, ErrNotFound)
	}
	return sig, err
}

// Get returns the signal of name with seq id seq.
func (s *Store) Get(ctx context.Context, name string, seq int64) (*Signal, error) {
	sig, err := scanSignal(s.db.QueryRow(ctx, sqlSignalBySeq, name, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("signal %q instance %d: %w", name, seq, ErrNotFound)
	}
	return sig, err
}

// Check registers an attempt as waiting for deps (idempotently; group is
// the flow group that owns its run) and matches deps against the stored
// signals, in one transaction that holds the names' shared locks (see
// lockClass). When the dependencies are met or were bypassed, the wait is
// closed and the matched signals are recorded on it.
func (s *Store) Check(ctx context.Context, k WaitKey, group int32, deps []Dependency) (CheckResult, error) {
	var res CheckResult
	names := make([]string, 0, len(deps))
	for _, d := range deps {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		res = CheckResult{Matched: make([]*Signal, len(deps))}
		for _, n := range names {
			if _, err := tx.Exec(ctx, sqlLockShared, lockClass, n); err != nil {
				return fmt.Errorf("lock signal name %q: %w", n, err)
			}
		}
		if err := tx.QueryRow(ctx, sqlRegister, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID, group, names).
			Scan(&res.Since, &res.BypassedBy); err != nil {
			return fmt.Errorf("register signal wait: %w", err)
		}
		res.Met = true
		for i, d := range deps {
			sig, err := match(ctx, tx, d)
			if err != nil {
				return err
			}
			res.Matched[i] = sig
			res.Met = res.Met && sig != nil
		}
		if !res.Met && res.BypassedBy == "" {
			return nil
		}
		matched, _ := json.Marshal(matchedRefs(deps, res.Matched))
		_, err := tx.Exec(ctx, sqlDone, k.WorkflowID, k.InstanceID, k.RunID, k.StepID, k.AttemptID, matched)
		if err != nil {
			return fmt.Errorf("close signal wait: %w", err)
		}
		return nil
	})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check signal dependencies of step %s attempt %d: %w", k.StepID, k.AttemptID, err)
	}
	return res, nil
}

// match returns the newest signal satisfying d, or nil.
func match(ctx context.Context, tx pgx.Tx, d Dependency) (*Signal, error) {
	before := int64(1<<63 - 1)
	for {
		rows, err := tx.Query(ctx, sqlSignalsBefore, d.Name, before, matchPage)
		if err != nil {
			return nil, fmt.Errorf("read signals %q: %w", d.Name, err)
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Signal, error) { return scanSignal(r) })
		if err != nil {
			return nil, fmt.Errorf("read signals %q: %w", d.Name, err)
		}
		for _, s := range page {
			if d.Satisfied(s.Params) {
				return s, nil
			}
		}
		if len(page) < matchPage {
			return nil, nil
		}
		before = page[len(page)-1].Seq
	}
}

// matchedRef is what a closed wait records per dependency.
type matchedRef struct {
	Name string `json:"name"`
	Seq  int64  `json:"seq_id,omitempty"`
}

func matchedRefs(deps []Dependency, sigs []*Signal) []matchedRef {
	out := make([]matchedRef, len(deps))
	for i, d := range deps {
		out[i].Name = d.Name
		if sigs[i] != nil {
			out[i].Seq = sigs[i].Seq
		}
	}
	return out
}

func scanSignal(row pgx.Row) (*Signal, error) {
	var (
		s               Signal
		params, payload []byte
	)
	if err := row.Scan(&s.Seq, &s.Name, &params, &payload, &s.RequestID, &s.CreateTime, &s.RequestTime); err != nil {
		return nil, err
	}
	var err error
	if s.Params, err = decodeObject(params); err != nil {
		return nil, fmt.Errorf("decode params of signal %d: %w", s.Seq, err)
	}
	if s.Payload, err = decodeObject(payload); err != nil {
		return nil, fmt.Errorf("decode payload of signal %d: %w", s.Seq, err)
	}
	// Params are strings or integers (Request.Check); integers come back
	// as int64.
	for k, v := range s.Params {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				s.Params[k] = i
			}
		}
	}
	return &s, nil
}

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(b []byte) (map[string]any, error) {
	out := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
